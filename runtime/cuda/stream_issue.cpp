// Routing and issuing stream-ordered calls (see stream_issue.hpp).
#include "runtime/cuda/stream_issue.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/log.hpp"
#include "collectives/reproducible.hpp"
#include "runtime/cuda/staged_call.hpp"

namespace ferry::gpu {
namespace {

enum class Route { kSkip, kHost, kDevice };

const char* kindName(MemKind k) { return k == MemKind::kDevice ? "device" : "host"; }

std::string pointerText(const void* p) {
  char s[32];
  std::snprintf(s, sizeof(s), "%p", p);
  return s;
}

Result<Route> route(const DevWork& w, int rank, const DeviceContext* ctx, Stream stream) {
  if (w.count == 0) return Route::kSkip;
  // While the stream is captured only device buffers can take part (a host call would have to wait
  // for the stream), and pointer queries may be forbidden (cudaStreamCaptureModeGlobal): no query.
  if (ctx != nullptr && ctx->path() != DevicePath::kNone && stream != nullptr) {
    auto capturing = streamCapturing(stream, ctx->where());
    FERRY_TRY(capturing);
    if (*capturing) return Route::kDevice;
  }
  const bool rs = readsSend(w, rank), wr = writesRecv(w, rank);
  const MemKind s = rs ? pointerKind(w.send) : MemKind::kHost;
  const MemKind r = wr ? pointerKind(w.recv) : MemKind::kHost;
  const bool device = (rs && s == MemKind::kDevice) || (wr && r == MemKind::kDevice);
  const bool usable = ctx != nullptr && ctx->path() != DevicePath::kNone;
  // The call's text is only for errors: not built on the path every call takes.
  if ((!rs || !wr || s == r) && (!device || usable)) return device ? Route::kDevice : Route::kHost;
  const std::string fn = describe(w, false) + " on rank " + std::to_string(rank);
  if (rs && wr && s != r) {
    return Status(ErrorCode::kInvalidArgument, fn + ": the send buffer " + pointerText(w.send) + " is " + kindName(s) +
                                                   " memory but the receive buffer " + pointerText(w.recv) + " is " +
                                                   kindName(r) +
                                                   " memory (both must be device memory, or both host memory)");
  }
  const void* p = rs ? w.send : w.recv;
  if (ctx == nullptr) {
    return Status(ErrorCode::kInvalidUsage,
                  fn + ": buffer " + pointerText(p) +
                      " is device memory but this communicator has no GPU (create it with a device: "
                      "Comm::create(id, rank, size, device) or Comm::initAll)");
  }
  if (ctx->path() == DevicePath::kNone) {
    return Status(ErrorCode::kInvalidUsage, fn + ", device " + std::to_string(ctx->device()) +
                                                ": device buffers cannot be used here: " + ctx->whyNotKernel());
  }
  return Route::kDevice;
}

// Makes `device` current for the scope and restores the caller's device after.
class DeviceScope {
 public:
  Status enter(int device, Where w) {
    auto cur = currentDevice(w);
    FERRY_TRY(cur);
    if (*cur != device) {
      FERRY_TRY(setDevice(device, w));
      previous_ = *cur;
    }
    return Status::ok();
  }
  ~DeviceScope() {
    if (previous_ >= 0) (void)setDevice(previous_, Where{});
  }

