// DeviceContext setup (see device_context.hpp): the two rounds, the path and channel decisions,
// and the mapping of the peers' rank resources.
#include "runtime/cuda/device_context.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/cuda/staging.hpp"

namespace ferry::gpu {
namespace {

// Round A: one rank's device, or why it has none. The sizes are rank 0's knobs, which every rank
// uses, so that the DevConfig agrees even if the environments differ.
struct DeviceCard {
  int32_t state = 0;  // 0: no device, 1: ready, 2: failed (message follows)
  int32_t device = -1;
  uint8_t uuid[16] = {};
  int32_t multiprocessors = 0;
  int32_t residentPerSm = 0;
  int32_t threads = 0;
  int32_t coresident = 0;
  int64_t maxCtas = 0, slots = 0, slotBytes = 0, llSlots = 0, llSlotBytes = 0;
};

// Round B: how peers reach this rank's resources.
struct ReachCard {
  int32_t state = 0;     // 1: ready, 2: failed (message follows)
  int32_t reachAll = 0;  // this rank can map every peer's GPU
  uint64_t pointer = 0;
  IpcHandle ipc;
};

template <typename Card>
Bytes pack(const Card& c, const std::string& message = {}) {
  Bytes b(sizeof(Card) + message.size());
  std::memcpy(b.data(), &c, sizeof(Card));
  std::memcpy(b.data() + sizeof(Card), message.data(), message.size());
  return b;
}

template <typename Card>
Result<Card> unpack(const Bytes& b, int rank, std::string* message) {
  Card c;
  if (b.size() < sizeof(Card)) {
    return makeError(ErrorCode::kInternalError, "rank %d sent a malformed device card (%zu bytes)", rank, b.size());
  }
  std::memcpy(&c, b.data(), sizeof(Card));
  message->assign(reinterpret_cast<const char*>(b.data()) + sizeof(Card), b.size() - sizeof(Card));
  return c;
}

bool sameProcess(const PeerInfo& a, const PeerInfo& b) {
  return a.hostId == b.hostId && a.pidNamespace == b.pidNamespace && a.pid == b.pid;
}

// The first failure any rank reported, as every rank's error.
Status firstFailure(const std::vector<std::string>& messages, const std::vector<int32_t>& states, int rank,
                    const char* round) {
  for (size_t r = 0; r < states.size(); ++r) {
    if (states[r] == 2) {
      return Status(ErrorCode::kUnhandledCudaError,
                    "GPU setup (" + std::string(round) + ") failed on rank " + std::to_string(r) +
                        (static_cast<int>(r) == rank ? "" : " (seen from rank " + std::to_string(rank) + ")") + ": " +
                        messages[r]);
    }
  }
  return Status::ok();
}

// Probe this rank's device for round A.
Result<DeviceCard> probe(int device, Where w) {
  DeviceCard c;
  c.device = device;
  FERRY_TRY(setDevice(device, w));
  auto props = deviceProps(device, w);
  FERRY_TRY(props);
  std::memcpy(c.uuid, props->uuid, 16);
  c.multiprocessors = props->multiprocessors;
  c.threads = gpu::maxThreadsPerBlock();
  c.residentPerSm = gpu::residentBlocksPerSm(c.threads);
  if (c.residentPerSm <= 0) {
    return makeError(ErrorCode::kUnhandledCudaError,
                     "rank %d, device %d (%s): the collective kernel cannot run with %d threads per block "
                     "(cudaOccupancyMaxActiveBlocksPerMultiprocessor gave 0: is the binary built for this GPU's "
                     "architecture?)",
                     w.rank, device, props->name.c_str(), c.threads);
  }
  const Config& k = config();
  c.coresident = k.gpuCoresident ? 1 : 0;
  c.maxCtas = k.maxCtas;
  c.slots = k.gpuSlots;
  c.slotBytes = k.gpuSlotBytes;
  c.llSlots = k.gpuLlSlots;
  c.llSlotBytes = k.gpuLlSlotBytes;
  return c;
}

Status checkKnobs(const DeviceCard& c) {
  auto bad = [](const char* name, int64_t v, const char* expected) {
    return makeError(ErrorCode::kInvalidArgument, "%s=%lld is invalid (expected %s)", name,
                     static_cast<long long>(v), expected);
  };
  if (c.maxCtas < 1) return bad("FERRY_MAX_CTAS", c.maxCtas, ">= 1");
  if (c.slots < 2) return bad("FERRY_GPU_SLOTS", c.slots, ">= 2");
  if (c.llSlots < 2) return bad("FERRY_GPU_LL_SLOTS", c.llSlots, ">= 2");
  if (c.slotBytes < 16 || c.slotBytes % 16 != 0) return bad("FERRY_GPU_SLOT_BYTES", c.slotBytes, "a multiple of 16");
  if (c.llSlotBytes < 16 || c.llSlotBytes % 16 != 0) {
    return bad("FERRY_GPU_LL_SLOT_BYTES", c.llSlotBytes, "a multiple of 16");
  }
  return Status::ok();
}

std::string hexUuid(const uint8_t* u) {
  char s[40];
  std::snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5]);
  return s;
}

}  // namespace

