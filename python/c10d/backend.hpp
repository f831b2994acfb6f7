// ProcessGroupFerry: torch.distributed's backend "ferry" over one ferry communicator.
//
// Rendezvous: rank 0 creates ferry's UniqueId and publishes it in torch's Store (the group's
// prefixed store, so every group meets apart); the others read it and all join with Comm::create.
//
// Execution: every call checks its arguments on the caller's thread (errors are raised there, at
// once) and queues its operation on the communicator's progress thread, in call order; it returns
// a FerryWork that completes when the operation ran. Outputs that are not one contiguous buffer
// (a list of tensors) are gathered from or scattered to a staging tensor on the progress thread.
//
// Send and receive: isend/irecv are collected and handed to the progress thread as one batch of
// Comm::sendRecv when one of them is waited on (or polled, or its future taken), when a collective
// is called, or when a coalescing block (batch_isend_irecv) ends. A batch posts every transfer at
// once, so ranks that each send before they receive cannot deadlock on large messages, as they
// could if every send ran alone. Tags are accepted and ignored: transfers between two ranks match
// in the order they were made, as in NCCL. A receive from any source (recv with src=None) finds its
// sender through counters in the Store (any_source.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/comm.hpp"
#include "python/c10d/compat.hpp"
#include "python/c10d/p2p_batch.hpp"
#include "python/c10d/tensor_args.hpp"
#include "python/c10d/work.hpp"

namespace ferry::torch_c10d {

class ProcessGroupFerry final : public BackendBase {
 public:
  /// Joins the group (blocks until every rank arrived, or ferry's deadline FERRY_TIMEOUT passed).
  ProcessGroupFerry(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  /// Starts what is still batched and waits for the queued operations (each has a deadline).
  ~ProcessGroupFerry() override;

  const std::string getBackendName() const override { return "ferry"; }
  /// The communicator, for ferry's own API (ferry.Comm in Python shares it).
  ferry::Comm& comm() { return *comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  /// Receive from whichever rank sends to this one (any_source.hpp); the Work's sourceRank() names it.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

 private:
  using Body = std::function<Status(ferry::Comm&)>;
  /// Queue `body` after what this group queued before (batched transfers first); the Work
  /// completes with its status and carries `outputs`. The `staged` outputs are copied back into
  /// their tensors once `body` succeeded.
  c10::intrusive_ptr<c10d::Work> post(c10d::OpType type, std::vector<at::Tensor> outputs, Body body,
                                      std::vector<Buffer> staged = {});
  /// post() for a Work made by the caller.
  void postWork(c10::intrusive_ptr<FerryWork> work, Body body, std::vector<Buffer> staged);
  /// One batched transfer (send or receive of `tensor` with `peer`).
  c10::intrusive_ptr<c10d::Work> postP2p(c10d::OpType type, const CallSite& at, std::vector<at::Tensor>& tensors,
                                         int peer);
  CallSite site(const char* fn) const { return {fn, getRank()}; }

#if FERRY_TORCH_CUDA
  // CUDA tensors (backend_cuda.cpp): issued at once on the tensors' current stream.
  /// The device this process drives: torch's current CUDA device, or -1 without one.
  static int defaultDevice();
  /// Run `issue` inside one ferry group on `sample`'s current stream; the Work is complete at once
  /// and its future waits for that stream.
  c10::intrusive_ptr<c10d::Work> issueOnStream(c10d::OpType type, const CallSite& at, std::vector<at::Tensor> outputs,
                                               const at::Tensor& sample,
                                               const std::function<Status(Comm&, Stream)>& issue);
  c10::intrusive_ptr<c10d::Work> cudaAllgatherList(const CallSite& at, std::vector<at::Tensor>& outs,
                                                   const at::Tensor& in);
  c10::intrusive_ptr<c10d::Work> cudaReduceScatterList(const CallSite& at, at::Tensor& out,
                                                       std::vector<at::Tensor>& ins, RedOp op);
  c10::intrusive_ptr<c10d::Work> cudaSendRecv(c10d::OpType type, const CallSite& at, std::vector<at::Tensor> keep,
                                              const at::Tensor& sample, const std::vector<P2pOp>& ops);
  bool coalescing_ = false;          // inside startCoalescing / endCoalescing
  std::vector<P2pOp> coalescedOps_;  // CUDA transfers of the open block
  std::vector<at::Tensor> coalescedKeep_;
  std::vector<c10::intrusive_ptr<FerryWork>> coalescedWorks_;
#endif

  std::unique_ptr<ferry::Comm> comm_;
  std::shared_ptr<AnySource> anySource_;
  std::shared_ptr<P2pBatch> p2p_;
};

}  // namespace ferry::torch_c10d
