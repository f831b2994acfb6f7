// Making a communicator: the rounds of init over a rendezvous (build), the two levels across hosts
// (Comm::finish), and the ways in: create, fromEnv, split, shrink.
#include "runtime/comm_impl.hpp"

namespace ferry {

namespace {

// FERRY_STREAM_MIN_BYTES, with -1 resolved to the size of the last-level cache (all instances):
// an output that large cannot stay in the caches until its reader comes. 32 MiB where hwloc
// reports no cache sizes.
size_t streamMinBytes() {
  static const size_t automatic = [] {
    auto t = discoverTopology();
    if (t.isOk() && t->l3Bytes > 0) return t->l3Bytes * static_cast<size_t>(std::max(t->l3Count, 1));
    if (t.isOk() && t->l2Bytes > 0) return t->l2Bytes * static_cast<size_t>(std::max(t->cores, 1));
    return size_t{32} << 20;
  }();
  const int64_t v = config().streamMinBytes;
  return v < 0 ? automatic : static_cast<size_t>(v);
}

// FERRY_HIER_CHUNK_BYTES, with -1 resolved from the measured network and memory copy rates, which
// every rank holds alike (rank 0's probe and model). Where a stream between the hosts carries less
// than an eighth of what memory copies, the crossing is the call's time and overlapping the
// intra-host steps with it pays; where the two are closer (veth between namespaces: 5.8 GB/s per
// stream) the ranks' cores do both, and chunked calls took 1.3-1.5x as long (2 hosts x 2 ranks,
// 16-64 MiB, 2026-12-04).
Result<size_t> hierChunkBytes(int rank, const NetLevel& net, double copyBw) {
  const int64_t v = config().hierChunkBytes;
  if (v < -1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_HIER_CHUNK_BYTES=%lld on rank %d: expected -1 (automatic), 0 (never) or a chunk size in "
                     "bytes",
                     static_cast<long long>(v), rank);
  }
  if (v >= 0) return static_cast<size_t>(v);
  constexpr double kSlower = 8;
  const bool slow = net.measured && net.beta > 0 && copyBw > 0 && 1.0 / net.beta * kSlower <= copyBw;
  return slow ? size_t{8} << 20 : 0;
}


// FERRY_TRANSPORT picks the transport; shm needs every rank on this host in one pid namespace.
// Between hosts, auto means UCX where an RDMA port is active (it drives the fabric) and ferry's
// own TCP transport otherwise (several streams per pair, where UCX's TCP moves one).
Result<std::unique_ptr<transport::Transport>> createTransport(const std::vector<PeerInfo>& peers, int rank, int size,
                                                              uint64_t commId) {
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
    return transport::shm::createShmTransport({rank, size, commId});
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
  return transport::ucx::createUcxTransport(uo);
}

Result<std::unique_ptr<Comm::Impl>> build(Rendezvous& rv, int rank, int size, int device) {
  Deadline deadline = Deadline::after(config().timeout);
  auto impl = std::make_unique<Comm::Impl>();
  impl->rank = rank;
  impl->size = size;
  impl->device = device;
  log::setRank(rank);

  // Round 1: who and where everyone is.
  auto infos = rv.allGather(PeerInfo::local().serialize(), deadline);
  FERRY_TRY(infos);
  std::vector<PeerInfo> peers;
  for (int r = 0; r < size; ++r) {
    auto p = PeerInfo::deserialize((*infos)[r], r);
    FERRY_TRY(p);
    peers.push_back(std::move(*p));
  }
  impl->id = peers[0].commId;
  {
    std::vector<std::string> ids;
    for (const PeerInfo& p : peers) ids.push_back(p.hostId);
    impl->layout = HostLayout::fromHostIds(ids);
  }
  static std::atomic<bool> described{false};  // once per process: every communicator would say the same
  if (log::enabled(log::Level::kInfo, log::kInit) && !described.exchange(true)) {
    static const std::string topology = [] {
      auto t = discoverTopology();
      return (t.isOk() ? t->describe() : t.status().message()) + "; " + describeRdma();
    }();
    FERRY_INFO(log::kInit, "host %s: %s", peers[rank].hostname.c_str(), topology.c_str());
  }
  bool allLocal = std::all_of(peers.begin(), peers.end(), [&](const PeerInfo& p) { return p.hostId == peers[0].hostId; });

  // Round 2: transport addresses.
  const std::string hostKey = peers[0].hostId;  // peers moves into the watchdog below
  // Round 2: transport, shrink and arena addresses, as [u32 length][transport address][u32 length]
  // [shrink contact][arena address].
  const bool onePidSpace = std::all_of(peers.begin(), peers.end(), [&](const PeerInfo& p) {
    return p.pidNamespace == peers[0].pidNamespace;
  });
  Bytes address;
  if (size > 1) {
    // Listen for a shrink now: by the time one is needed the parent's transport may be gone.
    auto bind = listenAddress(peers, config().socketIfname);
    auto l = bind.isOk() ? ShrinkListener::open(*bind) : Result<std::unique_ptr<ShrinkListener>>(bind.status());
    if (l.isOk()) {
      impl->shrinkListener = std::move(*l);
    } else {
      FERRY_INFO(log::kInit, "no shrink listener (shrink() will fail on this communicator): %s",
                 l.status().message().c_str());
    }
  }
  // The CPUs this host's ranks have between them: ranks bound one per core (ferryrun, mpirun)
  // each see one CPU, and are not oversubscribed for it.
  const cpu_set_t hostSet = hostCpus(peers, rank);
  const int cores = std::max(CPU_COUNT(&hostSet), 1);
  if (size > 1) {
    auto t = createTransport(peers, rank, size, impl->id);
    FERRY_TRY(t);
    impl->transport = std::move(*t);
    Bytes ta = impl->transport->localAddress();
    uint32_t len = static_cast<uint32_t>(ta.size());
    address.resize(4);
    std::memcpy(address.data(), &len, 4);
    address.insert(address.end(), ta.begin(), ta.end());
    Bytes sc = impl->shrinkListener ? impl->shrinkListener->contact().serialize() : ShrinkContact{}.serialize();
    len = static_cast<uint32_t>(sc.size());
    address.insert(address.end(), reinterpret_cast<const uint8_t*>(&len), reinterpret_cast<const uint8_t*>(&len) + 4);
    address.insert(address.end(), sc.begin(), sc.end());
    if (allLocal && onePidSpace) {
      transport::shm::ArenaOptions ao;
      ao.rank = rank;
      ao.size = size;
      ao.commId = impl->id;
      ao.slotBytes = static_cast<size_t>(std::clamp<int64_t>(config().mailboxBytes, 4096, int64_t{1} << 30));
      ao.spinNs = config().spinNs >= 0 ? config().spinNs : size > cores ? 500 : 20000;
      ao.yieldNs = config().yieldNs >= 0 ? config().yieldNs : size > cores ? 20000 : 200000;
      ao.pollSleep = size > cores;
      auto a = transport::shm::createShmArena(ao);
      FERRY_TRY(a);
      impl->arena = std::move(*a);
      Bytes aa = impl->arena->localAddress();
      address.insert(address.end(), aa.begin(), aa.end());
    }
  }
  auto addrs = rv.allGather(address, deadline);
  FERRY_TRY(addrs);
  if (size > 1) {
    std::vector<Bytes> transportAddrs(size), arenaAddrs(size);
    for (int r = 0; r < size; ++r) {
      const Bytes& a = (*addrs)[r];
      uint32_t len = 0, slen = 0;
      if (a.size() < 4 || (std::memcpy(&len, a.data(), 4), a.size() < 8 + size_t{len}) ||
          (std::memcpy(&slen, a.data() + 4 + len, 4), a.size() < 8 + size_t{len} + slen)) {
        return makeError(ErrorCode::kInternalError, "rank %d published a malformed address (%zu bytes)", r, a.size());
      }
      transportAddrs[r].assign(a.begin() + 4, a.begin() + 4 + len);
      auto sc = ShrinkContact::deserialize(Bytes(a.begin() + 8 + len, a.begin() + 8 + len + slen), r);
      FERRY_TRY(sc);
      impl->shrinkContacts.push_back(*sc);
      arenaAddrs[r].assign(a.begin() + 8 + len + slen, a.end());
    }
    FERRY_TRY(impl->transport->connect(transportAddrs));
    if (impl->arena) FERRY_TRY(impl->arena->connect(arenaAddrs));
  }

  const std::vector<PeerInfo> peersForGpu = peers;
  impl->watchdog = std::make_unique<Watchdog>(impl->transport.get(), rank, std::move(peers),
                                              static_cast<double>(config().peerCheckMs) / 1000.0);
  impl->watchdog->setTrace(impl->id, size, &impl->trace);
  FERRY_TRY(impl->watchdog->start());
  // Round 3: nobody sends before everyone listens for error reports.
  // Round 3, the ready barrier, carries whether single-copy reads work from each rank and rank 0's
  // host model, so every rank plans with the same numbers.
  Bytes ready(1, impl->arena && impl->arena->canRead() ? 1 : 0);
  HostModel model;
  if (rank == 0 && impl->arena) {
    model = loadOrMeasureHostModel(hostKey, config().tuneFile, hostSet);
    Bytes m = model.serialize();
    ready.insert(ready.end(), m.begin(), m.end());
  }
  auto readies = rv.allGather(ready, deadline);
  FERRY_TRY(readies);
  if (impl->transport) impl->transport->sealed();
  if (impl->arena) impl->arena->sealed();
  TunerInputs ti;
  ti.ranks = size;
  ti.arena = impl->arena != nullptr;
  ti.cma = ti.arena;
  for (const Bytes& b : *readies) ti.cma &= !b.empty() && b[0] == 1;
  if (ti.arena) {
    const Bytes& b0 = (*readies)[0];
    auto m = HostModel::deserialize(Bytes(b0.begin() + 1, b0.end()));
    if (!m.isOk()) return makeError(ErrorCode::kInternalError, "rank 0 sent no host model: %s", m.status().message().c_str());
    ti.model = *m;
    ti.mailboxBytes = impl->arena->slotBytes();
    ti.sharedMinBytes = static_cast<size_t>(std::max<int64_t>(config().sharedMinBytes, 0));
    ti.ranksOnHost = size;
  } else {
    ti.model.cores = cores;
    ti.model.copyBw = ti.model.copyBwCache = ti.model.reduceBw = ti.model.reduceBwCache = ti.model.cmaBw = 1e9;
    ti.ranksPerHost = impl->layout.maxLocalSize();
    ti.hosts = impl->layout.hosts;
    ti.evenHosts = impl->layout.even();
  }
  ti.sliceBytes = static_cast<size_t>(std::max<int64_t>(config().sliceBytes, 64));
  // Measured selection: single-host communicators, and those that get two levels (Comm::finish).
  // FERRY_TUNE_TRIALS < 0 (the default): 2 calls a plan on one host, 12 between hosts. There a
  // plan that forwards through socket buffers (a flat chain) looks fast until they fill, and
  // leaves a backlog the next plan's first calls pay for: on 2 hosts of 2 ranks, reduce of 1 and
  // 4 MiB, runs of 3 calls chose the chain in 4 of 6 cases (2-5x slower than the two levels in a
  // stream), runs of 7 in 2 of 14; broadcast of 1 MiB kept the chain in runs of 7 (its fastest
  // call, Tuner::settle), 450-850 us a call against the two levels' 300-420. Now each plan runs 13
  // calls twice in turn and keeps the better mean of its runs' last 6 (the two-level plans' trial
  // calls no longer run their sub-communicators' own trials: Tuner::holdTrials).
  const int64_t trials = config().tuneTrials >= 0 ? config().tuneTrials : (ti.arena ? 2 : 12);
  ti.trials = static_cast<int>(std::clamp<int64_t>(trials, 0, 16));
  ti.measureMaxBytes = static_cast<size_t>(std::max<int64_t>(config().tuneMeasureBytes, 0));
  auto tuner = Tuner::create(ti, config().algo, config().proto, config().chunkBytes);
  FERRY_TRY(tuner);
  impl->tuner = std::make_unique<Tuner>(std::move(*tuner));

  auto& ctx = impl->ctx;
  ctx.transport = impl->transport.get();
  ctx.rank = rank;
  ctx.size = size;
  ctx.hooks = impl->watchdog.get();
  if (impl->arena) {
    // Peers read intermediate results out of the scratch (a reduce's segments, at the root): in
    // shared memory they copy them, where private memory would need a cross-memory read.
    impl->scratch.setAllocator({[](size_t bytes) -> void* {
                                  auto p = transport::shm::allocShared(bytes);
                                  return p.isOk() ? *p : std::aligned_alloc(64, (bytes + 63) & ~size_t{63});
                                },
                                [](void* p) {
                                  if (!transport::shm::freeShared(p).isOk()) std::free(p);
                                }});
  }
  ctx.scratch = &impl->scratch;
  ctx.staging = &impl->staging;
  ctx.sliceBytes = static_cast<size_t>(std::max<int64_t>(config().sliceBytes, 64));
  ctx.depth = static_cast<int>(std::clamp<int64_t>(config().pipelineDepth, 1, 1024));
  ctx.checkMismatch = config().checkMismatch;
  ctx.trace = &impl->trace;
  ctx.arena = impl->arena.get();
  ctx.peerReads = ti.cma;
  // The pipelined reductions switch to reading shared buffers in place on their own (the hint the
  // tuner had may be one call old) only where the plan was not measured: measured plans stay what
  // they were measured as.
  ctx.sharedMinBytes = ti.trials > 0 ? std::max(ti.sharedMinBytes, ti.measureMaxBytes + 1) : ti.sharedMinBytes;
  ctx.streamMinBytes = streamMinBytes();
  // Rounds 4 and 5: the GPU half (every rank takes part, with or without a device).
  auto gpu = gpu::DeviceContext::create(rv, peersForGpu, rank, size, device, impl->id, deadline);
  FERRY_TRY(gpu);
  impl->gpu = std::move(*gpu);
  // SIGUSR1 dumps also say what a timed-out GPU kernel was waiting for.
  const gpu::DeviceContext* gpuCtx = impl->gpu.get();
  impl->dumpRegistration = std::make_unique<StateDumpRegistration>(
      impl->id, rank, size, &impl->trace, [gpuCtx]() -> std::string {
        if (gpuCtx == nullptr) return {};
        Status st = gpuCtx->deviceError();
        return st.isOk() ? std::string() : st.message();
      });
  FERRY_INFO(log::kInit, "comm %016llx rank %d of %d ready (%s%s, %s)", static_cast<unsigned long long>(impl->id),
             rank, size, impl->transport ? impl->transport->name() : "single rank",
             impl->arena ? (ti.cma ? " + shared-memory arena with single-copy reads" : " + shared-memory arena")
                         : "",
             allLocal ? "all ranks on this host" : "several hosts");
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
    FERRY_WARN(log::kInit, "rank %d: FERRY_TIMEOUT=none: waits have no deadline; a peer that never arrives or "
               "answers makes this rank wait forever", rank);
  }
  return Status::ok();
}

