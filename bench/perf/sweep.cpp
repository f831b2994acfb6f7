// The benchmark loop. See sweep.hpp.
#include "bench/perf/sweep.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>

#include "bench/perf/check_values.hpp"
#include "bench/perf/dtypes.hpp"
#include "bench/perf/host_info.hpp"
#include "bench/perf/progress.hpp"
#include "bench/perf/reference_run.hpp"
#include "bench/perf/report.hpp"

namespace ferry::perf {
namespace {

using Clock = std::chrono::steady_clock;

// -T: aborts the backend when one operation runs longer than the limit. Arming is two atomic
// stores per operation, cheap next to any collective.
class Watchdog {
 public:
  Watchdog(Backend& backend, int seconds) : backend_(backend), limit_(std::chrono::seconds(seconds)) {
    if (seconds > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void describe(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = what;
  }
  void arm() { since_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  void disarm() { since_.store(0, std::memory_order_relaxed); }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      const auto since = since_.load(std::memory_order_relaxed);
      if (since == 0 || Clock::now().time_since_epoch().count() - since < limit_.count()) continue;
      backend_.abort("test timeout: " + what_ + " did not complete within -T " +
                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit_).count()) + " s");
      return;
    }
  }

  Backend& backend_;
  Clock::duration limit_;
  std::atomic<Clock::rep> since_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string what_ = "an operation";
  bool stop_ = false;
  std::thread thread_;
};

// Page-aligned, touched once so that page faults are not timed. -R 1: from the library's own
// allocator; -R 2: posix_memalign, then registered with the library (the time it took is `registerSeconds`).
struct Buffer {
  Buffer(size_t bytes, Backend& be, int mode) : size(bytes < 64 ? 64 : bytes) {
    void* p = nullptr;
    if (mode == 1) {
      p = be.allocRegistered(size);
    } else if (posix_memalign(&p, 4096, size) != 0) {
      p = nullptr;
    }
    if (p != nullptr) {
      data = std::unique_ptr<uint8_t, Free>(static_cast<uint8_t*>(p), Free{mode == 1 ? &be : nullptr});
      std::memset(p, 0, size);
      touchFromKernel(static_cast<uint8_t*>(p), size);
      if (mode == 2) {
        const auto start = std::chrono::steady_clock::now();
        handle = Registration{be.registerBuffer(p, size), &be};
        registerSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }
  }
  // The kernel's first access to a page can cost more again than the process's: a
  // paravirtualised guest's kernel maps user pages in page tables of its own, one fault per page
  // on its first copy to or from it (a socket's receive or send, a cross-memory read; evidence:
  // docs/BENCHMARKS.md, "The table", time). Let it write every page once now (a read from
  // /dev/zero), so that the first timed calls of a size that land on pages no call has used yet do
  // not pay it, for any library. Best effort: without /dev/zero the pages are only touched as
  // above.
  static void touchFromKernel(uint8_t* p, size_t bytes) {
    const int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (size_t done = 0; done < bytes;) {
      const ssize_t r = ::read(fd, p + done, std::min<size_t>(bytes - done, size_t{1} << 20));
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    ::close(fd);
  }
  struct Free {
    Backend* be;  // null: posix_memalign
    void operator()(uint8_t* p) const {
      if (be != nullptr) {
        be->freeRegistered(p);
      } else {
        std::free(p);
      }
    }
  };
  // Deregistered before the memory is freed (members are destroyed in reverse order).
  struct Registration {
    void* handle = nullptr;
    Backend* be = nullptr;
    Registration() = default;
    Registration(void* h, Backend* b) : handle(h), be(b) {}
    Registration(const Registration&) = delete;
    Registration& operator=(Registration&& o) noexcept {
      std::swap(handle, o.handle);
      std::swap(be, o.be);
      return *this;
    }
    ~Registration() {
      if (handle != nullptr) be->deregisterBuffer(handle);
    }
  };
  size_t size;
  std::unique_ptr<uint8_t, Free> data;
  Registration handle;
  double registerSeconds = 0;
};

class Runner {
 public:
  Runner(const Options& o, Backend& be, Report& report, Progress& progress, Watchdog& watchdog, ReferenceRun* ref,
         const std::string& tool)
      : o_(o), be_(be), report_(report), progress_(progress), watchdog_(watchdog), ref_(ref), tool_(tool),
        n_(be.size()), rank_(be.rank()), send_(o.maxBytes, be, o.localRegister),
        recv_(o.maxBytes, be, o.localRegister) {}

  bool allocated() const { return send_.data && recv_.data; }
  /// -R 2: seconds registering both buffers took on this rank.
  double registerSeconds() const { return send_.registerSeconds + recv_.registerSeconds; }
  Status runAll();

 private:
  struct Pointers {
    const void* send;
    void* recv;     // the recv argument
    uint8_t* base;  // start of the receive region (recv buffer plus shift)
  };
  Pointers pointers(const CollCounts& c, size_t elt, bool inPlace, size_t iter) const;
  Status call(const Call& c);
  Status openingWarmup(Coll coll, DataType type, RedOp op, int root, const std::vector<size_t>& sizes);
  Status measure(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace, Measurement& m);
  Status check(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace, Measurement& m);
  /// --reference-run: this rank's output of check run `seed`, recorded or compared; the differing
  /// elements (or chunks), 0 when equal or recorded.
  uint64_t compareReference(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace,
                            const void* out, uint64_t seed);

  const Options& o_;
  Backend& be_;
  Report& report_;
  Progress& progress_;
  Watchdog& watchdog_;
  ReferenceRun* ref_;  // null without --reference-run
  std::string tool_;
  int n_;
  int rank_;
  Buffer send_;
  Buffer recv_;
  uint64_t checkSeed_ = 0;
};

Runner::Pointers Runner::pointers(const CollCounts& c, size_t elt, bool inPlace, size_t iter) const {
  // nccl-tests' shift: consecutive operations walk through the buffers in steps of the size.
  const size_t total = c.bytes(elt);
  const size_t steps = total ? o_.maxBytes / total : 1;
  const size_t shift = steps ? total * (iter % steps) : 0;
  uint8_t* recv = recv_.data.get() + shift;
  if (!inPlace) return {send_.data.get() + shift, recv, recv};
  return {recv + c.sendInplaceOffset * rank_ * elt, recv + c.recvInplaceOffset * rank_ * elt, recv};
}

Status Runner::call(const Call& c) {
  watchdog_.arm();
  Status s = be_.run(c);
  watchdog_.disarm();
  FERRY_TRY(s);
  if (o_.blocking == 1) FERRY_TRY(be_.barrier());
  return Status::ok();
}

// nccl-tests' opening warm-up, before each sweep: the warm-up count (under the budget, but two at
// least) of calls at the largest size, then at the smallest, out of place; and at the largest in place too, since
// in-place calls read the receive buffer. The largest size's calls cover the buffers the sweep
// walks through, so what a library pays once per buffer (the first copy through a page, moving
// pages peers read onto huge pages) is paid here and not in whichever size first reaches them;
// every size still gets its own warm-up in measure(). Where one side is smaller than the other
// (all-gather's input, reduce-scatter's output), the smaller sizes' shifts reach all of its
// buffer, so the largest size's out-of-place calls walk that side through its buffer too.
Status Runner::openingWarmup(Coll coll, DataType type, RedOp op, int root, const std::vector<size_t>& sizes) {
  if (sizes.empty()) return Status::ok();
  const size_t elt = typeInfo(type).size;
  const std::pair<size_t, bool> runs[] = {{sizes.back(), false}, {sizes.back(), true}, {sizes.front(), false}};
  for (size_t k = 0; k < std::size(runs); ++k) {
    const auto& [bytes, inPlace] = runs[k];
    const CollCounts c = collCounts(coll, bytes / elt, elt, n_);
    if (c.paramCount == 0) continue;
    watchdog_.describe(std::string(collInfo(coll).name) + " " + formatBytes(c.bytes(elt)) + " opening warm-up" +
                       (inPlace ? " in-place" : ""));
    // Twice at least, under any budget: a buffer's first call pays what only its first call pays,
    // the second is the reuse every later call is.
    const int calls = std::max(o_.warmupFor(c.bytes(elt)), std::min(2, o_.warmupIters));
    const size_t sendBytes = c.sendCount * elt, recvBytes = c.recvCount * elt;
    const size_t sendPlaces = c.bytes(elt) / sendBytes, recvPlaces = c.bytes(elt) / recvBytes;
    // Only the largest size out of place walks: in place the buffer is the output, all of it, and
    // the smallest size's calls already shift through the buffers as the sweep's do.
    const size_t places = k == 0 ? std::max(sendPlaces, recvPlaces) : 1;
    for (size_t place = 0; place < places; ++place) {
      for (int i = 0; i < calls * o_.aggIters; ++i) {
        const Pointers p = pointers(c, elt, inPlace, static_cast<size_t>(i));
        const auto* send = static_cast<const uint8_t*>(p.send) + (place % sendPlaces) * sendBytes;
        auto* recv = static_cast<uint8_t*>(p.recv) + (place % recvPlaces) * recvBytes;
        FERRY_TRY(call({coll, send, recv, c.paramCount, type, op, root}));
      }
    }
  }
  return Status::ok();
}

// Warm-up calls a measuring library may add past -w before its plan is kept (a bound, not a target:
// ferry's five candidates of three calls each settle in 16; between hosts three candidates run 13
// calls twice, 78, and the kept two-level plan's sub-communicators then try theirs, 12 more).
constexpr int kMaxSettleCalls = 128;

Status Runner::measure(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace,
                       Measurement& m) {
  const size_t elt = typeInfo(type).size;
  m.iters = o_.itersFor(c.bytes(elt));
  m.warmupIters = o_.warmupFor(c.bytes(elt));
  auto op1 = [&](size_t index) {
    const Pointers p = pointers(c, elt, inPlace, index);
    return call({coll, p.send, p.recv, c.paramCount, type, op, root});
  };
  const uint64_t first = be_.measuredCalls();
  uint64_t before = first;
  for (int i = 0; i < m.warmupIters; ++i) {
    before = be_.measuredCalls();
    for (int a = 0; a < o_.aggIters; ++a) FERRY_TRY(op1(static_cast<size_t>(i) * o_.aggIters + a));
  }
  // A library that measures candidate plans on the first calls of each kind and size (ferry's
  // tuner: candidates x (FERRY_TUNE_TRIALS + 1) calls) is warmed up until every rank's last call
  // ran the plan it kept, so the timed calls measure that plan and not the trials; the ranks agree
  // on each step, since the two levels of a communicator may measure on one host and not another.
  for (int extra = 0; m.warmupIters > 0 && extra < kMaxSettleCalls; ++extra) {
    double measuring = be_.measuredCalls() != before ? 1 : 0;
    FERRY_TRY(be_.allReduceDoubles(&measuring, 1, RedOp::kMax));
    if (measuring == 0) break;
    before = be_.measuredCalls();
    for (int a = 0; a < o_.aggIters; ++a) FERRY_TRY(op1(static_cast<size_t>(m.warmupIters + extra) * o_.aggIters + a));
    ++m.settleIters;
  }
  // Where the warm-up went to trials, the kept plan has not yet run on the buffers the timed calls
  // use (the same shifts as the warm-up's): run it there once more. A plan's first calls on pages
  // it has not moved before are no measure of a stream of calls: the kernel's first copy to or
  // from a page (a socket's, a cross-memory read's) faults, and a transport's memory for early
  // messages grows with the backlog the plan builds (evidence: docs/BENCHMARKS.md, "Command line",
  // warm-up).
  double trialed = be_.measuredCalls() != first ? 1 : 0;
  if (m.warmupIters > 0) FERRY_TRY(be_.allReduceDoubles(&trialed, 1, RedOp::kMax));
  if (trialed != 0) {
    for (int i = 0; i < m.warmupIters; ++i) {
      for (int a = 0; a < o_.aggIters; ++a) FERRY_TRY(op1(static_cast<size_t>(i) * o_.aggIters + a));
      ++m.settleIters;
    }
  }
  FERRY_TRY(be_.barrier());
  const auto t0 = Clock::now();
  for (int i = 0; i < m.iters; ++i) {
    for (int a = 0; a < o_.aggIters; ++a) FERRY_TRY(op1(static_cast<size_t>(i) * o_.aggIters + a));
  }
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / (m.iters * o_.aggIters);
  switch (o_.average) {
    case 0:  // rank 0's time: everyone else contributes zero to a sum
      if (rank_ != 0) seconds = 0;
      FERRY_TRY(be_.allReduceDoubles(&seconds, 1, RedOp::kSum));
      break;
    case 1:
      FERRY_TRY(be_.allReduceDoubles(&seconds, 1, RedOp::kSum));
      seconds /= n_;
      break;
    case 2: FERRY_TRY(be_.allReduceDoubles(&seconds, 1, RedOp::kMin)); break;
    default: FERRY_TRY(be_.allReduceDoubles(&seconds, 1, RedOp::kMax)); break;
  }
  m.seconds = seconds;
  m.algBw = algBandwidth(coll, c.paramCount, elt, seconds, n_);
  m.busBw = m.algBw * busFactor(coll, n_);
  return check(coll, type, op, root, c, inPlace, m);
}

Status Runner::check(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace, Measurement& m) {
  m.checked = o_.check > 0 && (!inPlace || collInfo(coll).checkInPlace);
  if (!m.checked) return Status::ok();
  const size_t elt = typeInfo(type).size;
  m.wrongPerRank.assign(static_cast<size_t>(n_), 0);
  for (int i = 0; i < o_.check; ++i) {
    const CheckPlan plan(coll, type, op, n_, rank_, root, ++checkSeed_);
    const Pointers p = pointers(c, elt, inPlace, 0);
    CheckPlan::fillSentinel(p.base, c.recvCount * elt);
    // Spread inputs have no closed-form result: the reference's digest is their only check.
    const bool spread = o_.spreadInputs && collInfo(coll).reduces && typeInfo(type).isFloat;
    if (spread) {
      fillSpreadInput(type, rank_, checkSeed_, const_cast<void*>(p.send), c.sendCount);
    } else {
      plan.fillInput(const_cast<void*>(p.send), c.sendCount);
    }
    FERRY_TRY(call({coll, p.send, p.recv, c.paramCount, type, op, root}));
    uint64_t mine = spread ? 0 : plan.countWrong(p.recv, c, inPlace);
    if (ref_ != nullptr) mine += compareReference(coll, type, op, root, c, inPlace, p.recv, checkSeed_);
    FERRY_TRY(be_.allGatherBytes(&mine, m.wrongPerRank.data(), sizeof(mine)));
    m.wrong = 0;
    for (uint64_t w : m.wrongPerRank) m.wrong += w;
    if (m.wrong > 0) break;  // as nccl-tests: the first wrong run is the one reported
  }
  return Status::ok();
}

uint64_t Runner::compareReference(Coll coll, DataType type, RedOp op, int root, const CollCounts& c, bool inPlace,
                                  const void* out, uint64_t seed) {
  const CollInfo& info = collInfo(coll);
  if (coll == Coll::kReduce && rank_ != root) return 0;  // no output off the root
  const std::string key =
      std::string(info.name) + "/" + typeInfo(type).ferryName + "/" + (info.reduces ? opName(op) : "-") + "/root" +
      std::to_string(root) + "/" + std::to_string(c.recvCount * typeInfo(type).size) + "B/" +
      (inPlace ? "in-place" : "out-of-place") + "/check" + std::to_string(seed) + "/rank" + std::to_string(rank_);
  std::string message;
  const uint64_t differ = ref_->check(key, out, c.recvCount, typeInfo(type).size, message);
  if (differ > 0) {
    progress_.clear();
    std::fprintf(stderr, "%s: rank %d: --reference-run mismatch, %s\n", tool_.c_str(), rank_, message.c_str());
  }
  return differ;
}

Status Runner::runAll() {
  const std::vector<size_t> sizes = o_.sizes();
  for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
    for (Coll coll : o_.colls) {
      const CollInfo& info = collInfo(coll);
      progress_.clear();
      report_.beginCollective(coll);
      std::vector<DataType> types;
      if (o_.type) types.push_back(*o_.type);
      else types.assign(allTypes().begin(), allTypes().end());
      std::vector<RedOp> ops;
      if (!info.listsOp) ops.push_back(RedOp::kSum);
      else if (o_.op) ops.push_back(*o_.op);
      else ops = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};  // nccl-tests' "all"
      std::vector<int> roots;
      if (!info.rooted) roots.push_back(-1);
      else if (o_.root >= 0) roots.push_back(o_.root);
      else
        for (int r = 0; r < n_; ++r) roots.push_back(r);

      for (DataType type : types) {
        for (RedOp op : ops) {
          if (info.reduces && !opRunsOn(op, type)) continue;  // -o band -d all: the integer types only
          if (!be_.supports(coll, type, op)) {
            progress_.clear();
            report_.skipped(coll, type, op, be_.library());
            continue;
          }
          for (int root : roots) {
            FERRY_TRY(openingWarmup(coll, type, op, root, sizes));
            for (size_t i = 0; i < sizes.size(); ++i) {
              const size_t elt = typeInfo(type).size;
              const CollCounts c = collCounts(coll, sizes[i] / elt, elt, n_);
              Row row{coll, c.bytes(elt), c.paramCount, type, op, root, {}, {}};
              for (bool inPlace : {false, true}) {
                std::string what = std::string(info.name) + " " + typeInfo(type).ncclName +
                                   (info.reduces ? std::string(" ") + opName(op) : "") + " " + formatBytes(row.bytes) +
                                   (inPlace ? " in-place" : " out-of-place");
                watchdog_.describe(what);
                progress_.set(what + " (" + std::to_string(i + 1) + "/" + std::to_string(sizes.size()) + ")");
                Measurement& m = inPlace ? row.inPlace : row.outOfPlace;
                FERRY_TRY(measure(coll, type, op, root, c, inPlace, m));
              }
              progress_.clear();
              report_.row(row);
            }
          }
        }
      }
      progress_.clear();
      report_.endCollective();
    }
  }
  return Status::ok();
}

}  // namespace