Status DeviceContext::deviceError() const {
  const auto* e = static_cast<const gpu::DevError*>(errorRecord_.host);
  if (e == nullptr || *reinterpret_cast<const volatile uint32_t*>(&e->state) != 1) return Status::ok();
  std::atomic_thread_fence(std::memory_order_acquire);
  const double waited = static_cast<double>(e->waitedNs) / 1e9, limit = static_cast<double>(config_.timeoutNs) / 1e9;
  return makeError(ErrorCode::kTimeout,
                   "GPU kernel of rank %d (device %d) waited %.1f s (FERRY_TIMEOUT=%g) on channel %d for rank %d: %s, "
                   "step %llu, saw %llu, needs %llu. The kernel trapped, so this process's CUDA context is lost: "
                   "destroy the communicator and restart the job (rank %d never got there: is it alive, and did it "
                   "make the same calls in the same order?)",
                   e->rank, where_.device, waited, limit, e->channel, e->peer, gpu::devWaitName(e->what),
                   static_cast<unsigned long long>(e->step), static_cast<unsigned long long>(e->seen),
                   static_cast<unsigned long long>(e->awaited), e->peer);
}

gpu::DevProto DeviceContext::proto(size_t bytes) const {
  if (forcedProto_ >= 0) return static_cast<gpu::DevProto>(forcedProto_);
  return bytes <= llMaxBytes_ ? gpu::DevProto::kLL : gpu::DevProto::kSimple;
}

