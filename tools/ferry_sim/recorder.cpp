// Recording a row's schedule (recorder.hpp has the method).
#include "tools/ferry_sim/recorder.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <limits>
#include <thread>

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
  }
  bool progress() override {
    // The oldest pending receive from the awaited peer, else its oldest send, else the oldest of all.
    const int peer = trace_.peer.load(std::memory_order_relaxed);
    transport::Request* r = nullptr;
    if (auto it = byPeer_.find(peer); it != byPeer_.end()) {
      for (int send = 0; send < 2 && r == nullptr; ++send) r = oldest(it->second[send]);
    }
    while (r == nullptr && !all_.empty()) {
      if (all_.front()->pending()) r = all_.front();
      all_.pop_front();
    }
    if (r == nullptr) return false;
    r->state = transport::Request::State::kDone;
    if (!r->isSend) {
      r->received = r->bytes;
      r->peerTag = r->tag;
      r->source = r->peer;
    }
    program_.ops.push_back(
        {Op::Kind::kWait, r->peer, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r->handle)), 0});
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
    byPeer_[peer][send ? 1 : 0].items.push_back(req);
    all_.push_back(req);
  }
  // The first request of `q` still pending; completed ones are dropped on the way.
  struct Queue {
    std::vector<transport::Request*> items;
    size_t head = 0;
  };
  static transport::Request* oldest(Queue& q) {
    while (q.head < q.items.size() && !q.items[q.head]->pending()) ++q.head;
    return q.head < q.items.size() ? q.items[q.head] : nullptr;
  }

  Program& program_;
  const coll::CallTrace& trace_;
  std::unordered_map<int, std::array<Queue, 2>> byPeer_;  // [0]: receives, [1]: sends
  std::deque<transport::Request*> all_;
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

// The algorithms' scratch and staging memory, reserved the same way and kept for the thread's
// next rank (as malloc would reuse it): the host kernels are stubs, so little of it is touched,
// even where malloc would fill what it hands out (MALLOC_PERTURB_, which meson sets for tests).
thread_local Reservation tScratch, tStaging;
void* scratchMemory(size_t bytes) { return tScratch.get(bytes); }
void* stagingMemory(size_t bytes) { return tStaging.get(bytes); }
void keepReserved(void*) {}

// The call in place, NCCL's way (algorithms.hpp): one buffer, the rank's block inside it.
Call inPlaceCall(const CallSpec& s, int rank, uint8_t* buf) {
  const size_t es = dataTypeSize(s.type), block = s.count * es;
  uint8_t* mine = buf + static_cast<size_t>(rank) * block;
  switch (s.kind) {
    case CallKind::kReduceScatter: return Call::reduceScatter(buf, mine, s.count, s.type, s.op);
    case CallKind::kAllGather: return Call::allGather(mine, buf, s.count, s.type);
    case CallKind::kAllToAll: return Call::allToAll(buf, buf + block * static_cast<size_t>(s.n), s.count, s.type);
    case CallKind::kBroadcast: return Call::broadcast(buf, buf, s.count, s.type, s.root);
    case CallKind::kReduce: return Call::reduce(buf, buf, s.count, s.type, s.op, s.root);
    default: return Call::allReduce(buf, buf, s.count, s.type, s.op);
  }
}

// Whether rank rb runs rank ra's program with every peer moved (kShift) or XORed (kXor) alike.
bool samePrograms(const Program& a, int ra, const Program& b, int rb, int n, Fold fold) {
  if (a.ops.size() != b.ops.size() || a.requests != b.requests) return false;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op &x = a.ops[i], &y = b.ops[i];
    if (x.kind != y.kind || x.req != y.req || x.bytes != y.bytes) return false;
    if (x.peer < 0) continue;
    const bool same = fold == Fold::kXor ? (x.peer ^ ra) == (y.peer ^ rb)
                                         : ((x.peer - ra) % n + n) % n == ((y.peer - rb) % n + n) % n;
    if (!same) return false;
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
  scratch.setAllocator({scratchMemory, keepReserved});
  staging.setAllocator({stagingMemory, keepReserved});
  ctx.scratch = &scratch;
  ctx.staging = &staging;
  ctx.sliceBytes = spec.sliceBytes;
  ctx.depth = spec.depth;
  ctx.hostRanks = spec.hostRanks;
  ctx.rails = spec.rails;
  ctx.checkMismatch = false;
  ctx.trace = &trace;
  const size_t es = dataTypeSize(spec.type);
  const bool perRank =
      spec.kind == CallKind::kAllGather || spec.kind == CallKind::kReduceScatter || spec.kind == CallKind::kAllToAll;
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
    bool shift = true, xorFold = (n & (n - 1)) == 0;  // XOR keeps ranks below n when n is a power of two
    for (int q : {period, half, n - period}) {
      if (q < period || q >= n) continue;
      auto p = recordRank(row, spec, q);
      FERRY_TRY(p);
      rec.ops += p->ops.size();
      const Program& base = rec.programs[static_cast<size_t>(q % period)];
      shift = shift && samePrograms(base, q % period, *p, q, n, Fold::kShift);
      xorFold = xorFold && samePrograms(base, q % period, *p, q, n, Fold::kXor);
      if (!shift && !xorFold) {
        period = n;
        break;
      }
    }
    rec.fold = shift ? Fold::kShift : Fold::kXor;
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
  // Ranks are recorded independently (each thread has its own buffers and recording): one
  // thread per core. Rank 0's ops only estimate the total (a tree's leaf has a fraction of an
  // interior rank's): the recorded ops are counted as they come, and the limit holds on them.
  rec.programs.resize(static_cast<size_t>(n));
  const int threads = std::max(1, std::min<int>(static_cast<int>(std::thread::hardware_concurrency()), n / 64));
  std::vector<Status> failed(static_cast<size_t>(threads));
  std::atomic<size_t> total{rec.programs[0].ops.size()};
  auto work = [&](int t) {
    for (int r = 1 + t; r < n; r += threads) {
      auto p = recordRank(row, spec, r);
      if (!p.isOk()) {
        failed[static_cast<size_t>(t)] = p.status();
        return;
      }
      if (total.fetch_add(p->ops.size(), std::memory_order_relaxed) + p->ops.size() > maxOps) return;
      rec.programs[static_cast<size_t>(r)] = std::move(*p);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) FERRY_TRY(failed[static_cast<size_t>(t)]);
  if (total.load() > maxOps) {
    return makeError(ErrorCode::kInvalidUsage,
                     "%s/%s on %d ranks: the schedule is not the same on every host (it cannot be folded) and its "
                     "ranks' ops (more than %zu) exceed the recording limit of %zu",
                     coll::algorithmName(row.algorithm), callKindName(row.kind), n, maxOps, maxOps);
  }
  rec.ops += total.load() - rec.programs[0].ops.size();
  rec.period = n;
  rec.fold = Fold::kShift;
  return rec;
}

}  // namespace ferry::sim