class SoloRendezvous final : public Rendezvous {
 public:
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline) override { return std::vector<Bytes>{mine}; }
};

}  // namespace

// Rank 0's intra-host tuner inputs, rebuilt on every rank of `parent` (a broadcast of its host
// model, rank count, mailbox size and whether single-copy reads work there).
Result<Tuner> agreedLevelTuner(Comm& parent, const Tuner& local) {
  Bytes blob;
  if (parent.rank() == 0) {
    const TunerInputs& in = local.inputs();
    blob = in.model.serialize();
    const uint64_t head[3] = {static_cast<uint64_t>(in.ranks), in.mailboxBytes, (in.arena ? 1u : 0u) | (in.cma ? 2u : 0u)};
    const auto* h = reinterpret_cast<const uint8_t*>(head);
    blob.insert(blob.begin(), h, h + sizeof(head));
  }
  uint64_t bytes = blob.size();
  FERRY_TRY(parent.broadcast(&bytes, &bytes, 1, DataType::kUint64, 0));
  if (bytes < 24 || bytes > (1u << 20)) {
    return makeError(ErrorCode::kInternalError, "rank 0 sent a %llu-byte intra-host model",
                     static_cast<unsigned long long>(bytes));
  }
  blob.resize(bytes);
  FERRY_TRY(parent.broadcast(blob.data(), blob.data(), bytes, DataType::kUint8, 0));
  uint64_t head[3];
  std::memcpy(head, blob.data(), sizeof(head));
  TunerInputs in = local.inputs();
  in.ranks = in.ranksOnHost = static_cast<int>(head[0]);
  in.mailboxBytes = head[1];
  in.arena = (head[2] & 1) != 0;
  in.cma = (head[2] & 2) != 0;
  if (in.arena) {
    auto m = HostModel::deserialize(Bytes(blob.begin() + sizeof(head), blob.end()));
    FERRY_TRY(m);
    in.model = *m;
  }
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
  if (m.layout.twoLevels() && m.tuner->allowsSomewhere(coll::Algorithm::kHierarchical)) {
    Watchdog* parentWatchdog = m.watchdog.get();
    auto make = [parentWatchdog](Rendezvous& rv, int r, int n) -> Result<std::unique_ptr<Comm>> {
      auto sub = build(rv, r, n, -1);
      FERRY_TRY(sub);
      (*sub)->watchdog->setParent(parentWatchdog);
      return std::unique_ptr<Comm>(new Comm(std::move(*sub)));
    };
    auto h = Hierarchy::create(*comm, m.layout, make, [parentWatchdog] { return parentWatchdog->stopped(); });
    log::setRank(m.rank);
    FERRY_TRY(h);
    m.hier = std::move(*h);
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
    ti.localCost = [localTuner](coll::OpKind k, size_t b) { return localTuner->predict(k, b); };
    ti.localCopyBw = localTuner->inputs().arena ? localTuner->inputs().model.copyBw : 0;
    auto chunk = hierChunkBytes(m.rank, *net, ti.localCopyBw);
    FERRY_TRY(chunk);
    if (m.layout.hosts == 2) m.hier->setStreamChunkBytes(*chunk);
  }
  m.tuner->update(ti);
  const size_t chunk = m.hier ? m.hier->streamChunkBytes() : 0;
  FERRY_INFO(log::kInit, "comm %016llx rank %d of %d: %s; network between hosts %.1f us + %.3f GB/s per stream%s%s",
             static_cast<unsigned long long>(m.id), m.rank, m.size, m.layout.describe().c_str(), net->alpha * 1e6,
             net->beta > 0 ? 1e-9 / net->beta : 0.0, m.hier ? "; two levels" : "",
             chunk > 0 ? ("; all-reduces of " + std::to_string(2 * chunk) + " bytes and more cross through each host's first rank in chunks of " + std::to_string(chunk)).c_str() : "");
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
  auto client = bootstrap::StoreClient::connect(root->addr, root->secret, rank, size, Deadline::after(config().timeout));
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
  auto client = bootstrap::StoreClient::connect(*addr, secret, launch->rank, launch->size,
                                                Deadline::after(config().timeout));
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
                     "split on rank %d: color %d is invalid (expected color >= 0, or kSplitNoColor = -1)", rank(), color);
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
  return finish(std::move(*impl));
}


}  // namespace ferry
