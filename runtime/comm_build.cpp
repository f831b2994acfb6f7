// Making a communicator: the rounds of init over a rendezvous (build), the two levels across hosts
// (Comm::finish), and the ways in: create, fromEnv, split, shrink.
#include <cstdio>

#include "runtime/comm_impl.hpp"
#include "runtime/init_records.hpp"
#include "runtime/knob_resolvers.hpp"

namespace ferry {

namespace {

// FERRY_TRANSPORT picks the transport; shm needs every rank on this host in one pid namespace.
// Between hosts, auto means UCX where an RDMA port is active (it drives the fabric) and ferry's
// own TCP transport otherwise (several streams per pair, where UCX's TCP moves one).
// `rdmaPorts`: the RDMA ports UCX was told to use (rdmaPortsOf), left empty for the others.
Result<std::unique_ptr<transport::Transport>> createTransport(const std::vector<PeerInfo>& peers, int rank, int size,
                                                              uint64_t commId, std::string* rdmaPorts) {
  const PeerInfo& me = peers[rank];
  bool allLocal = true, samePidSpace = true;
  for (const PeerInfo& p : peers) {
    allLocal &= p.hostId == me.hostId;
    samePidSpace &= p.pidNamespace == me.pidNamespace;
  }
  std::string choice = config().transport;
  if (choice == "auto") choice = allLocal && samePidSpace ? "shm" : hasActiveRdma() ? "ucx" : "tcp";
  if (choice == "shm") {
    if (!allLocal || !samePidSpace) {
      return makeError(ErrorCode::kInvalidArgument,
                       "FERRY_TRANSPORT=shm needs every rank on this host and in one pid namespace (rank %d of %d is "
                       "on %s; use ucx or tcp across hosts)",
                       rank, size, me.hostname.c_str());
    }
    return transport::shm::createShmTransport({rank, size, commId, config().hugePages});
  }
  if (choice == "tcp") {
    transport::tcp::TcpOptions to;
    to.rank = rank;
    to.size = size;
    to.commId = commId;
    auto bind = listenAddress(peers, config().socketIfname);
    FERRY_TRY(bind);
    to.bind = bind->storage;
    to.bindLength = bind->length;
    to.streams = static_cast<int>(config().socketStreams);
    to.congestion = config().socketCongestion;
    to.spinUs = static_cast<long>(config().socketSpinUs);
    to.poolBytes = config().socketPoolBytes;
    to.connectSeconds = config().timeout;
    for (const PeerInfo& p : peers) to.sameHost.push_back(p.hostId == me.hostId);
    return transport::tcp::createTcpTransport(to);
  }
  if (choice != "ucx") {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_TRANSPORT='%s' on rank %d is not a transport (expected auto, ucx, tcp or shm)",
                     choice.c_str(), rank);
  }
  transport::ucx::UcxOptions uo;
  uo.rank = rank;
  uo.size = size;
  uo.netDevices = config().ucxNetDevices;
  if (uo.netDevices.empty() && readEnv("UCX_NET_DEVICES") == nullptr) {
    int local = 0;
    for (int r = 0; r < rank; ++r) local += peers[static_cast<size_t>(r)].hostId == me.hostId;
    auto d = chooseNetDevices(peers, rank, local);
    FERRY_TRY(d);
    uo.netDevices = *d;
  }
  for (const PeerInfo& p : peers) uo.sameHost.push_back(p.hostId == me.hostId);
  const char* env = readEnv("UCX_NET_DEVICES");
  *rdmaPorts = rdmaPortsOf(!uo.netDevices.empty() ? uo.netDevices : env != nullptr ? env : "");
  return transport::ucx::createUcxTransport(uo);
}

// Counts the rounds of one build(): split() runs kInitRounds empty rounds on the parent ranks
// that join no communicator, so every build() must run exactly that many.
class CountedRendezvous final : public Rendezvous {
 public:
  explicit CountedRendezvous(Rendezvous& rv) : rv_(rv) {}
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline deadline) override {
    ++rounds_;
    return rv_.allGather(mine, deadline);
  }
  Status checkRounds(int rank) const {
    if (rounds_ == kInitRounds) return Status::ok();
    return makeError(ErrorCode::kInternalError, "rank %d: init ran %d rounds (expected kInitRounds = %d)", rank,
                     rounds_, kInitRounds);
  }

 private:
  Rendezvous& rv_;
  int rounds_ = 0;
};

