// ProcessGroupFerry (backend.hpp): argument checks on the caller's thread, operations on ferry's
// progress thread.
#include "python/c10d/backend.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <exception>
#include <numeric>
#include <string>

// A CUDA tensor's call is issued on its stream (backend_cuda.cpp); without CUDA there are none.
#if FERRY_TORCH_CUDA
#define FERRY_IF_CUDA(tensor, ...) \
  if ((tensor).is_cuda()) {        \
    __VA_ARGS__                    \
  }
#else
#define FERRY_IF_CUDA(tensor, ...)
#endif

namespace ferry::torch_c10d {

namespace {

constexpr const char* kUniqueIdKey = "ferry/unique_id";

size_t bytesOf(const Buffer& b) { return b.count * dataTypeSize(b.type); }

// True when bufs[i] starts where bufs[i-1] ends, for every i: one contiguous buffer in order.
bool adjacent(const std::vector<Buffer>& bufs) {
  for (size_t i = 1; i < bufs.size(); ++i) {
    if (static_cast<const char*>(bufs[i].data) != static_cast<const char*>(bufs[i - 1].data) + bytesOf(bufs[i - 1])) {
      return false;
    }
  }
  return true;
}

// The buffers of `lists` whose staging copy goes back into the caller's tensor after the operation.
std::vector<Buffer> stagedOutputs(std::initializer_list<std::vector<Buffer>> lists) {
  std::vector<Buffer> out;
  for (const auto& list : lists) {
    for (const Buffer& b : list) {
      if (b.writeBack) out.push_back(b);
    }
  }
  return out;
}

// A staging buffer of `bytes`, uninitialised.
std::unique_ptr<char[]> staging(size_t bytes) { return std::unique_ptr<char[]>(new char[bytes > 0 ? bytes : 1]); }

// Run `body`, turning anything it throws into a Status (the progress thread must not unwind).
Status runGuarded(const std::function<Status(Comm&)>& body, Comm& c) {
  try {
    return body(c);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternalError, std::string("the c10d backend's operation threw: ") + e.what());
  } catch (...) {
    return Status(ErrorCode::kInternalError, "the c10d backend's operation threw an unknown exception");
  }
}

// Rows of a tensor for alltoall splits: its first dimension, and the elements in one row.
struct Rows {
  int64_t rows;
  int64_t elemsPerRow;
};
Rows rowsOf(const CallSite& at, const char* what, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.dim() >= 1, "ferry: ", at.fn, " on rank ", at.rank, ": ", what,
                    " is a scalar (expected at least one dimension to split)");
  int64_t per = 1;
  for (int64_t d = 1; d < t.dim(); ++d) per *= t.size(d);
  return {t.size(0), per};
}

// Split sizes (in rows) checked against the tensor, or an even split when none were given.
std::vector<int64_t> checkSplits(const CallSite& at, const char* what, const std::vector<int64_t>& splits, int64_t rows,
                                 int size) {
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "ferry: ", at.fn, " on rank ", at.rank, ": ", what, " is empty, so the ", rows,
                      " rows are split evenly, which needs a multiple of ", size, " rows");
    return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
  }
  TORCH_CHECK_VALUE(splits.size() == static_cast<size_t>(size), "ferry: ", at.fn, " on rank ", at.rank, ": ", what,
                    " holds ", splits.size(), " sizes (expected ", size, ", one per rank)");
  for (size_t i = 0; i < splits.size(); ++i) {
    TORCH_CHECK_VALUE(splits[i] >= 0, "ferry: ", at.fn, " on rank ", at.rank, ": ", what, "[", i, "] is ", splits[i],
                      " (expected >= 0)");
  }
  const int64_t sum = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  TORCH_CHECK_VALUE(sum == rows, "ferry: ", at.fn, " on rank ", at.rank, ": ", what, " adds up to ", sum,
                    " rows (expected ", rows, ", the tensor's first dimension)");
  return splits;
}

}  // namespace

