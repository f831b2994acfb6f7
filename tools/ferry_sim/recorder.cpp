// Recording a row's schedule (recorder.hpp has the method).
#include "tools/ferry_sim/recorder.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "collectives/context.hpp"

namespace ferry::sim {
namespace {

thread_local Program* tRecording = nullptr;

// Posts become ops; a request completes when the Exec waits on its peer (recorder.hpp).
class RecordingTransport final : public transport::Transport {
 public:
  RecordingTransport(Program& program, const coll::CallTrace& trace) : program_(program), trace_(trace) {}

  const char* name() const override { return "recording"; }
  transport::Capabilities capabilities() const override { return {false, false, false, true}; }
  std::vector<uint8_t> localAddress() const override { return {}; }
  Status connect(const std::vector<std::vector<uint8_t>>&) override { return Status::ok(); }

  Status postSend(int peer, uint64_t tag, const void*, size_t bytes, transport::Request* req) override {
    post(req, true, peer, tag, bytes);
    return Status::ok();
  }
  Status postRecv(int peer, uint64_t tag, uint64_t, void*, size_t bytes, transport::Request* req) override {
    post(req, false, peer, tag, bytes);
    return Status::ok();
  }
  void cancel(transport::Request* req) override {
    if (!req->pending()) return;
    req->state = transport::Request::State::kFailed;
    req->error = "cancelled";
    pending_.erase(std::find(pending_.begin(), pending_.end(), req));
  }
  bool progress() override {
    if (pending_.empty()) return false;
    const int peer = trace_.peer.load(std::memory_order_relaxed);
    auto pick = pending_.end();
    for (int pass = 0; pass < 2 && pick == pending_.end(); ++pass) {
      pick = std::find_if(pending_.begin(), pending_.end(), [&](const transport::Request* r) {
        return r->peer == peer && (pass == 1 || !r->isSend);
      });
    }
    if (pick == pending_.end()) pick = pending_.begin();
    transport::Request* r = *pick;
    pending_.erase(pick);
    r->state = transport::Request::State::kDone;
    if (!r->isSend) {
      r->received = r->bytes;
      r->peerTag = r->tag;
      r->source = r->peer;
    }
    program_.ops.push_back({Op::Kind::kWait, r->peer, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r->handle)), 0});
    return true;
  }
  Status peerError(int) const override { return Status::ok(); }
  void close(double, bool) override {}

 private:
  void post(transport::Request* req, bool send, int peer, uint64_t tag, size_t bytes) {
    req->start(send, peer, tag, bytes);
    const uint32_t id = program_.requests++;
    req->handle = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    program_.ops.push_back({send ? Op::Kind::kSend : Op::Kind::kRecv, peer, id, bytes});
    pending_.push_back(req);
  }

  Program& program_;
  const coll::CallTrace& trace_;
  std::vector<transport::Request*> pending_;
};

// Address space for the call's buffers, reserved once and never touched (recorder.hpp).
class Reservation {
 public:
  ~Reservation() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  uint8_t* get(size_t bytes) {
    bytes = std::max<size_t>(bytes, 4096);
    if (bytes > size_) {
      if (base_ != nullptr) munmap(base_, size_);
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      base_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
      size_ = base_ != nullptr ? bytes : 0;
    }
    return base_;
  }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

thread_local Reservation tBuffers;

// The call in place, NCCL's way (algorithms.hpp): one buffer, the rank's block inside it.
Call inPlaceCall(const CallSpec& s, int rank, uint8_t* buf) {
  const size_t es = dataTypeSize(s.type), block = s.count * es;
  uint8_t* mine = buf + static_cast<size_t>(rank) * block;
  switch (s.kind) {
    case CallKind::kReduceScatter: return Call::reduceScatter(buf, mine, s.count, s.type, s.op);
    case CallKind::kAllGather: return Call::allGather(mine, buf, s.count, s.type);
    case CallKind::kAllToAll:
      return Call::allToAll(buf, buf + block * static_cast<size_t>(s.n), s.count, s.type);
    case CallKind::kBroadcast: return Call::broadcast(buf, buf, s.count, s.type, s.root);
    case CallKind::kReduce: return Call::reduce(buf, buf, s.count, s.type, s.op, s.root);
    default: return Call::allReduce(buf, buf, s.count, s.type, s.op);
  }
}

bool samePrograms(const Program& a, int ra, const Program& b, int rb, int n) {
  if (a.ops.size() != b.ops.size() || a.requests != b.requests) return false;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op &x = a.ops[i], &y = b.ops[i];
    if (x.kind != y.kind || x.req != y.req || x.bytes != y.bytes) return false;
    if (x.peer >= 0 && ((x.peer - ra) % n + n) % n != ((y.peer - rb) % n + n) % n) return false;
  }
  return true;
}

}  // namespace