bool allOnOneHost(const std::vector<PeerInfo>& peers) {
  return std::all_of(peers.begin(), peers.end(), [&](const PeerInfo& p) { return p.hostId == peers[0].hostId; });
}

bool inOnePidSpace(const std::vector<PeerInfo>& peers) {
  return std::all_of(peers.begin(), peers.end(),
                     [&](const PeerInfo& p) { return p.pidNamespace == peers[0].pidNamespace; });
}

// Round 1: who and where every rank is. Rank 0's proposed id becomes the communicator's.
Result<std::vector<PeerInfo>> exchangePeers(Rendezvous& rv, Comm::Impl& impl, Deadline deadline) {
  auto records = rv.allGather(PeerInfo::local().serialize(), deadline);
  FERRY_TRY(records);
  std::vector<PeerInfo> peers;
  std::vector<std::string> hostIds;
  for (int r = 0; r < impl.size; ++r) {
    auto p = PeerInfo::deserialize((*records)[r], r);
    FERRY_TRY(p);
    hostIds.push_back(p->hostId);
    peers.push_back(std::move(*p));
  }
  impl.id = peers[0].commId;
  impl.layout = HostLayout::fromHostIds(hostIds);
  return peers;
}

// This host's topology, in the INFO log once per process: every communicator would say the same.
void describeHostOnce(const PeerInfo& me) {
  static std::atomic<bool> described{false};
  if (!log::enabled(log::Level::kInfo, log::kInit) || described.exchange(true)) return;
  static const std::string topology = [] {
    auto t = discoverTopology();
    return (t.isOk() ? t->describe() : t.status().message()) + "; " + describeRdma();
  }();
  FERRY_INFO(log::kInit, "host %s: %s", me.hostname.c_str(), topology.c_str());
}

// The arena's waits for `size` ranks on `cores` cores; mailboxes of FERRY_MAILBOX_BYTES, clamped.
transport::shm::ArenaOptions arenaOptions(const Comm::Impl& impl, int cores) {
  transport::shm::ArenaOptions ao;
  ao.rank = impl.rank;
  ao.size = impl.size;
  ao.commId = impl.id;
  ao.slotBytes = static_cast<size_t>(std::clamp<int64_t>(config().mailboxBytes, 4096, int64_t{1} << 30));
  ao.spinNs = resolveSpinNs(impl.size, cores);
  ao.yieldNs = resolveYieldNs(impl.size, cores);
  ao.pollSleep = impl.size > cores;
  ao.hugePages = config().hugePages;
  return ao;
}

// Where this rank can be reached (several ranks only): its shrink listener, its transport and,
// with every rank on this host in one pid namespace, its arena.
Status openEndpoints(Comm::Impl& impl, const std::vector<PeerInfo>& peers, int cores) {
  if (impl.size < 2) return Status::ok();
  // Listen for a shrink now: by the time one is needed the parent's transport may be gone.
  auto bind = listenAddress(peers, config().socketIfname);
  auto l = bind.isOk() ? ShrinkListener::open(*bind) : Result<std::unique_ptr<ShrinkListener>>(bind.status());
  if (l.isOk()) {
    impl.shrinkListener = std::move(*l);
  } else {
    FERRY_INFO(log::kInit, "no shrink listener (shrink() will fail on this communicator): %s",
               l.status().message().c_str());
  }
  auto t = createTransport(peers, impl.rank, impl.size, impl.id, &impl.rdmaPorts);
  FERRY_TRY(t);
  impl.transport = std::move(*t);
  if (allOnOneHost(peers) && inOnePidSpace(peers)) {
    auto a = transport::shm::createShmArena(arenaOptions(impl, cores));
    FERRY_TRY(a);
    impl.arena = std::move(*a);
  }
  return Status::ok();
}

// Round 2: every rank's addresses (AddressRecord), then the transport and the arena connect.
Status exchangeAddresses(Rendezvous& rv, Comm::Impl& impl, Deadline deadline) {
  Bytes mine;
  if (impl.size > 1) {
    AddressRecord a;
    a.transport = impl.transport->localAddress();
    if (impl.shrinkListener) a.shrink = impl.shrinkListener->contact();
    if (impl.arena) a.arena = impl.arena->localAddress();
    mine = a.serialize();
  }
  auto records = rv.allGather(mine, deadline);
  FERRY_TRY(records);
  if (impl.size < 2) return Status::ok();
  std::vector<Bytes> transportAddrs(impl.size), arenaAddrs(impl.size);
  for (int r = 0; r < impl.size; ++r) {
    auto a = AddressRecord::deserialize((*records)[r], r);
    FERRY_TRY(a);
    transportAddrs[r] = std::move(a->transport);
    impl.shrinkContacts.push_back(a->shrink);
    arenaAddrs[r] = std::move(a->arena);
  }
  FERRY_TRY(impl.transport->connect(transportAddrs));
  if (impl.arena) FERRY_TRY(impl.arena->connect(arenaAddrs));
  return Status::ok();
}