 private:
  int previous_ = -1;
};

// Which rank of a communicator launched its k-th list on a stream, for ranks sharing a GPU in one
// process: a second rank on the same stream would queue behind a kernel that waits for it.
struct StreamUse {
  uint64_t commId;
  Stream stream;
  bool operator==(const StreamUse&) const = default;
};
struct StreamUseHash {
  size_t operator()(const StreamUse& u) const {
    return std::hash<uint64_t>()(u.commId) ^ std::hash<const void*>()(u.stream) * 31;
  }
};
struct StreamUser {
  int rank;
  uint64_t launch;
};

Status claimStream(DeviceContext& ctx, int rank, uint64_t launch, Stream stream, const DevWork& w) {
  static std::mutex mutex;
  static std::unordered_map<StreamUse, StreamUser, StreamUseHash> users;
  std::lock_guard<std::mutex> lock(mutex);
  StreamUser& u = users[StreamUse{ctx.commId(), stream}];
  if (u.launch == launch + 1 && u.rank != rank) {  // stored as launch + 1: 0 is "never"
    return makeError(ErrorCode::kInvalidUsage,
                     "%s on rank %d: stream %p is the stream rank %d of this communicator issued the same call on, "
                     "on the same GPU (device %d); the two kernels wait for each other, and one stream runs them one "
                     "after the other. Give each rank a stream of its own",
                     describe(w, false).c_str(), rank, stream, u.rank, ctx.device());
  }
  u = StreamUser{rank, launch + 1};
  return Status::ok();
}

Status launchKernels(DeviceContext& ctx, int rank, std::vector<DevWork> works, Stream stream) {
  // The protocol follows the bytes each rank contributes per peer (NCCL's "count").
  for (DevWork& w : works) {
    w.algo = ctx.algo();
    w.proto = ctx.proto(w.count * dataTypeSize(w.type));
  }
  for (size_t first = 0; first < works.size(); first += gpu::kMaxWorksPerLaunch) {
    gpu::DevWorkList list;
    const size_t n = std::min<size_t>(gpu::kMaxWorksPerLaunch, works.size() - first);
    size_t largest = 0;
    for (size_t i = 0; i < n; ++i) {
      list.works[i] = works[first + i];
      largest = std::max(largest, works[first + i].count * dataTypeSize(works[first + i].type));
    }
    list.nWorks = static_cast<int>(n);
    // Small lists run on one channel: every rank decides alike from the same counts.
    const int blocks = largest <= gpu::kOneChannelMaxBytes ? 1 : ctx.channels();
    const uint64_t launch = ctx.nextLaunch();
    if (ctx.ranksSharingGpuInProcess() > 1) FERRY_TRY(claimStream(ctx, rank, launch, stream, list.works[0]));
    int err = gpu::launchWorkList(ctx.devComm(), list, blocks, ctx.threads(), stream);
    if (err != 0) {
      std::string what = describe(list.works[0], true);
      if (n > 1) what += " and " + std::to_string(n - 1) + " more works of one group";
      return launchError(err, what, ctx.where());
    }
  }
  return Status::ok();
}

}  // namespace

Result<bool> stageForReproducibility(bool reproducible, int mostRanksInOneProcess, int rank,
                                     const std::vector<DevWork>& works) {
  if (!reproducible) return false;
  const auto changed = std::find_if(works.begin(), works.end(), [](const DevWork& w) {
    return coll::reproducibleApplies(Call{w.kind, w.send, w.recv, w.count, w.type, w.op, w.root, {}, nullptr});
  });
  if (changed == works.end()) return false;
  if (mostRanksInOneProcess <= 1) return true;
  return Status(ErrorCode::kInvalidUsage,
                describe(*changed, false) + " on rank " + std::to_string(rank) +
                    ": the reproducible mode (FERRY_REPRODUCIBLE=1 or Comm::setReproducible) runs device buffers "
                    "through host memory, in a host function on the stream, and CUDA runs a process's host "
                    "functions one at a time on one thread, where " +
                    std::to_string(mostRanksInOneProcess) +
                    " ranks of this communicator in one process would wait for each other forever. Run one rank "
                    "per process (ferryrun, torchrun), pass host buffers, or turn the mode off for this "
                    "communicator");
}

Result<RoutedCalls> routeCalls(Comm& comm, const DeviceContext* ctx, const std::vector<StreamCall>& calls) {
  // A failure of an earlier call (a staged host function, a peer) is sticky.
  FERRY_TRY(comm.error());
  RoutedCalls out;
  for (const StreamCall& c : calls) {
    auto r = route(c.work, comm.rank(), ctx, c.stream);
    FERRY_TRY(r);
    if (*r == Route::kSkip) continue;
    if (*r == Route::kHost) {
      out.hostWorks.push_back(c.work);
      if (c.stream != nullptr &&
          std::find(out.hostStreams.begin(), out.hostStreams.end(), c.stream) == out.hostStreams.end()) {
        out.hostStreams.push_back(c.stream);
      }
      continue;
    }
    auto it = std::find(out.deviceStreams.begin(), out.deviceStreams.end(), c.stream);
    if (it == out.deviceStreams.end()) {
      out.deviceStreams.push_back(c.stream);
      out.deviceWorks.emplace_back();
      it = out.deviceStreams.end() - 1;
    }
    out.deviceWorks[it - out.deviceStreams.begin()].push_back(c.work);
  }
  if (out.deviceStreams.empty()) return out;
  out.staged = ctx->path() != DevicePath::kKernel;
  if (!out.staged && comm.reproducible()) {  // the default mode's calls copy nothing here
    // Every call of the group counts, whatever its buffers or stream (each rank's own choices).
    std::vector<DevWork> works;
    for (const StreamCall& c : calls) works.push_back(c.work);
    auto staged = stageForReproducibility(comm.reproducible(), ctx->mostRanksInOneProcess(), comm.rank(), works);
    FERRY_TRY(staged);
    out.staged = *staged;
  }
  // Host works start after the staged ones, whose host functions would otherwise run collectives on
  // this communicator from a second thread. A captured stream's host functions run at replay.
  if (!out.staged || out.hostWorks.empty()) return out;
  for (Stream s : out.deviceStreams) {
    auto capturing = streamCapturing(s, ctx->where());
    FERRY_TRY(capturing);
    if (!*capturing && std::find(out.hostStreams.begin(), out.hostStreams.end(), s) == out.hostStreams.end()) {
      out.hostStreams.push_back(s);
    }
  }
  return out;
}

Status checkStreams(Comm& comm, const DeviceContext* ctx, const RoutedCalls& routed) {
  if (routed.staged || ctx == nullptr || ctx->path() != DevicePath::kKernel || ctx->ranksSharingGpuInProcess() < 2) {
    return Status::ok();
  }
  for (Stream s : routed.deviceStreams) {
    if (isLegacyDefaultStream(s)) {
      return makeError(ErrorCode::kInvalidUsage,
                       "%s on rank %d: stream is the legacy default stream, but %d ranks of this communicator drive "
                       "device %d from this process; their kernels wait for each other, and that stream runs one at "
                       "a time. Give each rank a stream of its own (cudaStreamCreate)",
                       describe(routed.deviceWorks[0][0], false).c_str(), comm.rank(), ctx->ranksSharingGpuInProcess(),
                       ctx->device());
    }
  }
  return Status::ok();
}

Status issueDevice(Comm& comm, DeviceContext* ctx, const RoutedCalls& routed) {
  if (routed.deviceStreams.empty()) return Status::ok();
  FERRY_TRY(checkStreams(comm, ctx, routed));
  DeviceScope scope;
  FERRY_TRY(scope.enter(ctx->device(), ctx->where()));
  for (size_t i = 0; i < routed.deviceStreams.size(); ++i) {
    if (!routed.staged) {
      FERRY_TRY(launchKernels(*ctx, comm.rank(), routed.deviceWorks[i], routed.deviceStreams[i]));
    } else {
      FERRY_TRY(issueStaged(comm, *ctx, routed.deviceWorks[i], routed.deviceStreams[i]));
    }
  }
  return Status::ok();
}

Status runHost(Comm& comm, const RoutedCalls& routed) {
  if (routed.hostWorks.empty()) return Status::ok();
  for (Stream s : routed.hostStreams) FERRY_TRY(streamSynchronize(s, Where{comm.rank(), comm.device()}));
  return runOnHost(comm, routed.hostWorks);
}

Status issueCalls(Comm& comm, DeviceContext* ctx, const std::vector<StreamCall>& calls) {
  auto routed = routeCalls(comm, ctx, calls);
  FERRY_TRY(routed);
  FERRY_TRY(issueDevice(comm, ctx, *routed));
  return runHost(comm, *routed);
}

}  // namespace ferry::gpu