int runSweep(const Options& o, Backend& be, const std::vector<std::string>& args, int64_t residentBeforeInit,
             const std::string& tool) {
  const int64_t residentAfterInit = residentBytes();
  Report report(o, tool, be.library(), be.size(), be.rank() == 0, args);
  Progress progress(tool, be.rank() == 0);

  RankInfo mine;
  mine.rank = be.rank();
  mine.pid = static_cast<int>(::getpid());
  std::snprintf(mine.host, sizeof(mine.host), "%s", hostName().c_str());
  std::snprintf(mine.device, sizeof(mine.device), "%s", cpuDescription().c_str());
  std::vector<RankInfo> ranks(static_cast<size_t>(be.size()));
  Status s = be.allGatherBytes(&mine, ranks.data(), sizeof(RankInfo));
  if (s.isOk()) report.header(ranks);

  if (s.isOk() && o.root >= be.size()) {
    report.error("-r " + std::to_string(o.root) + " is not a rank: this job has " + std::to_string(be.size()) +
                 " ranks");
    report.finish();
    return 2;
  }
  const int64_t residentBeforeBuffers = residentBytes();
  {
    Watchdog watchdog(be, o.timeoutSeconds);
    std::unique_ptr<ReferenceRun> ref;
    if (s.isOk() && !o.referenceRun.empty()) {
      auto r = ReferenceRun::open(o.referenceRun, be.rank(), o.referenceRunFull);
      if (r.isOk()) {
        ref = std::make_unique<ReferenceRun>(std::move(*r));
      } else {
        s = r.status();
      }
    }
    Runner runner(o, be, report, progress, watchdog, ref.get(), tool);
    if (s.isOk() && !runner.allocated()) {
      s = Status(ErrorCode::kSystemError, "cannot allocate two buffers of " + formatBytes(o.maxBytes) + " (-e)");
    }
    const int64_t buffers = residentBytes() - residentBeforeBuffers;
    if (s.isOk() && o.localRegister == 2) {
      double seconds = runner.registerSeconds();
      s = be.allReduceDoubles(&seconds, 1, RedOp::kMax);
      if (s.isOk()) report.registration(seconds, o.maxBytes);
    }
    if (s.isOk()) s = runner.runAll();
    if (s.isOk() && ref) s = ref->finish();
    progress.clear();
    if (s.isOk() && o.memoryReport) {
      double use[3] = {static_cast<double>(residentAfterInit - residentBeforeInit), static_cast<double>(buffers),
                       static_cast<double>(peakResidentBytes() - residentBeforeBuffers - buffers)};
      s = be.allReduceDoubles(use, 3, RedOp::kMax);
      if (s.isOk()) {
        report.memory({static_cast<int64_t>(use[0]), static_cast<int64_t>(use[1]), static_cast<int64_t>(use[2])});
      }
    }
  }
  if (!s.isOk()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", tool.c_str(), be.rank(), s.message().c_str());
    report.error(s.message());
  }
  const bool written = report.finish();
  return (!s.isOk() || report.outOfBounds() > 0 || !written) ? 1 : 0;
}

}  // namespace ferry::perf