// The watchdog listens for the other ranks' error reports and checks that same-host peers live.
Status startWatchdog(Comm::Impl& impl, std::vector<PeerInfo> peers) {
  impl.watchdog = std::make_unique<Watchdog>(impl.transport.get(), impl.rank, std::move(peers),
                                             static_cast<double>(config().peerCheckMs) / 1000.0);
  impl.watchdog->setTrace(impl.id, impl.size, &impl.trace);
  return impl.watchdog->start();
}

// Round 3, the ready barrier: nobody sends before everyone listens for error reports. Each rank
// says whether single-copy reads work there and which RDMA ports it uses, and rank 0 adds its host
// model (ReadyRecord): the arena's algorithms are priced with all of it, those over the network
// between hosts with its copy and reduction rates.
Result<std::vector<ReadyRecord>> exchangeReady(Rendezvous& rv, Comm::Impl& impl, const std::string& hostKey,
                                               const cpu_set_t& hostSet, Deadline deadline) {
  ReadyRecord mine;
  mine.singleCopyReads = impl.arena && impl.arena->canRead();
  mine.rdmaPorts = impl.rdmaPorts;
  if (impl.rank == 0 && impl.arena) mine.model = loadOrMeasureHostModel(hostKey, config().tuneFile, hostSet);
  if (impl.rank == 0 && !impl.arena && impl.layout.hosts > 1) {
    mine.model = loadHostRates(hostKey, config().tuneFile, hostSet);
  }
  auto records = rv.allGather(mine.serialize(), deadline);
  FERRY_TRY(records);
  if (impl.transport) impl.transport->sealed();
  if (impl.arena) impl.arena->sealed();
  std::vector<ReadyRecord> readies;
  for (int r = 0; r < impl.size; ++r) {
    auto rec = ReadyRecord::deserialize((*records)[r], r);
    FERRY_TRY(rec);
    readies.push_back(std::move(*rec));
  }
  return readies;
}

// What the tuner plans with, alike on every rank: rank 0's host model where the ranks share an
// arena; else the hosts' layout, the links from each host that every one has (linksPerHost), and
// rank 0's copy and reduction rates (Comm::finish adds the network between the hosts).
Result<TunerInputs> tunerInputs(const Comm::Impl& impl, const std::vector<ReadyRecord>& readies, int cores) {
  TunerInputs ti;
  ti.ranks = impl.size;
  ti.arena = impl.arena != nullptr;
  ti.cma = ti.arena;
  for (const ReadyRecord& r : readies) ti.cma &= r.singleCopyReads;
  if (ti.arena) {
    if (!readies[0].model) return makeError(ErrorCode::kInternalError, "rank 0 sent no host model");
    ti.model = *readies[0].model;
    ti.mailboxBytes = impl.arena->slotBytes();
    ti.sharedMinBytes = static_cast<size_t>(std::max<int64_t>(config().sharedMinBytes, 0));
    ti.ranksOnHost = impl.size;
  } else {
    ti.model.cores = cores;
    // On one host without an arena nothing over the network is priced (no network measured): a
    // placeholder rate. No cross-memory reads between hosts: cmaBw is never used there.
    ti.model.copyBw = ti.model.copyBwCache = ti.model.reduceBw = ti.model.reduceBwCache = ti.model.cmaBw = 1e9;
    if (const auto& m = readies[0].model) {
      ti.model.copyBw = m->copyBw;
      ti.model.copyBwCache = m->copyBwCache;
      ti.model.reduceBw = m->reduceBw;
      ti.model.reduceBwCache = m->reduceBwCache;
    }
    ti.ranksPerHost = impl.layout.maxLocalSize();
    ti.hosts = impl.layout.hosts;
    ti.evenHosts = impl.layout.even();
    std::vector<std::string> ports;
    for (const ReadyRecord& r : readies) ports.push_back(r.rdmaPorts);
    ti.nicsPerHost = config().nicsPerHost > 0 ? static_cast<int>(std::min<int64_t>(config().nicsPerHost, 1 << 16))
                                              : impl.layout.linksPerHost(ports);
    if (ti.hosts > 1) {
      FERRY_INFO(log::kTune,
                 "comm %016llx rank %d of %d: %d hosts, up to %d ranks and %d NICs (RDMA ports in use) per host; "
                 "copies at %.1f GB/s, reductions at %.1f GB/s (rank 0's host)",
                 static_cast<unsigned long long>(impl.id), impl.rank, impl.size, ti.hosts, ti.ranksPerHost,
                 ti.nicsPerHost, ti.model.copyBw * 1e-9, ti.model.reduceBw * 1e-9);
    }
  }
  ti.sliceBytes = static_cast<size_t>(std::max<int64_t>(config().sliceBytes, 64));
  // Measured selection: single-host communicators, and those that get two levels (Comm::finish).
  ti.trials = resolveTuneTrials(ti.arena);
  ti.measureMaxBytes = static_cast<size_t>(std::max<int64_t>(config().tuneMeasureBytes, 0));
  ti.modelHosts = static_cast<int>(std::clamp<int64_t>(config().tuneModelHosts, 0, 1 << 30));
  return ti;
}

