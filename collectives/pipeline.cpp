#include "collectives/pipeline.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/ring_math.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {

using transport::Request;

size_t sliceElems(const Exec& ex, DataType type) {
  size_t es = dataTypeSize(type);
  return std::max<size_t>(1, ex.context().sliceBytes / es);
}

Status sendSlices(Exec& ex, int peer, const uint8_t* buf, size_t elems, DataType type) {
  size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  for (size_t k = 0, n = sliceCount(elems, se); k < n; ++k) {
    FERRY_TRY(ex.send(peer, buf + sliceBegin(k, se) * es, sliceLength(elems, k, se) * es));
  }
  return Status::ok();
}

Status recvReduceForward(Exec& ex, int prev, int next, const std::vector<ReduceTask>& tasks, DataType type, RedOp op,
                         uint32_t divisor, const char* phase, int steps) {
  if (tasks.empty()) return Status::ok();
  const size_t es = dataTypeSize(type);
  size_t maxElems = 0;
  for (const auto& t : tasks) maxElems = std::max(maxElems, t.elems);
  const size_t depth = std::min<size_t>(std::max(1, ex.context().depth), tasks.size());
  const size_t slotBytes = (maxElems * es + 63) & ~size_t{63};
  auto* staging = static_cast<uint8_t*>(ex.context().staging->get(slotBytes * depth));
  if (staging == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of staging memory", slotBytes * depth);
  }
  const RedOp combine = op == RedOp::kAvg ? RedOp::kSum : op;
  std::vector<Request*> recvs(tasks.size(), nullptr);
  auto post = [&](size_t i) -> Status {
    auto r = ex.recv(tasks[i].from >= 0 ? tasks[i].from : prev, staging + (i % depth) * slotBytes, tasks[i].elems * es);
    FERRY_TRY(r);
    recvs[i] = *r;
    return Status::ok();
  };
  for (size_t i = 0; i < depth; ++i) FERRY_TRY(post(i));
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ReduceTask& t = tasks[i];
    ex.setPhase(phase, t.step, steps);
    FERRY_TRY(ex.wait(recvs[i]));
    const uint8_t* got = staging + (i % depth) * slotBytes;
    if (t.last && op == RedOp::kAvg) {
      kernels::sumDivide(type, t.dst, got, t.own, t.elems, divisor);
    } else {
      kernels::reduce(type, combine, t.dst, got, t.own, t.elems);
    }
    if (t.forward) FERRY_TRY(ex.send(t.to >= 0 ? t.to : next, t.dst, t.elems * es));
    if (i + depth < tasks.size()) FERRY_TRY(post(i + depth));
  }
  return Status::ok();
}

Status recvForward(Exec& ex, int prev, int next, const std::vector<CopyTask>& tasks, DataType type, const char* phase,
                   int steps) {
  const size_t es = dataTypeSize(type);
  std::vector<Request*> recvs;
  recvs.reserve(tasks.size());
  for (const auto& t : tasks) {
    auto r = ex.recv(t.from >= 0 ? t.from : prev, t.dst, t.elems * es);
    FERRY_TRY(r);
    recvs.push_back(*r);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    ex.setPhase(phase, tasks[i].step, steps);
    FERRY_TRY(ex.wait(recvs[i]));
    if (tasks[i].forward) FERRY_TRY(ex.send(tasks[i].to >= 0 ? tasks[i].to : next, tasks[i].dst, tasks[i].elems * es));
  }
  return Status::ok();
}

}  // namespace ferry::coll
