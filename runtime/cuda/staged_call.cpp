// The staged route (see staged_call.hpp).
#include "runtime/cuda/staged_call.hpp"

#include "base/log.hpp"
#include "runtime/cuda/staging.hpp"

namespace ferry::gpu {
namespace {

constexpr size_t kAlign = 256;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// What the host function runs: the works with the staging buffers in place of the caller's.
struct StagedRecord {
  Comm* comm = nullptr;
  std::vector<DevWork> works;
  Where where;
  bool oneShot = true;  // not captured: the host function frees the record after running it
};

void runStaged(void* arg) {
  auto* rec = static_cast<StagedRecord*>(arg);
  Status st = runOnHost(*rec->comm, rec->works);
  if (!st.isOk()) {
    FERRY_WARN(log::kColl,
               "staged collective (%s%s) on rank %d, device %d failed in its stream's host function: %s; the "
               "communicator's next call returns the error",
               describe(rec->works[0], false).c_str(), rec->works.size() > 1 ? " and others" : "", rec->where.rank,
               rec->where.device, st.message().c_str());
  }
  if (rec->oneShot) delete rec;
}

}  // namespace

Status issueStaged(Comm& comm, DeviceContext& ctx, const std::vector<DevWork>& works, Stream stream) {
  const Where w = ctx.where();
  const int rank = comm.rank(), n = comm.size();
  size_t inBytes = 0, outBytes = 0;
  for (const DevWork& d : works) {
    inBytes += alignUp(sendBytes(d, rank, n));
    outBytes += alignUp(recvBytes(d, rank, n));
  }
  auto pair = ctx.staging().get(stream, std::max(inBytes, outBytes));
  FERRY_TRY(pair);
  auto capturing = streamCapturing(stream, w);
  FERRY_TRY(capturing);

  auto rec = std::make_unique<StagedRecord>();
  rec->comm = &comm;
  rec->where = w;
  rec->oneShot = !*capturing;
  size_t inOff = 0, outOff = 0;
  for (const DevWork& d : works) {
    DevWork h = d;
    const size_t sb = sendBytes(d, rank, n), rb = recvBytes(d, rank, n);
    h.send = sb > 0 ? pair->in + inOff : nullptr;
    h.recv = rb > 0 ? pair->out + outOff : nullptr;
    if (d.kind == CallKind::kBroadcast && rank != d.root) h.send = nullptr;
    if (sb > 0) FERRY_TRY(copyAsync(pair->in + inOff, d.send, sb, stream, w));
    inOff += alignUp(sb);
    outOff += alignUp(rb);
    rec->works.push_back(h);
  }
  StagedRecord* raw = rec.get();
  FERRY_TRY(launchHostFunc(stream, runStaged, raw, w));
  if (raw->oneShot) {
    rec.release();  // the host function owns it now
  } else {
    ctx.staging().keep(std::shared_ptr<void>(rec.release(), [](void* p) { delete static_cast<StagedRecord*>(p); }));
  }
  outOff = 0;
  for (const DevWork& d : works) {
    const size_t rb = recvBytes(d, rank, n);
    if (rb > 0) FERRY_TRY(copyAsync(d.recv, pair->out + outOff, rb, stream, w));
    outOff += alignUp(rb);
  }
  return Status::ok();
}

}  // namespace ferry::gpu