// Peers read intermediate results out of the scratch (a reduce's segments, at the root): in
// shared memory they copy them, where private memory would need a cross-memory read.
void useSharedScratch(coll::Scratch& scratch) {
  scratch.setAllocator({[](size_t bytes) -> void* {
                          auto p = transport::shm::allocShared(bytes);
                          return p.isOk() ? *p : std::aligned_alloc(64, (bytes + 63) & ~size_t{63});
                        },
                        [](void* p) {
                          if (!transport::shm::freeShared(p).isOk()) std::free(p);
                        }});
}

// What every call runs with (coll::Context): the parts, and the knobs read once here.
void setUpContext(Comm::Impl& impl, const TunerInputs& ti) {
  auto& ctx = impl.ctx;
  ctx.transport = impl.transport.get();
  ctx.rank = impl.rank;
  ctx.size = impl.size;
  ctx.hooks = impl.watchdog.get();
  if (impl.arena) useSharedScratch(impl.scratch);
  ctx.scratch = &impl.scratch;
  ctx.staging = &impl.staging;
  ctx.sliceBytes = ti.sliceBytes;
  ctx.depth = static_cast<int>(std::clamp<int64_t>(config().pipelineDepth, 1, 1024));
  ctx.checkMismatch = config().checkMismatch;
  ctx.trace = &impl.trace;
  ctx.arena = impl.arena.get();
  ctx.peerReads = ti.cma;
  // The pipelined reductions switch to reading shared buffers in place on their own (the hint the
  // tuner had may be one call old) only where the plan was not measured: measured plans stay what
  // they were measured as.
  ctx.sharedMinBytes = ti.trials > 0 ? std::max(ti.sharedMinBytes, ti.measureMaxBytes + 1) : ti.sharedMinBytes;
  ctx.streamMinBytes = resolveStreamMinBytes();
  // The rails ring: the ranks host by host and one rail per NIC, where every host has as many ranks.
  if (!impl.arena && impl.layout.hosts > 1 && impl.layout.even()) {
    ctx.hostOrder.clear();
    for (const std::vector<int>& m : impl.layout.members) ctx.hostOrder.insert(ctx.hostOrder.end(), m.begin(), m.end());
    ctx.hostRanks = impl.layout.maxLocalSize();
    ctx.rails = std::clamp(ti.nicsPerHost, 1, ctx.hostRanks);
  }
}

// Rounds 4 and 5: the GPU half (every rank takes part, with or without a device), and the
// SIGUSR1 dump, which also says what a timed-out GPU kernel was waiting for.
Status buildGpuHalf(Rendezvous& rv, Comm::Impl& impl, const std::vector<PeerInfo>& peers, Deadline deadline) {
  auto gpu = gpu::DeviceContext::create(rv, peers, impl.rank, impl.size, impl.device, impl.id, deadline);
  FERRY_TRY(gpu);
  impl.gpu = std::move(*gpu);
  const gpu::DeviceContext* gpuCtx = impl.gpu.get();
  impl.dumpRegistration =
      std::make_unique<StateDumpRegistration>(impl.id, impl.rank, impl.size, &impl.trace, [gpuCtx]() -> std::string {
        if (gpuCtx == nullptr) return {};
        Status st = gpuCtx->deviceError();
        return st.isOk() ? std::string() : st.message();
      });
  return Status::ok();
}

