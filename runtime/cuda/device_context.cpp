// DeviceContext setup (see device_context.hpp): the two rounds, the path and channel decisions,
// and the mapping of the peers' rank resources.
#include "runtime/cuda/device_context.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <new>
#include <tuple>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/cuda/staging.hpp"

namespace ferry::gpu {
namespace {

// What a rank's card of either round says. The values travel between processes inside the cards:
// they never change.
enum class CardState : int32_t {
  kNoDevice = 0,  // the rank drives no device (round A only)
  kReady = 1,
  kFailed = 2,  // the card's message says why
};

// Round A: one rank's device, or why it has none. The sizes are rank 0's knobs, which every rank
// uses, so that the DevConfig agrees even if the environments differ.
struct DeviceCard {
  CardState state = CardState::kNoDevice;
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
  CardState state = CardState::kNoDevice;  // sent as kReady or kFailed
  int32_t reachAll = 0;                    // this rank can map every peer's GPU
  uint64_t pointer = 0;
  IpcHandle ipc;
};

static_assert(sizeof(CardState) == sizeof(int32_t), "cards keep their byte layout");

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

// One round: every rank's card, and in `messages` what each rank wrote after its card.
template <typename Card>
Result<std::vector<Card>> gatherCards(Rendezvous& rv, const Bytes& mine, int size, Deadline deadline,
                                      std::vector<std::string>* messages) {
  auto round = rv.allGather(mine, deadline);
  FERRY_TRY(round);
  std::vector<Card> cards;
  messages->assign(static_cast<size_t>(size), std::string());
  for (int r = 0; r < size; ++r) {
    auto c = unpack<Card>((*round)[r], r, &(*messages)[r]);
    FERRY_TRY(c);
    cards.push_back(*c);
  }
  return cards;
}

bool sameProcess(const PeerInfo& a, const PeerInfo& b) {
  return a.hostId == b.hostId && a.pidNamespace == b.pidNamespace && a.pid == b.pid;
}

// The first failure any rank reported, as every rank's error.
template <typename Card>
Status firstFailure(const std::vector<std::string>& messages, const std::vector<Card>& cards, int rank,
                    const char* round) {
  for (size_t r = 0; r < cards.size(); ++r) {
    if (cards[r].state == CardState::kFailed) {
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
    return makeError(ErrorCode::kInvalidArgument, "%s=%lld is invalid (expected %s)", name, static_cast<long long>(v),
                     expected);
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

// The state create() passes from one step to the next.
struct DeviceContext::Setup {
  Rendezvous& rv;
  const std::vector<PeerInfo>& peers;
  int rank, size, device;
  uint64_t commId;
  Deadline deadline;
  Where w{rank, device};
  std::vector<DeviceCard> cards{};  // round A, every rank's
  Status failed{};                  // the first failure of round A, every rank's error after round B
  std::unique_ptr<DeviceContext> ctx{};
  const DeviceCard* sizes = nullptr;  // the card whose knobs every rank uses
  bool kernel = false;
  int channels = 0;
  std::string whyNot{};

  Status exchangeDeviceCards();
  Status choosePath();
  Status fitChannels();
  Status exchangeReachCards();
  Status setupKernel();
  Status prepareResources(ReachCard& card, std::string& problem);
  Result<std::vector<void*>> mapPeers(const std::vector<ReachCard>& reach);
  Status uploadDevComm(const std::vector<void*>& bases);
  void countRanksInProcess();
  Status readAlgorithmKnobs();
  void chooseHostPath();
  void logPath() const;
};

// Round A: probe this rank's device, publish it (or why it failed) and read every rank's. A failure
// is kept, not returned, so that this rank still takes part in round B.
Status DeviceContext::Setup::exchangeDeviceCards() {
  Bytes mine;
  if (device < 0) {
    mine = pack(DeviceCard{});
  } else {
    auto card = probe(device, w);
    if (card.isOk()) {
      card->state = CardState::kReady;
      mine = pack(*card);
    } else {
      DeviceCard failedCard;
      failedCard.state = CardState::kFailed;
      failedCard.device = device;
      mine = pack(failedCard, card.status().message());
    }
  }
  std::vector<std::string> messages;
  auto all = gatherCards<DeviceCard>(rv, mine, size, deadline, &messages);
  FERRY_TRY(all);
  cards = std::move(*all);
  failed = firstFailure(messages, cards, rank, "device");
  if (device >= 0 && failed.isOk()) {
    ctx.reset(new DeviceContext());
    ctx->where_ = w;
    ctx->commId_ = commId;
  }
  return Status::ok();
}

// The path, decided alike on every rank from the table. The sizes are rank 0's (or, when rank 0
// has no device, those of the first rank that has one).
Status DeviceContext::Setup::choosePath() {
  auto ready = [](const DeviceCard& c) { return c.state == CardState::kReady; };
  const auto first = std::find_if(cards.begin(), cards.end(), ready);
  if (first != cards.end()) sizes = &*first;
  kernel = failed.isOk() && sizes != nullptr;
  if (kernel && size > gpu::kMaxDevRanks) {
    whyNot = std::to_string(size) + " ranks (the kernels handle at most " + std::to_string(gpu::kMaxDevRanks) + ")";
    kernel = false;
  }
  for (int r = 0; kernel && r < size; ++r) {
    if (!ready(cards[r])) {
      whyNot = "rank " + std::to_string(r) + " has no GPU";
      kernel = false;
    } else if (peers[r].hostId != peers[0].hostId) {
      whyNot = "the ranks are on several hosts";
      kernel = false;
    }
  }
  if (!kernel) return Status::ok();
  FERRY_TRY(checkKnobs(*sizes));
  return fitChannels();
}

// Co-residency: the blocks of every rank on one GPU wait on each other, so all must fit.
Status DeviceContext::Setup::fitChannels() {
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
  return Status::ok();
}

// Round B (every rank takes part, with or without a device).
Status DeviceContext::Setup::exchangeReachCards() {
  if (!kernel || !ctx) {
    // Off the kernel path, or failed: an empty card keeps the rounds in step.
    auto roundB = rv.allGather(pack(ReachCard{}), deadline);
    FERRY_TRY(roundB);
    return Status::ok();
  }
  gpu::DevConfig& config = ctx->config_;
  config.nRanks = size;
  config.nChannels = channels;
  config.slots = static_cast<int>(sizes->slots);
  config.slotBytes = static_cast<size_t>(sizes->slotBytes);
  config.llSlots = static_cast<int>(sizes->llSlots);
  config.llSlotBytes = static_cast<size_t>(sizes->llSlotBytes);
  ctx->threads_ = sizes->threads;
  // FERRY_TIMEOUT is at most kMaxTimeoutSeconds (1e15 ns fits); none is the kernels' 0, no deadline.
  config.timeoutNs = ferry::config().timeout == kNoTimeout ? 0 : static_cast<uint64_t>(ferry::config().timeout * 1e9);
  bool oneDevice = true;
  for (const DeviceCard& c : cards) oneDevice &= std::memcmp(c.uuid, cards[0].uuid, 16) == 0;
  config.oneDevice = oneDevice;
  FERRY_TRY(setupKernel());
  if (ctx->path_ != DevicePath::kKernel) whyNot = ctx->whyNot_;
  return Status::ok();
}

void DeviceContext::Setup::countRanksInProcess() {
  ctx->sharingGpuInProcess_ = 0;
  ctx->ranksInProcess_ = 0;
  for (int r = 0; r < size; ++r) {
    ctx->ranksInProcess_ += sameProcess(peers[r], peers[rank]) ? 1 : 0;
    ctx->sharingGpuInProcess_ +=
        sameProcess(peers[r], peers[rank]) && std::memcmp(cards[r].uuid, cards[rank].uuid, 16) == 0 ? 1 : 0;
  }
  // From the peer table alone, so every rank finds the same number (staging decisions rely on it).
  std::map<std::tuple<std::string, uint64_t, pid_t>, int> perProcess;
  for (const PeerInfo& p : peers) {
    const int together = ++perProcess[{p.hostId, p.pidNamespace, p.pid}];
    ctx->mostRanksInOneProcess_ = std::max(ctx->mostRanksInOneProcess_, together);
  }
}

// FERRY_GPU_ALGO, FERRY_GPU_PROTO and FERRY_GPU_LL_MAX_BYTES.
Status DeviceContext::Setup::readAlgorithmKnobs() {
  bool allInProcess = true;
  for (const PeerInfo& p : peers) allInProcess &= sameProcess(p, peers[0]);
  const Config& k = ferry::config();
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
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_GPU_ALGO='%s' is not a GPU algorithm (expected ring or direct)", k.gpuAlgo.c_str());
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
  return Status::ok();
}

// Off the kernel path: staged through host memory when this rank is alone in its process.
void DeviceContext::Setup::chooseHostPath() {
  if (ctx->path_ == DevicePath::kKernel) return;
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

void DeviceContext::Setup::logPath() const {
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
}

Result<std::unique_ptr<DeviceContext>> DeviceContext::create(Rendezvous& rv, const std::vector<PeerInfo>& peers,
                                                             int rank, int size, int device, uint64_t commId,
                                                             Deadline deadline) {
  Setup s{rv, peers, rank, size, device, commId, deadline};
  FERRY_TRY(s.exchangeDeviceCards());
  FERRY_TRY(s.choosePath());
  FERRY_TRY(s.exchangeReachCards());
  FERRY_TRY(s.failed);  // round A's, now that this rank took part in round B
  if (!s.ctx) return std::unique_ptr<DeviceContext>();
  s.countRanksInProcess();
  FERRY_TRY(s.readAlgorithmKnobs());
  s.chooseHostPath();
  s.ctx->staging_ =
      std::make_unique<StagingPool>(s.w, static_cast<size_t>(std::max<int64_t>(ferry::config().gpuStagingBytes, 0)));
  s.logPath();
  return std::move(s.ctx);
}

// Round B on the kernel path: publish this rank's resources, then map every peer's and build the
// DevComm, or leave the kernel path with every rank.
Status DeviceContext::Setup::setupKernel() {
  ReachCard card;
  std::string problem;
  Status st = prepareResources(card, problem);
  card.state = st.isOk() ? CardState::kReady : CardState::kFailed;
  std::vector<std::string> messages;
  auto gathered = gatherCards<ReachCard>(rv, pack(card, st.isOk() ? problem : st.message()), size, deadline, &messages);
  FERRY_TRY(gathered);
  const std::vector<ReachCard>& reach = *gathered;
  FERRY_TRY(firstFailure(messages, reach, rank, "rank resources"));
  for (int r = 0; r < size; ++r) {
    if (!reach[r].reachAll) {
      // Every rank sees the same flags, so all leave the kernel path together.
      ctx->whyNot_ = messages[r];
      deviceFree(ctx->resources_);
      ctx->resources_ = nullptr;
      ctx->memoryBytes_ = 0;
      return Status::ok();
    }
  }
  auto bases = mapPeers(reach);
  FERRY_TRY(bases);
  FERRY_TRY(uploadDevComm(*bases));
  ctx->path_ = DevicePath::kKernel;
  return Status::ok();
}

// This rank's zeroed rank resources and its card for round B. `problem` says why this rank cannot
// map some peer's GPU (the card's reachAll is then 0).
Status DeviceContext::Setup::prepareResources(ReachCard& card, std::string& problem) {
  DeviceContext& c = *ctx;
  FERRY_TRY(setDevice(w.device, w));
  const size_t bytes = gpu::rankResourceBytes(c.config_);
  auto p = deviceAlloc(bytes, w);
  FERRY_TRY(p);
  c.resources_ = *p;
  c.memoryBytes_ += bytes;
  FERRY_TRY(memsetZero(c.resources_, bytes, w));
  FERRY_TRY(synchronizeDevice(w));
  card.pointer = reinterpret_cast<uint64_t>(c.resources_);
  bool crossProcess = false;
  for (int r = 0; r < size; ++r) crossProcess |= !sameProcess(peers[r], peers[rank]);
  c.crossProcess_ = crossProcess;
  if (crossProcess) {
    auto h = ipcHandle(c.resources_, w);
    FERRY_TRY(h);
    card.ipc = *h;
  }
  // Peer access to every other GPU this rank's kernels touch.
  card.reachAll = 1;
  for (int r = 0; r < size; ++r) {
    int local = sameProcess(peers[r], peers[rank]) ? cards[r].device : deviceByUuid(cards[r].uuid);
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
}

// Every rank's resources as this rank addresses them: its own, a peer's pointer in this process,
// or a peer's block in another process opened by CUDA IPC.
Result<std::vector<void*>> DeviceContext::Setup::mapPeers(const std::vector<ReachCard>& reach) {
  std::vector<void*> bases(size);
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      bases[r] = ctx->resources_;
    } else if (sameProcess(peers[r], peers[rank])) {
      bases[r] = reinterpret_cast<void*>(reach[r].pointer);
    } else {
      auto p = ipcOpen(reach[r].ipc, r, w);
      FERRY_TRY(p);
      ctx->opened_.push_back(*p);
      bases[r] = *p;
    }
  }
  return bases;
}

// Build the DevComm on the host, then copy it to the device once: calls only pass its address.
Status DeviceContext::Setup::uploadDevComm(const std::vector<void*>& bases) {
  DeviceContext& c = *ctx;
  const size_t devBytes = gpu::devCommBytes();
  constexpr std::align_val_t kAlign{256};
  std::unique_ptr<void, void (*)(void*)> host(::operator new(devBytes, kAlign),
                                              [](void* p) { ::operator delete (p, std::align_val_t{256}); });
  std::memset(host.get(), 0, devBytes);
  // The record a timed-out device wait writes: host-mapped, so the host reads it while the
  // kernel is stuck or after it trapped (device memory could not be read then).
  auto record = hostAllocMapped(sizeof(gpu::DevError), w);
  FERRY_TRY(record);
  c.errorRecord_ = *record;
  gpu::buildDevComm(c.config_, rank, bases, static_cast<gpu::DevError*>(c.errorRecord_.device),
                    static_cast<gpu::DevComm*>(host.get()));
  auto d = deviceAlloc(devBytes, w);
  FERRY_TRY(d);
  c.devComm_ = static_cast<gpu::DevComm*>(*d);
  c.memoryBytes_ += devBytes;
  FERRY_TRY(copyToDevice(c.devComm_, host.get(), devBytes, w));
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