void noteCompute(Op::Kind kind, uint64_t bytes) {
  if (tRecording != nullptr) tRecording->ops.push_back({kind, -1, 0, bytes});
}

bool recordable(const coll::AlgorithmRow& row) {
  return row.protocol == coll::Protocol::kMessages && row.algorithm != coll::Algorithm::kHierarchical;
}

Result<Program> recordRank(const coll::AlgorithmRow& row, const CallSpec& spec, int rank) {
  Program program;
  coll::CallTrace trace;
  RecordingTransport transport(program, trace);
  coll::Scratch scratch, staging;
  coll::Context ctx;
  ctx.transport = &transport;
  ctx.rank = rank;
  ctx.size = spec.n;
  ctx.scratch = &scratch;
  ctx.staging = &staging;
  ctx.sliceBytes = spec.sliceBytes;
  ctx.depth = spec.depth;
  ctx.checkMismatch = false;
  ctx.trace = &trace;
  const size_t es = dataTypeSize(spec.type);
  const bool perRank = spec.kind == CallKind::kAllGather || spec.kind == CallKind::kReduceScatter ||
                       spec.kind == CallKind::kAllToAll;
  const size_t total = spec.count * es * (perRank ? static_cast<size_t>(spec.n) : 1) * 2;
  uint8_t* buf = tBuffers.get(total);
  if (buf == nullptr) return makeError(ErrorCode::kSystemError, "cannot reserve %zu bytes of address space", total);
  const Call call = inPlaceCall(spec, rank, buf);
  const bool rooted = spec.kind == CallKind::kBroadcast || spec.kind == CallKind::kReduce;
  const coll::OpDesc desc{spec.kind, spec.count, spec.type, spec.op, rooted ? spec.root : -1};
  tRecording = &program;
  Status st;
  {
    coll::Exec ex(ctx, desc, 1, coll::TagClass::kCollective, std::numeric_limits<double>::infinity());
    st = ex.begin();
    if (st.isOk()) st = row.run(ex, coll::Plan{row.algorithm, row.protocol, 0, coll::Stores::kAuto, &row}, call);
    if (st.isOk()) st = ex.waitAll();
  }
  tRecording = nullptr;
  if (!st.isOk()) return st;
  return program;
}

Result<Recording> recordCall(const coll::AlgorithmRow& row, const CallSpec& spec, int hostRanks, size_t maxOps) {
  const int n = spec.n;
  Recording rec;
  int period = hostRanks >= 1 && n % hostRanks == 0 ? hostRanks : n;
  if (period < n) {
    for (int r = 0; r < period; ++r) {
      auto p = recordRank(row, spec, r);
      FERRY_TRY(p);
      rec.ops += p->ops.size();
      rec.programs.push_back(std::move(*p));
    }
    const int half = n / 2 - (n / 2) % period;
    for (int q : {period, half, n - period}) {
      if (q < period || q >= n) continue;
      auto p = recordRank(row, spec, q);
      FERRY_TRY(p);
      rec.ops += p->ops.size();
      if (!samePrograms(rec.programs[static_cast<size_t>(q % period)], q % period, *p, q, n)) {
        period = n;
        break;
      }
    }
    if (period < n) {
      rec.period = period;
      return rec;
    }
  }
  // Every rank: only where it fits.
  const size_t first = rec.programs.empty() ? 0 : rec.programs[0].ops.size();
  rec.programs.resize(std::min<size_t>(rec.programs.size(), 1));
  if (rec.programs.empty()) {
    auto p = recordRank(row, spec, 0);
    FERRY_TRY(p);
    rec.ops += p->ops.size();
    rec.programs.push_back(std::move(*p));
  }
  const size_t perRank = std::max<size_t>(first, rec.programs[0].ops.size());
  if (perRank * static_cast<size_t>(n) > maxOps) {
    return makeError(ErrorCode::kInvalidUsage,
                     "%s/%s on %d ranks: the schedule is not the same on every host (it cannot be folded) and every "
                     "rank's ops (%zu x %d) exceed the recording limit of %zu",
                     coll::algorithmName(row.algorithm), callKindName(row.kind), n, perRank, n, maxOps);
  }
  for (int r = 1; r < n; ++r) {
    auto p = recordRank(row, spec, r);
    FERRY_TRY(p);
    rec.ops += p->ops.size();
    rec.programs.push_back(std::move(*p));
  }
  rec.period = n;
  return rec;
}

}  // namespace ferry::sim