void logReady(const Comm::Impl& impl, bool singleCopyReads) {
  FERRY_INFO(log::kInit, "comm %016llx rank %d of %d ready (%s%s, %s)", static_cast<unsigned long long>(impl.id),
             impl.rank, impl.size, impl.transport ? impl.transport->name() : "single rank",
             impl.arena ? (singleCopyReads ? " + shared-memory arena with single-copy reads" : " + shared-memory arena")
                        : "",
             impl.layout.hosts == 1 ? "all ranks on this host" : "several hosts");
}

std::unique_ptr<Comm::Impl> newImpl(int rank, int size, int device) {
  auto impl = std::make_unique<Comm::Impl>();
  impl->rank = rank;
  impl->size = size;
  impl->device = device;
  impl->reproducible = config().reproducible;
  log::setRank(rank);
  return impl;
}

Status createTuner(Comm::Impl& impl, const TunerInputs& ti) {
  auto tuner = Tuner::create(ti, config().algo, config().proto, config().chunkBytes);
  FERRY_TRY(tuner);
  impl.tuner = std::make_unique<Tuner>(std::move(*tuner));
  return Status::ok();
}

// The composition root: the init rounds over `rendezvous` (kInitRounds of them), each a step above.
Result<std::unique_ptr<Comm::Impl>> build(Rendezvous& rendezvous, int rank, int size, int device) {
  const Deadline deadline = Deadline::after(config().timeout);
  CountedRendezvous rv(rendezvous);
  auto impl = newImpl(rank, size, device);
  auto peers = exchangePeers(rv, *impl, deadline);
  FERRY_TRY(peers);
  describeHostOnce((*peers)[rank]);
  // The CPUs of this host's ranks together: ranks bound to a core each are not oversubscribed.
  const cpu_set_t hostSet = hostCpus(*peers, rank);
  const int cores = std::max(CPU_COUNT(&hostSet), 1);
  FERRY_TRY(openEndpoints(*impl, *peers, cores));
  FERRY_TRY(exchangeAddresses(rv, *impl, deadline));
  FERRY_TRY(startWatchdog(*impl, *peers));
  auto readies = exchangeReady(rv, *impl, (*peers)[0].hostId, hostSet, deadline);
  FERRY_TRY(readies);
  auto inputs = tunerInputs(*impl, *readies, cores);
  FERRY_TRY(inputs);
  FERRY_TRY(createTuner(*impl, *inputs));
  setUpContext(*impl, *inputs);
  FERRY_TRY(buildGpuHalf(rv, *impl, *peers, deadline));
  FERRY_TRY(rv.checkRounds(rank));
  logReady(*impl, inputs->cma);
  return impl;
}

Status checkRankSize(const char* fn, int rank, int size) {
  if (size < 1) return makeError(ErrorCode::kInvalidArgument, "%s: size %d is invalid (expected size >= 1)", fn, size);
  if (rank < 0 || rank >= size) {
    return makeError(ErrorCode::kInvalidArgument, "%s: rank %d is out of range (expected 0 <= rank < size = %d)", fn,
                     rank, size);
  }
  FERRY_TRY(configStatus());
  // Said once per process, before the first wait: with no deadline a missing peer is a hang.
  static std::atomic<bool> warned{false};
  if (config().timeout == kNoTimeout && !warned.exchange(true)) {
    FERRY_WARN(log::kInit,
               "rank %d: FERRY_TIMEOUT=none: waits have no deadline; a peer that never arrives or "
               "answers makes this rank wait forever",
               rank);
  }
  return Status::ok();
}

class SoloRendezvous final : public Rendezvous {
 public:
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline) override { return std::vector<Bytes>{mine}; }
};

}  // namespace