ProcessGroupFerry::ProcessGroupFerry(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  // ferry's own deadline is FERRY_TIMEOUT; the group's timeout bounds the Store's waits (the
  // rendezvous, and a receive from any source waiting for a sender).
  UniqueId id;
  if (rank == 0) {
    auto created = UniqueId::create();
    TORCH_CHECK(created.isOk(), "ferry: process group on rank 0: ", created.status().toString());
    id = *created;
    const std::string hex = id.toHex();
    store->set(kUniqueIdKey, std::vector<uint8_t>(hex.begin(), hex.end()));
  } else {
    // Waits for rank 0 up to the store's timeout (init_process_group's timeout).
    const std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    auto parsed = UniqueId::fromHex(std::string(bytes.begin(), bytes.end()));
    TORCH_CHECK(parsed.isOk(), "ferry: process group on rank ", rank, ": the id rank 0 stored under '", kUniqueIdKey,
                "' does not parse: ", parsed.status().toString());
    id = *parsed;
  }
#if FERRY_TORCH_CUDA
  // The device torch's current one (torch.cuda.set_device before init_process_group), as NCCL's.
  const int device = defaultDevice();
  auto comm = device >= 0 ? Comm::create(id, rank, size, device) : Comm::create(id, rank, size);
#else
  auto comm = Comm::create(id, rank, size);
#endif
  TORCH_CHECK(comm.isOk(), "ferry: process group on rank ", rank, " of ", size, ": ", comm.status().toString());
  comm_ = std::move(*comm);
  anySource_ = std::make_shared<AnySource>(store, rank, size, timeout);
  p2p_ = std::make_shared<P2pBatch>(comm_.get(), anySource_);
}