Result<std::unique_ptr<DeviceContext>> DeviceContext::create(Rendezvous& rv, const std::vector<PeerInfo>& peers,
                                                             int rank, int size, int device, uint64_t commId,
                                                             Deadline deadline) {
  const Where w{rank, device};
  // Round A.
  Bytes mine;
  if (device < 0) {
    mine = pack(DeviceCard{});
  } else {
    auto card = probe(device, w);
    if (card.isOk()) {
      card->state = 1;
      mine = pack(*card);
    } else {
      DeviceCard failed;
      failed.state = 2;
      failed.device = device;
      mine = pack(failed, card.status().message());
    }
  }
  auto roundA = rv.allGather(mine, deadline);
  FERRY_TRY(roundA);
  std::vector<DeviceCard> cards;
  std::vector<std::string> messages(size);
  std::vector<int32_t> states;
  for (int r = 0; r < size; ++r) {
    auto c = unpack<DeviceCard>((*roundA)[r], r, &messages[r]);
    FERRY_TRY(c);
    cards.push_back(*c);
    states.push_back(c->state);
  }
  Status failed = firstFailure(messages, states, rank, "device");
  const bool anyDevice = std::any_of(cards.begin(), cards.end(), [](const DeviceCard& c) { return c.state == 1; });

  std::unique_ptr<DeviceContext> ctx;
  if (device >= 0 && failed.isOk()) {
    ctx.reset(new DeviceContext());
    ctx->where_ = w;
    ctx->commId_ = commId;
  }

  // The path, decided alike on every rank from the table. The sizes are rank 0's (or, when rank 0
  // has no device, those of the first rank that has one).
  const DeviceCard* sizes = nullptr;
  for (const DeviceCard& c : cards) {
    if (c.state == 1) {
      sizes = &c;
      break;
    }
  }
  std::string whyNot;
  bool kernel = failed.isOk() && anyDevice;
  if (kernel && size > gpu::kMaxDevRanks) {
    whyNot = std::to_string(size) + " ranks (the kernels handle at most " + std::to_string(gpu::kMaxDevRanks) + ")";
    kernel = false;
  }
  for (int r = 0; kernel && r < size; ++r) {
    if (cards[r].state != 1) {
      whyNot = "rank " + std::to_string(r) + " has no GPU";
      kernel = false;
    } else if (peers[r].hostId != peers[0].hostId) {
      whyNot = "the ranks are on several hosts";
      kernel = false;
    }
  }
  int channels = 0;
  if (kernel) {
    FERRY_TRY(checkKnobs(*sizes));
    // Co-residency: the blocks of every rank on one GPU wait on each other, so all must fit.
    channels = static_cast<int>(std::min<int64_t>(sizes->maxCtas, gpu::kMaxChannels));
    for (int r = 0; kernel && r < size; ++r) {
      int onGpu = 0;
      bool otherProcess = false;
      for (int q = 0; q < size; ++q) {
        if (std::memcmp(cards[q].uuid, cards[r].uuid, 16) != 0) continue;
        ++onGpu;
        otherProcess |= !sameProcess(peers[q], peers[r]);
      }
      if (otherProcess && !sizes->coresident) {
        whyNot = "ranks of different processes share " + hexUuid(cards[r].uuid) +
                 " (their kernels are time-sliced, not co-resident; FERRY_GPU_CORESIDENT=1 under MPS)";
        kernel = false;
        break;
      }
      int fit = cards[r].multiprocessors * cards[r].residentPerSm / onGpu;
      if (fit < 1) {
        return makeError(ErrorCode::kInvalidUsage,
                         "%d ranks share GPU %s (device %d of rank %d): the collective kernel needs all their blocks "
                         "resident at once, but %d multiprocessors x %d blocks of %d threads cannot hold one block "
                         "per rank; put fewer ranks on one GPU",
                         onGpu, hexUuid(cards[r].uuid).c_str(), cards[r].device, r, cards[r].multiprocessors,
                         cards[r].residentPerSm, cards[r].threads);
      }
      channels = std::min(channels, fit);
    }
  }

  // Round B (every rank takes part, with or without a device).
  if (kernel && ctx) {
    ctx->config_.nRanks = size;
    ctx->config_.nChannels = channels;
    ctx->config_.slots = static_cast<int>(sizes->slots);
    ctx->config_.slotBytes = static_cast<size_t>(sizes->slotBytes);
    ctx->config_.llSlots = static_cast<int>(sizes->llSlots);
    ctx->config_.llSlotBytes = static_cast<size_t>(sizes->llSlotBytes);
    ctx->threads_ = sizes->threads;
    // FERRY_TIMEOUT is at most kMaxTimeoutSeconds (1e15 ns fits); none is the kernels' 0, no deadline.
    ctx->config_.timeoutNs = config().timeout == kNoTimeout ? 0 : static_cast<uint64_t>(config().timeout * 1e9);
    std::vector<int> peerDevices;
    std::vector<std::vector<uint8_t>> uuids;
    bool oneDevice = true;
    for (const DeviceCard& c : cards) {
      peerDevices.push_back(c.device);
      uuids.emplace_back(c.uuid, c.uuid + 16);
      oneDevice &= std::memcmp(c.uuid, cards[0].uuid, 16) == 0;
    }
    ctx->config_.oneDevice = oneDevice;
    FERRY_TRY(ctx->setupKernel(rv, rank, size, peers, peerDevices, uuids, deadline));
    if (ctx->path_ != DevicePath::kKernel) whyNot = ctx->whyNot_;
  } else {
    // Off the kernel path, or failed: an empty card keeps the rounds in step.
    auto roundB = rv.allGather(pack(ReachCard{}), deadline);
    FERRY_TRY(roundB);
  }
  FERRY_TRY(failed);
  if (!ctx) return std::unique_ptr<DeviceContext>();
  ctx->sharingGpuInProcess_ = 0;
  ctx->ranksInProcess_ = 0;
  for (int r = 0; r < size; ++r) {
    ctx->ranksInProcess_ += sameProcess(peers[r], peers[rank]) ? 1 : 0;
    ctx->sharingGpuInProcess_ +=
        sameProcess(peers[r], peers[rank]) && std::memcmp(cards[r].uuid, cards[rank].uuid, 16) == 0 ? 1 : 0;
  }
  bool allInProcess = true;
  for (const PeerInfo& p : peers) allInProcess &= sameProcess(p, peers[0]);
  {
    const Config& k = config();
    if (k.gpuAlgo == "direct") {
      if (!allInProcess) {
        return makeError(ErrorCode::kInvalidArgument,
                         "FERRY_GPU_ALGO=direct on rank %d: the direct algorithm needs every rank in one process (use "
                         "ring or leave it empty)",
                         rank);
      }
      ctx->algo_ = gpu::DevAlgo::kDirect;
    } else if (k.gpuAlgo == "ring" || (k.gpuAlgo.empty() && !allInProcess)) {
      ctx->algo_ = gpu::DevAlgo::kRing;
    } else if (k.gpuAlgo.empty()) {
      ctx->algo_ = gpu::DevAlgo::kDirect;
    } else {
      return makeError(ErrorCode::kInvalidArgument, "FERRY_GPU_ALGO='%s' is not a GPU algorithm (expected ring or direct)",
                       k.gpuAlgo.c_str());
    }
    std::string p = k.gpuProto;
    std::transform(p.begin(), p.end(), p.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (p == "simple") {
      ctx->forcedProto_ = static_cast<int>(gpu::DevProto::kSimple);
    } else if (p == "ll") {
      ctx->forcedProto_ = static_cast<int>(gpu::DevProto::kLL);
    } else if (!p.empty()) {
      return makeError(ErrorCode::kInvalidArgument, "FERRY_GPU_PROTO='%s' is not a GPU protocol (expected simple or LL)",
                       k.gpuProto.c_str());
    }
    ctx->llMaxBytes_ = static_cast<size_t>(std::max<int64_t>(k.gpuLlMaxBytes, 0));
  }


  if (ctx->path_ != DevicePath::kKernel) {
    ctx->whyNot_ = whyNot;
    int inProcess = 0;
    for (const PeerInfo& p : peers) inProcess += sameProcess(p, peers[rank]) ? 1 : 0;
    if (inProcess == 1) {
      ctx->path_ = DevicePath::kStaged;
    } else {
      ctx->path_ = DevicePath::kNone;
      ctx->whyNot_ = "the kernels cannot run (" + whyNot + ") and the staged path needs one rank per process (" +
                     std::to_string(inProcess) + " ranks of this communicator share this process)";
    }
  }
  ctx->staging_ = std::make_unique<StagingPool>(w, static_cast<size_t>(std::max<int64_t>(config().gpuStagingBytes, 0)));
  if (ctx->path_ == DevicePath::kKernel) {
    FERRY_INFO(log::kInit,
               "comm %016llx rank %d device %d: device buffers run the kernels (%s), %d channels x %d threads; %zu "
               "bytes of device memory",
               static_cast<unsigned long long>(commId), rank, device,
               ctx->algo_ == gpu::DevAlgo::kDirect ? "direct" : "ring", ctx->config_.nChannels, ctx->threads_,
               ctx->memoryBytes_);
  } else {
    FERRY_INFO(log::kInit, "comm %016llx rank %d device %d: device buffers %s: %s",
               static_cast<unsigned long long>(commId), rank, device,
               ctx->path_ == DevicePath::kStaged ? "stage through host memory" : "cannot be used",
               ctx->whyNot_.c_str());
  }
  return ctx;
}

Status DeviceContext::setupKernel(Rendezvous& rv, int rank, int size, const std::vector<PeerInfo>& peers,
                                  const std::vector<int>& peerDevices, const std::vector<std::vector<uint8_t>>& uuids,
                                  Deadline deadline) {
  const Where w = where_;
  ReachCard card;
  std::string problem;
  auto prepare = [&]() -> Status {
    FERRY_TRY(setDevice(w.device, w));
    const size_t bytes = gpu::rankResourceBytes(config_);
    auto p = deviceAlloc(bytes, w);
    FERRY_TRY(p);
    resources_ = *p;
    memoryBytes_ += bytes;
    FERRY_TRY(memsetZero(resources_, bytes, w));
    FERRY_TRY(synchronizeDevice(w));
    card.pointer = reinterpret_cast<uint64_t>(resources_);
    bool crossProcess = false;
    for (int r = 0; r < size; ++r) crossProcess |= !sameProcess(peers[r], peers[rank]);
    crossProcess_ = crossProcess;
    if (crossProcess) {
      auto h = ipcHandle(resources_, w);
      FERRY_TRY(h);
      card.ipc = *h;
    }
    // Peer access to every other GPU this rank's kernels touch.
    card.reachAll = 1;
    for (int r = 0; r < size; ++r) {
      int local = sameProcess(peers[r], peers[rank]) ? peerDevices[r] : deviceByUuid(uuids[r].data());
      if (local < 0 || !canAccessPeer(w.device, local)) {
        card.reachAll = 0;
        problem = "device " + std::to_string(w.device) + " of rank " + std::to_string(rank) +
                  " cannot map the memory of rank " + std::to_string(r) + "'s GPU (no peer access)";
        break;
      }
      if (local != w.device && sameProcess(peers[r], peers[rank])) {
        Status st = enablePeerAccess(local, w);
        if (!st.isOk()) {
          card.reachAll = 0;
          problem = st.message();
          break;
        }
      }
    }
    return Status::ok();
  };
  Status st = prepare();
  card.state = st.isOk() ? 1 : 2;
  auto roundB = rv.allGather(pack(card, st.isOk() ? problem : st.message()), deadline);
  FERRY_TRY(roundB);
  std::vector<ReachCard> cards;
  std::vector<std::string> messages(size);
  std::vector<int32_t> states;
  for (int r = 0; r < size; ++r) {
    auto c = unpack<ReachCard>((*roundB)[r], r, &messages[r]);
    FERRY_TRY(c);
    cards.push_back(*c);
    states.push_back(c->state);
  }
  FERRY_TRY(firstFailure(messages, states, rank, "rank resources"));
  for (int r = 0; r < size; ++r) {
    if (!cards[r].reachAll) {
      // Every rank sees the same flags, so all leave the kernel path together.
      whyNot_ = messages[r];
      deviceFree(resources_);
      resources_ = nullptr;
      memoryBytes_ = 0;
      return Status::ok();
    }
  }
  std::vector<void*> bases(size);
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      bases[r] = resources_;
    } else if (sameProcess(peers[r], peers[rank])) {
      bases[r] = reinterpret_cast<void*>(cards[r].pointer);
    } else {
      auto p = ipcOpen(cards[r].ipc, r, w);
      FERRY_TRY(p);
      opened_.push_back(*p);
      bases[r] = *p;
    }
  }
  // Build the DevComm on the host, then copy it to the device once: calls only pass its address.
  const size_t devBytes = gpu::devCommBytes();
  constexpr std::align_val_t kAlign{256};
  std::unique_ptr<void, void (*)(void*)> host(::operator new(devBytes, kAlign),
                                              [](void* p) { ::operator delete(p, std::align_val_t{256}); });
  std::memset(host.get(), 0, devBytes);
  // The record a timed-out device wait writes: host-mapped, so the host reads it while the
  // kernel is stuck or after it trapped (device memory could not be read then).
  auto record = hostAllocMapped(sizeof(gpu::DevError), w);
  FERRY_TRY(record);
  errorRecord_ = *record;
  gpu::buildDevComm(config_, rank, bases, static_cast<gpu::DevError*>(errorRecord_.device),
                    static_cast<gpu::DevComm*>(host.get()));
  auto d = deviceAlloc(devBytes, w);
  FERRY_TRY(d);
  devComm_ = static_cast<gpu::DevComm*>(*d);
  memoryBytes_ += devBytes;
  FERRY_TRY(copyToDevice(devComm_, host.get(), devBytes, w));
  path_ = DevicePath::kKernel;
  return Status::ok();
}

DeviceContext::~DeviceContext() {
  // Freeing waits for this device's work (cudaFree synchronizes); kernels still waiting on a dead
  // peer would hang here, as in NCCL: abort() the communicator and reset the device instead.
  if (where_.device >= 0 && (resources_ != nullptr || devComm_ != nullptr || !opened_.empty())) {
    (void)setDevice(where_.device, where_);
  }
  staging_.reset();
  for (void* p : opened_) ipcClose(p);
  deviceFree(devComm_);
  deviceFree(resources_);
  hostFree(errorRecord_.host);
}

}  // namespace ferry::gpu