// Rank 0's intra-host tuner inputs (a LevelRecord), rebuilt on every rank of `parent`.
Result<Tuner> agreedLevelTuner(Comm& parent, const Tuner& local) {
  Bytes blob;
  if (parent.rank() == 0) {
    const TunerInputs& in = local.inputs();
    LevelRecord mine;
    mine.ranks = in.ranks;
    mine.mailboxBytes = in.mailboxBytes;
    mine.arena = in.arena;
    mine.singleCopyReads = in.cma;
    mine.model = in.model;
    blob = mine.serialize();
  }
  uint64_t bytes = blob.size();
  FERRY_TRY(parent.broadcast(&bytes, &bytes, 1, DataType::kUint64, 0));
  if (bytes > LevelRecord::kMaxBytes) {
    return makeError(ErrorCode::kInternalError, "rank 0 sent a %llu-byte intra-host record (expected at most %llu)",
                     static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(LevelRecord::kMaxBytes));
  }
  blob.resize(bytes);
  FERRY_TRY(parent.broadcast(blob.data(), blob.data(), bytes, DataType::kUint8, 0));
  auto level = LevelRecord::deserialize(blob, 0);
  FERRY_TRY(level);
  TunerInputs in = local.inputs();
  in.ranks = in.ranksOnHost = level->ranks;
  in.mailboxBytes = level->mailboxBytes;
  in.arena = level->arena;
  in.cma = level->singleCopyReads;
  if (in.arena) in.model = level->model;
  return Tuner::create(in, config().algo, config().proto, config().chunkBytes);
}

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() {
  // Peers in other processes map this rank's device memory (CUDA IPC) and their kernels may still
  // poll it: every rank finishes its device work and meets the others before any of it is freed.
  // Skipped after an error (a dead peer would never come), and where this process holds several
  // ranks (their destructors run one after another, so a barrier would wait for a rank not yet
  // being destroyed); the barrier has FERRY_TIMEOUT.
  if (impl_ && impl_->gpu && impl_->gpu->sharedAcrossProcesses() && impl_->gpu->ranksInProcess() == 1 &&
      impl_->sticky().isOk()) {
    const gpu::Where w{impl_->rank, impl_->device};
    Status st = gpu::setDevice(impl_->device, w);
    if (st.isOk()) st = gpu::synchronizeDevice(w);
    if (st.isOk()) st = barrier();
    if (!st.isOk()) {
      FERRY_WARN(log::kInit, "rank %d: teardown without its peers: %s", impl_->rank, st.message().c_str());
    }
  }
}

Result<std::unique_ptr<Comm>> Comm::finish(std::unique_ptr<Impl> impl) {
  std::unique_ptr<Comm> comm(new Comm(std::move(impl)));
  Impl& m = *comm->impl_;
  if (m.size < 2 || m.layout.hosts < 2) return comm;
  // Ranks on several hosts: measure the network between rank 0 and the first rank of host 1, so
  // every rank prices the message algorithms (and the two levels) with the same numbers.
  auto net = probeNetwork(*comm, 0, m.layout.members[1][0]);
  FERRY_TRY(net);
  TunerInputs ti = m.tuner->inputs();
  ti.net = *net;
  // And the messages within a host, between host 0's first two ranks, where every host has as
  // many and they are numbered host by host: the formulas price the steps that stay on a host
  // apart (Pricing::hostMsg) by that numbering, and ranks of one host may talk through faster
  // paths than the network.
  bool inRows = m.layout.even() && m.layout.localSize(0) > 1;
  for (int r = 0; inRows && r < m.size; ++r)
    inRows = m.layout.hostOf[static_cast<size_t>(r)] == r / m.layout.localSize(0);
  if (inRows) {
    auto intra = probeNetwork(*comm, 0, 1);
    FERRY_TRY(intra);
    ti.intra = *intra;
  }
  if (m.layout.twoLevels() && m.tuner->allowsSomewhere(coll::Algorithm::kHierarchical)) {
    Watchdog* parentWatchdog = m.watchdog.get();
    auto make = [parentWatchdog](Rendezvous& rv, int r, int n) -> Result<std::unique_ptr<Comm>> {
      auto sub = build(rv, r, n, -1);
      FERRY_TRY(sub);
      (*sub)->reproducible = false;  // the parent's mode converts its calls before they reach a level
      (*sub)->watchdog->setParent(parentWatchdog);
      return std::unique_ptr<Comm>(new Comm(std::move(*sub)));
    };
    auto h = Hierarchy::create(*comm, m.layout, make, [parentWatchdog] { return parentWatchdog->stopped(); });
    log::setRank(m.rank);
    FERRY_TRY(h);
    m.hier = std::move(*h);
    m.ctx.levels = m.hier.get();
    // Across hosts the cross communicator's ranks are one per host, on the same network.
    Tuner& crossTuner = *m.hier->cross().impl_->tuner;
    TunerInputs ci = crossTuner.inputs();
    ci.net = *net;
    ci.ranksPerHost = 1;
    crossTuner.update(ci);
    // Every rank must price the intra-host level alike, whatever its own host holds: all take
    // rank 0's local tuner inputs (its host's model, ranks and mailboxes).
    auto level = agreedLevelTuner(*comm, *m.hier->local().impl_->tuner);
    FERRY_TRY(level);
    m.levelTuner = std::make_unique<Tuner>(std::move(*level));
    const Tuner* localTuner = m.levelTuner.get();
    ti.hierarchy = true;
    ti.localCost = [localTuner](CallKind k, size_t b) { return localTuner->predict(k, b); };
    ti.localCopyBw = localTuner->inputs().arena ? localTuner->inputs().model.copyBw : 0;
    auto chunk = resolveHierChunkBytes(m.rank, *net, ti.localCopyBw);
    FERRY_TRY(chunk);
    if (m.layout.hosts == 2) m.hier->setStreamChunkBytes(*chunk);
  }
  m.tuner->update(ti);
  const size_t chunk = m.hier ? m.hier->streamChunkBytes() : 0;
  const std::string chunked = chunk == 0 ? std::string()
                                         : "; all-reduces of " + std::to_string(2 * chunk) +
                                               " bytes and more cross through each host's first rank in chunks of " +
                                               std::to_string(chunk);
  char within[96] = "";
  if (ti.intra.measured) {
    std::snprintf(within, sizeof(within), "; within a host %.1f us + %.3f GB/s", ti.intra.alpha * 1e6,
                  1e-9 / ti.intra.beta);
  }
  FERRY_INFO(log::kInit, "comm %016llx rank %d of %d: %s; network between hosts %.1f us + %.3f GB/s per stream%s%s%s",
             static_cast<unsigned long long>(m.id), m.rank, m.size, m.layout.describe().c_str(), net->alpha * 1e6,
             net->beta > 0 ? 1e-9 / net->beta : 0.0, within, m.hier ? "; two levels" : "", chunked.c_str());
  return comm;
}

