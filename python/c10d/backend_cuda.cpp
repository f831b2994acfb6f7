// ProcessGroupFerry's CUDA tensors (built when both torch and ferry have CUDA: FERRY_TORCH_CUDA).
//
// NCCL's model: a call on CUDA tensors is issued at once, from the caller's thread, on the
// current stream of the tensors' device, as ferry's stream-ordered calls (kernels on that stream);
// the Work is complete as soon as it is issued and its future records an event on that stream, so
// wait() orders the caller's later work after the collective without blocking the host. Lists
// that are not one buffer are staged through a device tensor with torch's copies on the same
// stream. Send and receive go into one ferry group per call, or per coalescing block
// (batch_isend_irecv), so pairs issued in any order cannot deadlock inside a block.
#if FERRY_TORCH_CUDA

#include "python/c10d/backend.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

namespace ferry::torch_c10d {

namespace {

Stream currentStream(const at::Tensor& t) {
  return reinterpret_cast<Stream>(c10::cuda::getCurrentCUDAStream(t.device().index()).stream());
}

void raiseIfFailed(const CallSite& at, const Status& st) {
  TORCH_CHECK(st.isOk(), "ferry: ", at.fn, " on rank ", at.rank, ": ", st.toString());
}

}  // namespace

int ProcessGroupFerry::defaultDevice() {
  return c10::cuda::device_count() > 0 ? static_cast<int>(c10::cuda::current_device()) : -1;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::issueOnStream(c10d::OpType type, const CallSite& at,
                                                                std::vector<at::Tensor> outputs,
                                                                const at::Tensor& sample,
                                                                const std::function<Status(Comm&, Stream)>& issue) {
  TORCH_CHECK_VALUE(comm_->device() == sample.device().index(), "ferry: ", at.fn, " on rank ", at.rank,
                    ": the tensor is on ", sample.device(), " but this process group drives cuda:", comm_->device(),
                    " (call torch.cuda.set_device before init_process_group)");
  p2p_->flush();
  const Stream stream = currentStream(sample);
  Status st = groupStart();
  if (st.isOk()) {
    Status issued = issue(*comm_, stream);
    Status ended = groupEnd();
    st = issued.isOk() ? ended : issued;
  }
  raiseIfFailed(at, st);
  auto work = c10::make_intrusive<FerryWork>(getRank(), type, std::move(outputs), nullptr,
                                             std::vector<c10::Device>{sample.device()});
  work->complete(Status::ok());  // records the future's event on the current stream, after the kernels
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::cudaAllgatherList(const CallSite& at, std::vector<at::Tensor>& outs,
                                                                    const at::Tensor& in) {
  at::Tensor flat = at::empty({static_cast<int64_t>(outs.size()) * in.numel()}, in.options());
  const Buffer src = checkTensor(at, "input_tensors[0]", in);
  const Buffer dst = checkTensor(at, "staging", flat);
  auto work = issueOnStream(c10d::OpType::ALLGATHER, at, outs, in,
                            [&](Comm& c, Stream s) { return c.allGather(src.data, dst.data, src.count, src.type, s); });
  at::NoGradGuard noGrad;
  for (size_t r = 0; r < outs.size(); ++r) {
    outs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * in.numel(), in.numel()).view_as(outs[r]));
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::cudaReduceScatterList(const CallSite& at, at::Tensor& out,
                                                                        std::vector<at::Tensor>& ins, RedOp op) {
  at::Tensor flat;
  {
    at::NoGradGuard noGrad;
    flat = at::cat(ins).reshape(-1);
  }
  const Buffer src = checkTensor(at, "staging", flat);
  const Buffer dst = checkTensor(at, "output_tensors[0]", out);
  return issueOnStream(c10d::OpType::REDUCE_SCATTER, at, {out}, out, [&](Comm& c, Stream s) {
    return c.reduceScatter(src.data, dst.data, dst.count, dst.type, op, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::cudaSendRecv(c10d::OpType type, const CallSite& at,
                                                               std::vector<at::Tensor> keep, const at::Tensor& sample,
                                                               const std::vector<P2pOp>& ops) {
  return issueOnStream(type, at, std::move(keep), sample, [&](Comm& c, Stream s) {
    // Transfers to this rank itself pair in order and become device copies on the stream.
    std::vector<const P2pOp*> selfSends, selfRecvs;
    for (const P2pOp& op : ops) {
      if (op.peer == c.rank()) {
        (op.kind == P2pOp::Kind::kSend ? selfSends : selfRecvs).push_back(&op);
        continue;
      }
      FERRY_TRY(op.kind == P2pOp::Kind::kSend ? c.send(op.buffer, op.count, op.type, op.peer, s)
                                              : c.recv(op.buffer, op.count, op.type, op.peer, s));
    }
    if (selfSends.size() != selfRecvs.size()) {
      return makeError(ErrorCode::kInvalidArgument, "rank %d sends %zu transfers to itself but receives %zu", c.rank(),
                       selfSends.size(), selfRecvs.size());
    }
    for (size_t i = 0; i < selfSends.size(); ++i) {
      const size_t bytes = selfSends[i]->count * dataTypeSize(selfSends[i]->type);
      if (bytes == 0 || selfSends[i]->buffer == selfRecvs[i]->buffer) continue;
      if (cudaMemcpyAsync(selfRecvs[i]->buffer, selfSends[i]->buffer, bytes, cudaMemcpyDeviceToDevice,
                          reinterpret_cast<cudaStream_t>(s)) != cudaSuccess) {
        return makeError(ErrorCode::kUnhandledCudaError, "rank %d: copying %zu bytes to itself failed", c.rank(),
                         bytes);
      }
    }
    return Status::ok();
  });
}

}  // namespace ferry::torch_c10d

#endif  // FERRY_TORCH_CUDA