ProcessGroupFerry::~ProcessGroupFerry() {
  p2p_->detach();
  // What is queued still references this group's communicator: let it run (each operation has
  // ferry's deadline), then destroy.
  Status drained = comm_->enqueue([](Comm&) { return Status::ok(); })->wait();
  (void)drained;  // each operation already reported its own outcome to its Work
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::post(c10d::OpType type, std::vector<at::Tensor> outputs, Body body,
                                                       std::vector<Buffer> staged) {
  auto work = c10::make_intrusive<FerryWork>(getRank(), type, std::move(outputs));
  postWork(work, std::move(body), std::move(staged));
  return work;
}

void ProcessGroupFerry::postWork(c10::intrusive_ptr<FerryWork> work, Body body, std::vector<Buffer> staged) {
  auto done = std::make_shared<Completion>(std::vector<c10::intrusive_ptr<FerryWork>>{work});
  p2p_->flush();  // transfers called before this collective run before it
  comm_->enqueue([done, body = std::move(body), staged = std::move(staged)](Comm& c) {
    Status st = runGuarded(body, c);
    if (st.isOk()) st = writeBack(staged);
    done->complete(st);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const CallSite at = site("broadcast");
  checkListSize(at, "tensors", tensors.size(), 1, "one tensor per process");
  const Buffer b = checkTensor(at, "tensors[0]", tensors[0], Access::kReadWrite);
  const int root = checkRoot(at, opts.rootRank, getSize());
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "ferry: broadcast on rank ", getRank(), ": rootTensor is ", opts.rootTensor,
                    " (expected 0: one tensor per process)");
  FERRY_IF_CUDA(tensors[0],
                return issueOnStream(c10d::OpType::BROADCAST, at, tensors, tensors[0], [b, root](Comm& c, Stream s) {
                  return c.broadcast(b.data, b.data, b.count, b.type, root, s);
                });)
  return post(
      c10d::OpType::BROADCAST, tensors,
      [b, root](Comm& c) { return c.broadcast(b.data, b.data, b.count, b.type, root); }, stagedOutputs({{b}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const CallSite at = site("allreduce");
  TORCH_CHECK_VALUE(!tensors.empty(), "ferry: allreduce on rank ", getRank(), ": tensors is an empty list");
  const Reduction red = toReduction(at, opts.reduceOp, "tensors[0]", tensors[0]);
  const std::vector<Buffer> bufs = checkTensors(at, "tensors", tensors, tensors[0], false, Access::kReadWrite, &red);
  const RedOp op = red.op;
  FERRY_IF_CUDA(tensors[0],
                return issueOnStream(c10d::OpType::ALLREDUCE, at, tensors, tensors[0], [bufs, op](Comm& c, Stream s) {
                  for (const Buffer& b : bufs) {
                    FERRY_TRY(c.allReduce(b.data, b.data, b.count, b.type, op, s));
                  }
                  return Status::ok();
                });)
  return post(
      c10d::OpType::ALLREDUCE, tensors,
      [bufs, op](Comm& c) {
        for (const Buffer& b : bufs) FERRY_TRY(c.allReduce(b.data, b.data, b.count, b.type, op));
        return Status::ok();
      },
      stagedOutputs({bufs}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  const CallSite at = site("allreduce_coalesced");
  TORCH_CHECK_VALUE(!tensors.empty(), "ferry: allreduce_coalesced on rank ", getRank(), ": tensors is an empty list");
  const Reduction red = toReduction(at, opts.reduceOp, "tensors[0]", tensors[0]);
  const std::vector<Buffer> bufs = checkTensors(at, "tensors", tensors, tensors[0], false, Access::kReadWrite, &red);
  const RedOp op = red.op;
  // CUDA: the all-reduces of one group, fused into one launch.
  FERRY_IF_CUDA(tensors[0], return issueOnStream(c10d::OpType::ALLREDUCE_COALESCED, at, tensors, tensors[0],
                                                 [bufs, op](Comm& c, Stream s) {
                                                   for (const Buffer& b : bufs) {
                                                     FERRY_TRY(c.allReduce(b.data, b.data, b.count, b.type, op, s));
                                                   }
                                                   return Status::ok();
                                                 });)
  // One all-reduce over the tensors packed end to end (unless they already are).
  auto staged = stagedOutputs({bufs});
  return post(
      c10d::OpType::ALLREDUCE_COALESCED, tensors,
      [bufs, op](Comm& c) {
        size_t total = 0;
        for (const Buffer& b : bufs) total += b.count;
        if (adjacent(bufs)) return c.allReduce(bufs[0].data, bufs[0].data, total, bufs[0].type, op);
        auto flat = staging(total * dataTypeSize(bufs[0].type));
        size_t off = 0;
        for (const Buffer& b : bufs) {
          std::memcpy(flat.get() + off, b.data, bytesOf(b));
          off += bytesOf(b);
        }
        FERRY_TRY(c.allReduce(flat.get(), flat.get(), total, bufs[0].type, op));
        off = 0;
        for (const Buffer& b : bufs) {
          std::memcpy(b.data, flat.get() + off, bytesOf(b));
          off += bytesOf(b);
        }
        return Status::ok();
      },
      std::move(staged));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const CallSite at = site("reduce");
  checkListSize(at, "tensors", tensors.size(), 1, "one tensor per process");
  const Reduction red = toReduction(at, opts.reduceOp, "tensors[0]", tensors[0]);
  const Buffer b = checkTensor(at, "tensors[0]", tensors[0], Access::kReadWrite, &red);
  const int root = checkRoot(at, opts.rootRank, getSize());
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "ferry: reduce on rank ", getRank(), ": rootTensor is ", opts.rootTensor,
                    " (expected 0: one tensor per process)");
  const RedOp op = red.op;
  FERRY_IF_CUDA(tensors[0],
                return issueOnStream(c10d::OpType::REDUCE, at, tensors, tensors[0], [b, op, root](Comm& c, Stream s) {
                  return c.reduce(b.data, b.data, b.count, b.type, op, root, s);
                });)
  return post(
      c10d::OpType::REDUCE, tensors,
      [b, op, root](Comm& c) { return c.reduce(b.data, b.data, b.count, b.type, op, root); }, stagedOutputs({{b}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& /*opts*/) {
  const CallSite at = site("allgather");
  checkListSize(at, "input_tensors", inputs.size(), 1, "one tensor per process");
  checkListSize(at, "output_tensors", outputs.size(), 1, "one list per process");
  checkListSize(at, "output_tensors[0]", outputs[0].size(), static_cast<size_t>(getSize()), "one tensor per rank");
  const Buffer in = checkTensor(at, "input_tensors[0]", inputs[0], Access::kRead);
  const std::vector<Buffer> outs = checkTensors(at, "output_tensors[0]", outputs[0], inputs[0], true, Access::kWrite);
  at::Tensor keep = inputs[0];
  FERRY_IF_CUDA(
      inputs[0], if (!adjacent(outs) || in.data == outs[0].data) {
        return cudaAllgatherList(at, outputs[0], inputs[0]);
      } return issueOnStream(c10d::OpType::ALLGATHER, at, outputs[0], inputs[0], [in, outs](Comm& c, Stream s) {
        return c.allGather(in.data, outs[0].data, in.count, in.type, s);
      });)
  return post(
      c10d::OpType::ALLGATHER, outputs[0],
      [in, outs, keep](Comm& c) {
        if (adjacent(outs) && in.data != outs[0].data) return c.allGather(in.data, outs[0].data, in.count, in.type);
        const size_t bytes = bytesOf(in);
        auto all = staging(bytes * outs.size());
        FERRY_TRY(c.allGather(in.data, all.get(), in.count, in.type));
        for (size_t r = 0; r < outs.size(); ++r) std::memcpy(outs[r].data, all.get() + r * bytes, bytes);
        return Status::ok();
      },
      stagedOutputs({outs}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& /*opts*/) {
  const CallSite at = site("_allgather_base");
  const Buffer in = checkTensor(at, "input_tensor", input, Access::kRead);
  const Buffer out = checkTensor(at, "output_tensor", output, Access::kWrite);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "ferry: _allgather_base on rank ", getRank(),
                    ": output_tensor has dtype ", dtypeName(output.scalar_type()), " (expected ",
                    dtypeName(input.scalar_type()), ", the input's)");
  TORCH_CHECK_VALUE(out.count == in.count * static_cast<size_t>(getSize()), "ferry: _allgather_base on rank ",
                    getRank(), ": output_tensor has ", out.count, " elements (expected ", in.count * getSize(),
                    " = world size ", getSize(), " x the input's ", in.count, ")");
  FERRY_IF_CUDA(input, return issueOnStream(c10d::OpType::_ALLGATHER_BASE, at, {output, input}, input,
                                            [in, out](Comm& c, Stream s) {
                                              return c.allGather(in.data, out.data, in.count, in.type, s);
                                            });)
  return post(
      c10d::OpType::_ALLGATHER_BASE, {output, input},
      [in, out](Comm& c) { return c.allGather(in.data, out.data, in.count, in.type); }, stagedOutputs({{out}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const CallSite at = site("gather");
  const int root = checkRoot(at, opts.rootRank, getSize());
  checkListSize(at, "input_tensors", inputs.size(), 1, "one tensor per process");
  const Buffer in = checkTensor(at, "input_tensors[0]", inputs[0], Access::kRead);
  std::vector<Buffer> outs;
  std::vector<at::Tensor> keep = inputs;
  if (getRank() == root) {
    checkListSize(at, "output_tensors", outputs.size(), 1, "one list on the root");
    checkListSize(at, "output_tensors[0]", outputs[0].size(), static_cast<size_t>(getSize()), "one tensor per rank");
    outs = checkTensors(at, "output_tensors[0]", outputs[0], inputs[0], true, Access::kWrite);
    keep.insert(keep.end(), outputs[0].begin(), outputs[0].end());
  } else {
    checkListSize(at, "output_tensors", outputs.size(), 0, "only the root receives");
  }
  std::vector<P2pOp> ops;
  for (size_t r = 0; r < outs.size(); ++r)
    ops.push_back(P2pOp::recv(outs[r].data, in.count, in.type, static_cast<int>(r)));
  ops.push_back(P2pOp::send(in.data, in.count, in.type, root));
  FERRY_IF_CUDA(inputs[0], return cudaSendRecv(c10d::OpType::GATHER, at, keep, inputs[0], ops);)
  return post(
      c10d::OpType::GATHER, keep, [ops, in](Comm& c) { return c.sendRecv(ops); }, stagedOutputs({outs}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const CallSite at = site("scatter");
  const int root = checkRoot(at, opts.rootRank, getSize());
  checkListSize(at, "output_tensors", outputs.size(), 1, "one tensor per process");
  const Buffer out = checkTensor(at, "output_tensors[0]", outputs[0], Access::kWrite);
  std::vector<Buffer> ins;
  std::vector<at::Tensor> keep = outputs;
  if (getRank() == root) {
    checkListSize(at, "input_tensors", inputs.size(), 1, "one list on the root");
    checkListSize(at, "input_tensors[0]", inputs[0].size(), static_cast<size_t>(getSize()), "one tensor per rank");
    ins = checkTensors(at, "input_tensors[0]", inputs[0], outputs[0], true, Access::kRead);
    keep.insert(keep.end(), inputs[0].begin(), inputs[0].end());
  } else {
    checkListSize(at, "input_tensors", inputs.size(), 0, "only the root sends");
  }
  std::vector<P2pOp> ops;
  for (size_t r = 0; r < ins.size(); ++r)
    ops.push_back(P2pOp::send(ins[r].data, out.count, out.type, static_cast<int>(r)));
  ops.push_back(P2pOp::recv(out.data, out.count, out.type, root));
  FERRY_IF_CUDA(outputs[0], return cudaSendRecv(c10d::OpType::SCATTER, at, keep, outputs[0], ops);)
  return post(
      c10d::OpType::SCATTER, keep, [ops, ins](Comm& c) { return c.sendRecv(ops); }, stagedOutputs({{out}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const CallSite at = site("reduce_scatter");
  checkListSize(at, "output_tensors", outputs.size(), 1, "one tensor per process");
  checkListSize(at, "input_tensors", inputs.size(), 1, "one list per process");
  checkListSize(at, "input_tensors[0]", inputs[0].size(), static_cast<size_t>(getSize()), "one tensor per rank");
  const Reduction red = toReduction(at, opts.reduceOp, "output_tensors[0]", outputs[0]);
  const Buffer out = checkTensor(at, "output_tensors[0]", outputs[0], Access::kWrite, &red);
  const std::vector<Buffer> ins =
      checkTensors(at, "input_tensors[0]", inputs[0], outputs[0], true, Access::kRead, &red);
  const RedOp op = red.op;
  std::vector<at::Tensor> keep = inputs[0];
  keep.push_back(outputs[0]);
  FERRY_IF_CUDA(
      outputs[0], if (!adjacent(ins)) {
        return cudaReduceScatterList(at, outputs[0], inputs[0], op);
      } return issueOnStream(c10d::OpType::REDUCE_SCATTER, at, keep, outputs[0], [out, ins, op](Comm& c, Stream s) {
        return c.reduceScatter(ins[0].data, out.data, out.count, out.type, op, s);
      });)
  return post(
      c10d::OpType::REDUCE_SCATTER, outputs,
      [out, ins, op, keep](Comm& c) {
        if (adjacent(ins)) return c.reduceScatter(ins[0].data, out.data, out.count, out.type, op);
        const size_t bytes = bytesOf(out);
        auto all = staging(bytes * ins.size());
        for (size_t r = 0; r < ins.size(); ++r) std::memcpy(all.get() + r * bytes, ins[r].data, bytes);
        return c.reduceScatter(all.get(), out.data, out.count, out.type, op);
      },
      stagedOutputs({{out}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const CallSite at = site("_reduce_scatter_base");
  TORCH_CHECK_VALUE(!output.defined() || !input.defined() || output.scalar_type() == input.scalar_type(),
                    "ferry: _reduce_scatter_base on rank ", getRank(), ": output_tensor has dtype ",
                    dtypeName(output.scalar_type()), " (expected ", dtypeName(input.scalar_type()), ", the input's)");
  const Reduction red = toReduction(at, opts.reduceOp, "output_tensor", output);
  const Buffer in = checkTensor(at, "input_tensor", input, Access::kRead, &red);
  const Buffer out = checkTensor(at, "output_tensor", output, Access::kWrite, &red);
  TORCH_CHECK_VALUE(in.count == out.count * static_cast<size_t>(getSize()), "ferry: _reduce_scatter_base on rank ",
                    getRank(), ": input_tensor has ", in.count, " elements (expected ", out.count * getSize(),
                    " = world size ", getSize(), " x the output's ", out.count, ")");
  const RedOp op = red.op;
  FERRY_IF_CUDA(input, return issueOnStream(c10d::OpType::_REDUCE_SCATTER_BASE, at, {output, input}, input,
                                            [in, out, op](Comm& c, Stream s) {
                                              return c.reduceScatter(in.data, out.data, out.count, out.type, op, s);
                                            });)
  return post(
      c10d::OpType::_REDUCE_SCATTER_BASE, {output, input},
      [in, out, op](Comm& c) { return c.reduceScatter(in.data, out.data, out.count, out.type, op); },
      stagedOutputs({{out}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions& /*opts*/) {
  const CallSite at = site("alltoall_base");
  const Buffer in = checkTensor(at, "input", input, Access::kRead);
  const Buffer out = checkTensor(at, "output", output, Access::kWrite);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "ferry: alltoall_base on rank ", getRank(),
                    ": output has dtype ", dtypeName(output.scalar_type()), " (expected ",
                    dtypeName(input.scalar_type()), ", the input's)");
  const int n = getSize();
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(in.count == out.count && in.count % static_cast<size_t>(n) == 0, "ferry: alltoall_base on rank ",
                      getRank(), ": input has ", in.count, " and output ", out.count,
                      " elements (expected equal counts, a multiple of the world size ", n, ")");
    const size_t per = in.count / static_cast<size_t>(n);
    FERRY_IF_CUDA(input, return issueOnStream(c10d::OpType::ALLTOALL_BASE, at, {output, input}, input,
                                              [in, out, per](Comm& c, Stream s) {
                                                return c.allToAll(in.data, out.data, per, in.type, s);
                                              });)
    return post(
        c10d::OpType::ALLTOALL_BASE, {output, input},
        [in, out, per](Comm& c) { return c.allToAll(in.data, out.data, per, in.type); }, stagedOutputs({{out}}));
  }
  // Uneven: one batch of transfers, rank r's rows of the input to rank r, rank r's rows from it.
  const Rows inRows = rowsOf(at, "input", input);
  const Rows outRows = rowsOf(at, "output", output);
  const std::vector<int64_t> ins = checkSplits(at, "input_split_sizes", inputSplits, inRows.rows, n);
  const std::vector<int64_t> outs = checkSplits(at, "output_split_sizes", outputSplits, outRows.rows, n);
  TORCH_CHECK_VALUE(inRows.elemsPerRow == outRows.elemsPerRow, "ferry: alltoall_base on rank ", getRank(),
                    ": a row of output holds ", outRows.elemsPerRow, " elements (expected ", inRows.elemsPerRow,
                    ", as a row of input)");
  TORCH_CHECK_VALUE(ins[getRank()] == outs[getRank()], "ferry: alltoall_base on rank ", getRank(),
                    ": this rank sends itself ", ins[getRank()], " rows but expects ", outs[getRank()]);
  std::vector<P2pOp> ops;
  const size_t row = static_cast<size_t>(inRows.elemsPerRow) * in.per;  // in the type the tensor travels as
  const size_t elem = dataTypeSize(in.type);
  size_t inOff = 0, outOff = 0;
  for (int r = 0; r < n; ++r) {
    const size_t sendCount = static_cast<size_t>(ins[r]) * row, recvCount = static_cast<size_t>(outs[r]) * row;
    ops.push_back(P2pOp::send(static_cast<char*>(in.data) + inOff * elem, sendCount, in.type, r));
    ops.push_back(P2pOp::recv(static_cast<char*>(out.data) + outOff * elem, recvCount, in.type, r));
    inOff += sendCount;
    outOff += recvCount;
  }
  FERRY_IF_CUDA(input, return cudaSendRecv(c10d::OpType::ALLTOALL_BASE, at, {output, input}, input, ops);)
  return post(
      c10d::OpType::ALLTOALL_BASE, {output, input}, [ops, in](Comm& c) { return c.sendRecv(ops); },
      stagedOutputs({{out}}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& /*opts*/) {
  const CallSite at = site("alltoall");
  const size_t n = static_cast<size_t>(getSize());
  checkListSize(at, "input_tensor_list", inputs.size(), n, "one tensor per rank");
  checkListSize(at, "output_tensor_list", outputs.size(), n, "one tensor per rank");
  const std::vector<Buffer> ins = checkTensors(at, "input_tensor_list", inputs, inputs[0], false, Access::kRead);
  const std::vector<Buffer> outs = checkTensors(at, "output_tensor_list", outputs, inputs[0], false, Access::kWrite);
  const int me = getRank();
  TORCH_CHECK_VALUE(ins[me].count == outs[me].count, "ferry: alltoall on rank ", me, ": input_tensor_list[", me,
                    "] has ", ins[me].count, " elements but output_tensor_list[", me, "] ", outs[me].count,
                    " (expected equal: this rank's own part)");
  std::vector<P2pOp> ops;
  for (size_t r = 0; r < n; ++r) {
    ops.push_back(P2pOp::send(ins[r].data, ins[r].count, ins[r].type, static_cast<int>(r)));
    ops.push_back(P2pOp::recv(outs[r].data, outs[r].count, outs[r].type, static_cast<int>(r)));
  }
  std::vector<at::Tensor> keep = outputs;
  keep.insert(keep.end(), inputs.begin(), inputs.end());
  FERRY_IF_CUDA(inputs[0], return cudaSendRecv(c10d::OpType::ALLTOALL, at, keep, inputs[0], ops);)
  return post(
      c10d::OpType::ALLTOALL, keep, [ops, ins](Comm& c) { return c.sendRecv(ops); }, stagedOutputs({outs}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::postP2p(c10d::OpType type, const CallSite& at,
                                                          std::vector<at::Tensor>& tensors, int peer) {
  checkListSize(at, "tensors", tensors.size(), 1, "one tensor per process");
  const Buffer b =
      checkTensor(at, "tensors[0]", tensors[0], type == c10d::OpType::SEND ? Access::kRead : Access::kWrite);
  const P2pOp op = type == c10d::OpType::SEND ? P2pOp::send(b.data, b.count, b.type, peer)
                                              : P2pOp::recv(b.data, b.count, b.type, peer);
#if FERRY_TORCH_CUDA
  if (tensors[0].is_cuda()) {
    if (!coalescing_) return cudaSendRecv(type, at, tensors, tensors[0], {op});
    // Inside batch_isend_irecv: issued together at endCoalescing, whose Works stand for these.
    coalescedOps_.push_back(op);
    coalescedKeep_.push_back(tensors[0]);
    auto work = c10::make_intrusive<FerryWork>(getRank(), type, tensors, nullptr,
                                               std::vector<c10::Device>{tensors[0].device()});
    coalescedWorks_.push_back(work);
    return work;
  }
#endif
  std::weak_ptr<P2pBatch> batch = p2p_;
  auto work = c10::make_intrusive<FerryWork>(getRank(), type, tensors, [batch] {
    if (auto b = batch.lock()) b->flush();
  });
  p2p_->add(op, b, work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const CallSite at = site("send");
  const int peer = checkPeer(at, "dst", dstRank, getSize());
  auto work = postP2p(c10d::OpType::SEND, at, tensors, peer);
  anySource_->announceSend(peer);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const CallSite at = site("recv");
  return postP2p(c10d::OpType::RECV, at, tensors, checkPeer(at, "src", srcRank, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  const CallSite at = site("recv from any source");
  checkListSize(at, "tensors", tensors.size(), 1, "one tensor per process");
  const Buffer b = checkTensor(at, "tensors[0]", tensors[0], Access::kWrite);
  TORCH_CHECK_VALUE(!tensors[0].is_cuda(), "ferry: recv from any source on rank ", getRank(), ": tensors[0] is on ",
                    tensors[0].device(), " (expected a CPU tensor, as Gloo's)");
  TORCH_CHECK_VALUE(getSize() > 1, "ferry: recv from any source on rank ", getRank(),
                    ": the group has no other rank to receive from");
  auto work = c10::make_intrusive<FerryWork>(getRank(), c10d::OpType::RECVANYSOURCE, tensors);
  p2p_->flush();  // receives called before this one are counted first
  std::shared_ptr<AnySource> any = anySource_;
  postWork(
      work,
      [b, any, work](Comm& c) {
        Result<int> peer = any->pickSender(c);
        FERRY_TRY(peer);
        work->setSourceRank(*peer);
        return c.recv(b.data, b.count, b.type, *peer);
      },
      stagedOutputs({{b}}));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFerry::barrier(const c10d::BarrierOptions& /*opts*/) {
  return post(c10d::OpType::BARRIER, {}, [](Comm& c) { return c.barrier(); });
}

// Host tensors' send/recv are batched anyway; CUDA tensors' wait for the end of the block.
void ProcessGroupFerry::startCoalescing() {
#if FERRY_TORCH_CUDA
  coalescing_ = true;
#endif
}

void ProcessGroupFerry::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) {
  p2p_->flush();
#if FERRY_TORCH_CUDA
  coalescing_ = false;
  if (coalescedOps_.empty()) return;
  std::vector<P2pOp> ops = std::move(coalescedOps_);
  std::vector<at::Tensor> keep = std::move(coalescedKeep_);
  std::vector<c10::intrusive_ptr<FerryWork>> works = std::move(coalescedWorks_);
  coalescedOps_.clear();
  coalescedKeep_.clear();
  coalescedWorks_.clear();
  (void)reqs;  // this block's CUDA requests are `works`; host ones complete with their batch
  try {
    cudaSendRecv(c10d::OpType::SEND, site("batch_isend_irecv"), keep, keep[0], ops);
  } catch (const std::exception& e) {
    for (auto& w : works) w->complete(Status(ErrorCode::kRemoteError, e.what()));
    throw;
  }
  // Issued: each request's future records its event on the stream now, after the transfers.
  for (auto& w : works) w->complete(Status::ok());
#else
  (void)reqs;
#endif
}

}  // namespace ferry::torch_c10d