Result<std::unique_ptr<Comm>> Comm::create(const UniqueId& id, int rank, int size) {
  return create(id, rank, size, -1);
}

Result<std::unique_ptr<Comm>> Comm::create(const UniqueId& id, int rank, int size, int device) {
  FERRY_TRY(checkRankSize("Comm::create", rank, size));
  FERRY_TRY(gpu::checkDeviceRequest("Comm::create", rank, device));
  auto root = bootstrap::decodeUniqueId(id.bytes);
  FERRY_TRY(root);
  auto client =
      bootstrap::StoreClient::connect(root->addr, root->secret, rank, size, Deadline::after(config().timeout));
  FERRY_TRY(client);
  auto rv = storeRendezvous(std::move(*client));
  auto impl = build(*rv, rank, size, device);
  FERRY_TRY(impl);
  return finish(std::move(*impl));
}

Result<std::unique_ptr<Comm>> Comm::fromEnv() {
  FERRY_TRY(configStatus());
  auto launch = detectLaunch();
  FERRY_TRY(launch);
  FERRY_TRY(checkRankSize("Comm::fromEnv", launch->rank, launch->size));
  if (launch->size == 1 && launch->rootAddr.empty()) {
    SoloRendezvous solo;
    auto impl = build(solo, 0, 1, -1);
    FERRY_TRY(impl);
    return finish(std::move(*impl));
  }
  if (launch->rootAddr.empty()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "rank %d of %d (from %s) has no rendezvous address: set FERRY_ADDR=host:port (or MASTER_ADDR "
                     "and MASTER_PORT), the same on every rank; rank 0 listens there",
                     launch->rank, launch->size, launch->source.c_str());
  }
  auto addr = bootstrap::SocketAddress::parse(launch->rootAddr);
  FERRY_TRY(addr);
  bootstrap::Secret secret;
  if (!config().secret.empty()) {
    secret = bootstrap::Secret::fromString(config().secret);
  } else {
    FERRY_INFO(log::kBootstrap, "FERRY_SECRET is not set: any process that reaches %s can join this job",
               launch->rootAddr.c_str());
  }
  if (launch->rank == 0) {
    // Rank 0's own configuration fixes the world size: a rank that says otherwise is refused.
    auto server = bootstrap::StoreServer::start(*addr, secret, launch->size);
    if (!server.isOk()) {
      return makeError(server.status().code(), "rank 0 cannot listen for the rendezvous on %s: %s",
                       launch->rootAddr.c_str(), server.status().message().c_str());
    }
    bootstrap::StoreServer::detach(std::move(*server));
  }
  auto client =
      bootstrap::StoreClient::connect(*addr, secret, launch->rank, launch->size, Deadline::after(config().timeout));
  if (!client.isOk() && launch->rank != 0 && client.status().code() == ErrorCode::kTimeout) {
    // Only rank 0 listens there: its absence is the likely cause, so say so.
    return makeError(ErrorCode::kTimeout,
                     "rank %d of %d: rank 0, which listens for the rendezvous at %s (FERRY_ADDR), never arrived "
                     "or does not listen: %s",
                     launch->rank, launch->size, launch->rootAddr.c_str(), client.status().message().c_str());
  }
  FERRY_TRY(client);
  auto rv = storeRendezvous(std::move(*client));
  auto impl = build(*rv, launch->rank, launch->size, -1);
  FERRY_TRY(impl);
  return finish(std::move(*impl));
}

Result<std::unique_ptr<Comm>> Comm::split(int color, int key) {
  if (color < 0 && color != kSplitNoColor) {
    return makeError(ErrorCode::kInvalidArgument,
                     "split on rank %d: color %d is invalid (expected color >= 0, or kSplitNoColor = -1)", rank(),
                     color);
  }
  const int n = size();
  int32_t mine[3] = {color, key, rank()};
  std::vector<int32_t> all(3 * static_cast<size_t>(n));
  FERRY_TRY(allGather(mine, all.data(), 3, DataType::kInt32));
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (color != kSplitNoColor && all[3 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[3 * a + 1] < all[3 * b + 1]; });
  auto rv = parentRendezvous(*this, members);
  if (color == kSplitNoColor) {
    for (int i = 0; i < kInitRounds; ++i) {
      auto r = rv->allGather({}, Deadline::after(config().timeout));
      FERRY_TRY(r);
    }
    return std::unique_ptr<Comm>();
  }
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  auto impl = build(*rv, newRank, static_cast<int>(members.size()), impl_->device);
  log::setRank(rank());
  FERRY_TRY(impl);
  (*impl)->reproducible = impl_->reproducible;  // every member's parent has the same setting
  return finish(std::move(*impl));
}

Result<std::unique_ptr<Comm>> Comm::shrink(const std::vector<int>& exclude) {
  const int me = rank(), n = size();
  std::vector<int> ex = exclude;
  std::sort(ex.begin(), ex.end());
  ex.erase(std::unique(ex.begin(), ex.end()), ex.end());
  for (int r : ex) {
    if (r < 0 || r >= n) {
      return makeError(ErrorCode::kInvalidArgument,
                       "shrink on rank %d: exclude lists rank %d (expected 0 <= rank < size = %d)", me, r, n);
    }
    if (r == me) {
      return makeError(ErrorCode::kInvalidArgument,
                       "shrink on rank %d: exclude lists this rank itself (excluded ranks do not call shrink)", me);
    }
  }
  if (n == 1) {
    SoloRendezvous solo;
    auto impl = build(solo, 0, 1, impl_->device);
    log::setRank(me);
    FERRY_TRY(impl);
    (*impl)->reproducible = impl_->reproducible;
    return finish(std::move(*impl));
  }
  if (!impl_->shrinkListener || impl_->shrinkContacts.size() != static_cast<size_t>(n)) {
    return makeError(ErrorCode::kInvalidUsage,
                     "shrink on rank %d: this communicator opened no shrink listener at init (see the INFO log)", me);
  }
  Deadline deadline = Deadline::after(config().timeout);
  // abort() from another thread ends a shrink as it ends any wait; an abort from before the shrink
  // (NCCL_SHRINK_ABORT's, or the application's own) is what the shrink recovers from.
  Watchdog* w = impl_->watchdog.get();
  const bool abortedBefore = w != nullptr && !w->abortStatus().isOk();
  std::function<Status()> stop = [w, abortedBefore] {
    return w != nullptr && !abortedBefore ? w->abortStatus() : Status::ok();
  };
  auto m = gatherSurvivors(me, impl_->id, ex, *impl_->shrinkListener, impl_->shrinkContacts, deadline, stop);
  FERRY_TRY(m);
  FERRY_INFO(log::kInit, "comm %016llx rank %d: shrink to %zu ranks (excluded: %zu, found gone: %zu); new rank %d",
             static_cast<unsigned long long>(impl_->id), me, m->members.size(), ex.size(), m->gone.size(), m->newRank);
  auto impl = build(*m->rendezvous, m->newRank, static_cast<int>(m->members.size()), impl_->device);
  log::setRank(me);
  FERRY_TRY(impl);
  // The survivors keep their mode: a job that asked for reproducible sums keeps getting them.
  (*impl)->reproducible = impl_->reproducible;
  return finish(std::move(*impl));
}

}  // namespace ferry
