// Exec: posting and waiting for one call's messages.
//
// The wait loop drives the transport itself (no progress thread is needed for a blocking call),
// backs off from spinning to sleeping so oversubscribed ranks leave the cores to their peers, and
// every few milliseconds checks the deadline and the runtime's hooks (abort, dead peers, errors
// reported by other ranks). A failed call cancels what it posted; requests UCX may still touch are
// parked in the context's graveyard rather than freed.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/context.hpp"
#include "base/log.hpp"

namespace ferry::coll {

using transport::Request;

// A message wait blocked this long asks the other ranks for their calls (WaitHooks::probeCalls).
constexpr double kStallSeconds = 1.0;

void* Scratch::get(size_t bytes) {
  if (bytes > size_) {
    size_t rounded = (bytes + 63) & ~size_t{63};
    if (alloc_.alloc != nullptr) {
      if (data_ != nullptr) alloc_.free(data_);
      data_ = alloc_.alloc(rounded);
    } else {
      std::free(data_);
      data_ = std::aligned_alloc(64, rounded);
    }
    size_ = data_ != nullptr ? rounded : 0;
  }
  return data_;
}

Scratch::~Scratch() {
  if (data_ == nullptr) return;
  if (alloc_.alloc != nullptr) {
    alloc_.free(data_);
  } else {
    std::free(data_);
  }
}

namespace {
// fingerprint(d), remembered in the context for the calls that repeat d.
uint32_t rememberFingerprint(Context& ctx, const OpDesc& d) {
  ctx.lastFingerprint = {true, d, 0, 0, fingerprint(d)};
  return ctx.lastFingerprint.value;
}
uint32_t packLineCall(const OpDesc& d, uint32_t algorithm, uint32_t protocol);
}  // namespace

Exec::Exec(Context& ctx, const OpDesc& desc, uint64_t seq, TagClass tagClass, double timeoutSeconds)
    : ctx_(ctx), desc_(desc), seq_(seq), tagClass_(tagClass), repeatsPrevious_(ctx.lastFingerprint.holds(desc)),
      tag_(makeTag(tagClass, seq, repeatsPrevious_ ? ctx.lastFingerprint.value : rememberFingerprint(ctx, desc))),
      timeout_(timeoutSeconds), requests_(nullptr) {  // created by the first send or receive: arena calls post none
  if (CallTrace* t = ctx_.trace) {
    t->seq.store(seq, std::memory_order_relaxed);
    if (!repeatsPrevious_) {  // else the previous call left these as they are
      t->call.store(callKindName(desc.kind), std::memory_order_relaxed);
      t->count.store(desc.count, std::memory_order_relaxed);
      t->desc.store(packDesc(desc), std::memory_order_relaxed);
    }
    t->phase.store("", std::memory_order_relaxed);
    t->peer.store(-1, std::memory_order_relaxed);
    t->startNs.store(0, std::memory_order_relaxed);  // set by startClock()
    t->active.store(true, std::memory_order_release);
  }
}

void Exec::startClock() {
  if (clockStarted_) return;
  clockStarted_ = true;
  start_ = Clock::now();
  deadline_ = Deadline::after(timeout_, start_);
  if (ctx_.trace != nullptr) ctx_.trace->startNs.store(start_.time_since_epoch().count(), std::memory_order_relaxed);
}

void Exec::retireRequests() {
  if (!drain(0.05)) ctx_.graveyard.push_back(std::move(requests_));
}

bool Exec::drain(double seconds) {
  if (requests_ == nullptr) return true;
  auto anyPending = [&] {
    for (auto& r : *requests_) {
      if (r.pending()) return true;
    }
    return false;
  };
  if (!anyPending()) return true;
  for (auto& r : *requests_) {
    if (r.pending()) ctx_.transport->cancel(&r);
  }
  Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  while (anyPending() && !deadline.expired()) {
    if (!ctx_.transport->progress()) backoff.pause();
  }
  return !anyPending();
}

Result<Request*> Exec::send(int peer, const void* buf, size_t bytes, const OpDesc* as) {
  if (requests_ == nullptr) requests_ = std::make_unique<std::deque<Request>>();
  Request* r = &requests_->emplace_back();
  r->cookie = reinterpret_cast<uintptr_t>(as);
  uint64_t tag = as == nullptr ? tag_ : makeTag(tagClass_, seq_, fingerprint(*as));
  FERRY_TRY(ctx_.transport->postSend(peer, tag, buf, bytes, r));
  return r;
}

Result<Request*> Exec::recv(int peer, void* buf, size_t bytes, const OpDesc* as) {
  if (requests_ == nullptr) requests_ = std::make_unique<std::deque<Request>>();
  Request* r = &requests_->emplace_back();
  r->cookie = reinterpret_cast<uintptr_t>(as);
  uint64_t tag = as == nullptr ? tag_ : makeTag(tagClass_, seq_, fingerprint(*as));
  FERRY_TRY(ctx_.transport->postRecv(peer, tag, kClassMask, buf, bytes, r));
  return r;
}

Status Exec::failure(Request* req, Status why) {
  char where[160] = "";
  if (phase_[0] != '\0') {
    std::snprintf(where, sizeof(where), " in %s step %d/%d", phase_, step_ + 1, steps_);
  }
  std::string peer;
  if (req != nullptr) {
    peer = std::string(req->isSend ? ", sending to rank " : ", waiting for rank ") + std::to_string(req->peer);
  }
  return makeError(why.code(), "%s #%llu on rank %d%s%s: %s", describe(desc_).c_str(),
                   static_cast<unsigned long long>(seq_), ctx_.rank, where, peer.c_str(), why.message().c_str());
}

Status Exec::failure(int peer, bool sending, Status why) {
  char where[160] = "";
  if (phase_[0] != '\0') std::snprintf(where, sizeof(where), " in %s step %d/%d", phase_, step_ + 1, steps_);
  return makeError(why.code(), "%s #%llu on rank %d%s, %s rank %d: %s", describe(desc_).c_str(),
                   static_cast<unsigned long long>(seq_), ctx_.rank, where, sending ? "sending to" : "waiting for",
                   peer, why.message().c_str());
}

namespace {

bool reduces(CallKind k) {
  return k == CallKind::kAllReduce || k == CallKind::kReduce || k == CallKind::kReduceScatter;
}

// A 32-bit digest of everything ranks must agree on in a call: equal calls give equal digests,
// and two that differ in any field collide with probability 2^-32.
uint32_t callDigest(const OpDesc& d, uint32_t algorithm, uint32_t protocol) {
  const uint64_t fields = static_cast<uint64_t>(d.kind) | static_cast<uint64_t>(d.type) << 8 |
                          static_cast<uint64_t>(reduces(d.kind) ? static_cast<uint32_t>(d.op) : 0u) << 16 |
                          static_cast<uint64_t>(algorithm & 0xFF) << 24 | static_cast<uint64_t>(protocol & 0xFF) << 32 |
                          static_cast<uint64_t>(static_cast<uint16_t>(d.root)) << 40;
  // Two odd multipliers mixed by the top half: any single field change flips about half the bits.
  const uint64_t x = (fields * 0x9E3779B97F4A7C15ull) ^ (d.count * 0xC2B2AE3D27D4EB4Full) ^
                     static_cast<uint64_t>(static_cast<uint32_t>(d.root)) * 0xD6E8FEB86659FD93ull;
  return static_cast<uint32_t>(x >> 32) ^ static_cast<uint32_t>(x);
}

}  // namespace

void Exec::announce(uint32_t algorithm, uint32_t protocol, const void* addr0, const void* addr1) {
  if (ctx_.arena == nullptr || tagClass_ != TagClass::kCollective) return;
  algorithm_ = algorithm;
  protocol_ = protocol;
  announced_ = true;
  // A seqlock: readers take the fields only when seq reads the same before and after them.
  transport::CallHeader& h = ctx_.arena->header(ctx_.rank, static_cast<int>(seq_ & 1));
  h.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h.kind = static_cast<uint32_t>(desc_.kind);
  h.type = static_cast<uint32_t>(desc_.type);
  h.op = static_cast<uint32_t>(desc_.op);
  h.root = desc_.root;
  h.count = desc_.count;
  h.algorithm = algorithm;
  h.protocol = protocol;
  h.addr[0] = reinterpret_cast<uintptr_t>(addr0);
  h.addr[1] = reinterpret_cast<uintptr_t>(addr1);
  h.seq.store(seq_, std::memory_order_release);
  // Which buffers there are and which lie in memory peers map (noteShared). Calls too small for
  // the tuner to read peers' buffers in place (Context::sharedMinBytes, even counted for every
  // rank) name none, so they leave the hint as it was and skip the registry lookups.
  uint32_t bits = 0;
  if (desc_.count * dataTypeSize(desc_.type) * static_cast<size_t>(ctx_.size) >= ctx_.sharedMinBytes) {
    if (addr0 != nullptr) bits |= 1u | (ctx_.arena->mappable(addr0, 1) ? 2u : 0u);
    if (addr1 != nullptr) bits |= 4u | (ctx_.arena->mappable(addr1, 1) ? 8u : 0u);
  }
  Context::Remembered& m = ctx_.lastDigest;
  if (!m.holds(desc_, algorithm, protocol)) {
    m = {true,
         desc_,
         algorithm,
         protocol,
         callDigest(desc_, algorithm, protocol),
         packLineCall(desc_, algorithm, protocol)};
  }
  digest_ = ctx_.checkMismatch ? m.value : 0;  // read by the mismatch checks only
  lineCall_ = m.line;
  ctx_.arena->noteCall(seq_, bits, digest_);
}

void Exec::post(int phase) { ctx_.arena->post((seq_ << kPhaseBits) + static_cast<uint64_t>(phase)); }

Status Exec::checkPeerCall(int peer) {
  if (ctx_.arena == nullptr || !ctx_.checkMismatch) return Status::ok();
  const transport::CallHeader& h = ctx_.arena->header(peer, static_cast<int>(seq_ & 1));
  if (h.seq.load(std::memory_order_acquire) != seq_) return Status::ok();  // not announced yet
  OpDesc theirs{static_cast<CallKind>(h.kind), h.count, static_cast<DataType>(h.type), static_cast<RedOp>(h.op),
                h.root};
  uint32_t algorithm = h.algorithm, protocol = h.protocol;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.seq.load(std::memory_order_relaxed) != seq_) return Status::ok();  // rewritten while read
  return compareCall(peer, theirs, algorithm, protocol);
}

Status Exec::compareCall(int peer, const OpDesc& theirs, uint32_t algorithm, uint32_t protocol) {
  if (!sameCall(theirs, desc_)) {
    return failure(peer, false,
                   makeError(ErrorCode::kMismatch,
                             "collective mismatch: rank %d runs %s as its call #%llu while rank %d runs %s", peer,
                             describe(theirs).c_str(), static_cast<unsigned long long>(seq_), ctx_.rank,
                             describe(desc_).c_str()));
  }
  if (algorithm != algorithm_ || protocol != protocol_) {
    auto name = [](uint32_t a, uint32_t p) {
      const char* an = algorithmName(static_cast<Algorithm>(a));
      const char* pn = protocolName(static_cast<Protocol>(p));
      return std::string(an != nullptr ? an : "?") + "/" + (pn != nullptr ? pn : "?");
    };
    return failure(peer, false,
                   makeError(ErrorCode::kMismatch,
                             "algorithm mismatch: rank %d runs %s with %s while rank %d chose %s (set FERRY_ALGO and "
                             "FERRY_PROTO the same on every rank)",
                             peer, describe(desc_).c_str(), name(algorithm, protocol).c_str(), ctx_.rank,
                             name(algorithm_, protocol_).c_str()));
  }
  compared_ = true;
  return Status::ok();
}

Status Exec::await(int peer, int phase) {
  FERRY_TRY(awaitCounter(peer, (seq_ << kPhaseBits) + static_cast<uint64_t>(phase)));
  // A peer known to have entered call seq + 2 has announced it in the header of this call's
  // parity, so checkPeerCall() could only find it rewritten: skip reading that cache line (a
  // broadcast root running ahead of its readers would otherwise cost each of them a miss a call).
  if (phase == 1 && ctx_.seen[static_cast<size_t>(peer)] < ((seq_ + 2) << kPhaseBits)) return checkPeerCall(peer);
  return Status::ok();
}

namespace {

// A line slot's call description: kind, type, op (reductions only), algorithm and protocol in 4
// bits each, the count in 12 (lineBytes() is well below 4096 elements of any type).
uint32_t packLineCall(const OpDesc& d, uint32_t algorithm, uint32_t protocol) {
  const bool reduces =
      d.kind == CallKind::kAllReduce || d.kind == CallKind::kReduce || d.kind == CallKind::kReduceScatter;
  return (static_cast<uint32_t>(d.kind) & 15u) | (static_cast<uint32_t>(d.type) & 15u) << 4 |
         (reduces ? static_cast<uint32_t>(d.op) & 15u : 0u) << 8 | (algorithm & 15u) << 12 | (protocol & 15u) << 16 |
         static_cast<uint32_t>(d.count & 4095u) << 20;
}

}  // namespace

Status Exec::publishLine(const void* data, size_t bytes) {
  FERRY_TRY(claimRing());
  auto* h = static_cast<transport::LineHeader*>(ctx_.arena->lineSlot(ctx_.rank, seq_));
  std::memcpy(reinterpret_cast<uint8_t*>(h) + sizeof(*h), data, bytes);
  h->call = lineCall_;
  h->root = desc_.root;
  h->seq.store(seq_, std::memory_order_release);
  post(1);
  return Status::ok();
}

namespace {
// The line slot of a call published through the eager heap: where its data is, and its size
// (the line's packed count keeps only 12 bits).
struct EagerLine {
  uint64_t offset;
  uint64_t bytes;
};
}  // namespace

Status Exec::publishEager(const void* data, size_t bytes) {
  const size_t heap = ctx_.arena->eagerBytes();
  const size_t len = (bytes + 63) & ~size_t{63};  // whole cache lines: no two calls share one
  size_t at = ctx_.eagerNext;
  auto& uses = ctx_.eagerUses;
  uint64_t lastUser = 0;  // the latest call whose data this one overwrites (0: none)
  auto take = [&] {
    lastUser = std::max(lastUser, uses.front().seq);
    uses.pop_front();
  };
  if (at + len > heap) {
    // Wrap: the heap's tail is left unused this lap; the calls there are the oldest.
    while (!uses.empty() && uses.front().begin >= at) take();
    at = 0;
  }
  while (!uses.empty() && uses.front().begin >= at && uses.front().begin < at + len) take();
  if (lastUser != 0) FERRY_TRY(claimSlots(seq_ - lastUser));
  FERRY_TRY(claimRing());
  std::memcpy(ctx_.arena->eagerHeap(ctx_.rank) + at, data, bytes);
  uses.push_back({seq_, at});
  ctx_.eagerNext = at + len;
  const EagerLine line{at, bytes};
  auto* h = static_cast<transport::LineHeader*>(ctx_.arena->lineSlot(ctx_.rank, seq_));
  std::memcpy(reinterpret_cast<uint8_t*>(h) + sizeof(*h), &line, sizeof(line));
  h->call = lineCall_;
  h->root = desc_.root;
  h->seq.store(seq_, std::memory_order_release);
  post(1);
  return Status::ok();
}

Result<const uint8_t*> Exec::awaitEager(int peer, size_t bytes) {
  auto l = awaitLine(peer);
  FERRY_TRY(l);
  EagerLine line;
  std::memcpy(&line, *l, sizeof(line));
  if (line.bytes != bytes) {
    return failure(peer, false,
                   makeError(ErrorCode::kMismatch,
                             "collective mismatch: rank %d's call #%llu passes %llu bytes, this rank's (%s) %zu", peer,
                             static_cast<unsigned long long>(seq_), static_cast<unsigned long long>(line.bytes),
                             describe(desc_).c_str(), bytes));
  }
  if (line.offset > ctx_.arena->eagerBytes() - bytes) {
    return failure(peer, false,
                   makeError(ErrorCode::kInternalError, "rank %d's eager data of call #%llu lies outside its heap",
                             peer, static_cast<unsigned long long>(seq_)));
  }
  return ctx_.arena->eagerHeap(peer) + line.offset;
}

Status Exec::awaitEagers(size_t bytes) {
  for (int i = 1; i < ctx_.size; ++i) FERRY_TRY(awaitEager((ctx_.rank + i) % ctx_.size, bytes));
  return Status::ok();
}

const uint8_t* Exec::eagerData(int r) {
  EagerLine line;
  std::memcpy(&line, lineData(r), sizeof(line));
  return ctx_.arena->eagerHeap(r) + line.offset;
}

Status Exec::awaitLines() {
  for (int i = 1; i < ctx_.size; ++i) FERRY_TRY(awaitLine((ctx_.rank + i) % ctx_.size));
  return Status::ok();
}

Result<const uint8_t*> Exec::awaitLine(int peer) {
  const auto* h = static_cast<const transport::LineHeader*>(ctx_.arena->lineSlot(peer, seq_));
  // The slot cannot hold a later call: its writer claims it only once this rank entered seq + 1.
  // Its writer posts phase 1 right after the flag: a reader that stops spinning sleeps on that.
  if (h->seq.load(std::memory_order_acquire) != seq_) {
    FERRY_TRY(awaitCounter(peer, (seq_ << kPhaseBits) + 1, &h->seq, seq_));
    if (h->seq.load(std::memory_order_acquire) != seq_) {
      // The peer finished phase 1 of this call without writing its line: it runs another call.
      FERRY_TRY(checkPeerCall(peer));
      return failure(peer, false,
                     makeError(ErrorCode::kMismatch,
                               "collective mismatch: rank %d's call #%llu is not %s (it passed no data of a few bytes "
                               "through shared memory: another collective, count or FERRY_ALGO/FERRY_PROTO)",
                               peer, static_cast<unsigned long long>(seq_), describe(desc_).c_str()));
    }
  }
  if (ctx_.checkMismatch && (h->call != lineCall_ || h->root != desc_.root)) {
    const uint32_t c = h->call;
    OpDesc theirs{static_cast<CallKind>(c & 15u), c >> 20, static_cast<DataType>((c >> 4) & 15u),
                  static_cast<RedOp>((c >> 8) & 15u), h->root};
    FERRY_TRY(compareCall(peer, theirs, (c >> 12) & 15u, (c >> 16) & 15u));
    // Packed fields agree but the words differ: counts that agree mod 4096 cannot reach here
    // (lineBytes() bounds both), so this is a bug; say so rather than read the slot.
    return failure(peer, false,
                   makeError(ErrorCode::kInternalError, "rank %d's line slot of call #%llu does not decode", peer,
                             static_cast<unsigned long long>(seq_)));
  }
  compared_ = compared_ || ctx_.checkMismatch;
  return reinterpret_cast<const uint8_t*>(h + 1);
}

Status Exec::expectAck(int peer, size_t bytes) {
  ctx_.ackToExpect = {true, peer, seq_, desc_};
  return bytes >= Context::kEagerAckBytes || seq_ % Context::kAckEvery == 0 ? postGuard() : Status::ok();
}

Status Exec::oweAck(int peer, size_t bytes) {
  ctx_.ackToSend = {true, peer, seq_, desc_};
  return bytes >= Context::kEagerAckBytes || seq_ % Context::kAckEvery == 0 ? sendAck() : Status::ok();
}

Status Exec::postGuard() {
  Context::AckDue& due = ctx_.ackToExpect;
  due.due = false;
  Context::PendingAck& a = ctx_.acks.emplace_back();
  a.seq = due.seq;
  a.desc = due.desc;
  return ctx_.transport->postRecv(due.peer, makeTag(TagClass::kCollective, due.seq, fingerprint(due.desc)), kClassMask,
                                  nullptr, 0, &a.request);
}

Status Exec::sendAck() { return sendOwedAck(ctx_); }

Status sendOwedAck(Context& ctx) {
  while (!ctx.ackSends.empty() && !ctx.ackSends.front().pending()) ctx.ackSends.pop_front();
  Context::AckDue& due = ctx.ackToSend;
  if (!due.due) return Status::ok();
  due.due = false;
  return ctx.transport->postSend(due.peer, makeTag(TagClass::kCollective, due.seq, fingerprint(due.desc)), nullptr, 0,
                                 &ctx.ackSends.emplace_back());
}

Status Exec::begin() {
  const bool collective = tagClass_ == TagClass::kCollective;
  if (collective && ctx_.uncheckedCount > 0 && ctx_.arena != nullptr && ctx_.checkMismatch) {
    // A stream of calls that waited on nobody ends: before this call goes on, every peer enters
    // it (having noted the calls before) and those calls are compared, so that no rank gets
    // through another call before a disagreement is named.
    // The streak's last call was the previous one, with this description: the same call.
    const bool repeats = repeatsPrevious_ && ctx_.hasStreak && ctx_.streak.last + 1 == seq_;
    if (!repeats && !sameCall(ctx_.lastUnchecked, desc_)) {
      flushStreak();
      for (size_t p = 0; p < ctx_.unchecked.size(); ++p) {
        if (ctx_.unchecked[p].size > 0) FERRY_TRY(awaitCounter(static_cast<int>(p), seq_ << kPhaseBits));
      }
      FERRY_TRY(compareUnchecked());
    }
  }
  // Point-to-point calls leave the acknowledgements of collectives alone, but for taking those
  // that arrived: only some ranks make them, so a stream's acknowledgement must fall due at the
  // same collectives on the rank that sends it and the one that expects it, and the rank that owes
  // one may meanwhile be in the stream's next call, waiting on a rank that waits on this one.
  if (!collective) return ctx_.acks.empty() ? Status::ok() : checkAcks(false);
  if (ctx_.ackToSend.due && !sameCall(ctx_.ackToSend.desc, desc_)) FERRY_TRY(sendAck());
  if (ctx_.ackToExpect.due && !sameCall(ctx_.ackToExpect.desc, desc_)) FERRY_TRY(postGuard());
  if (ctx_.acks.empty()) return Status::ok();
  // A stream of the same call leaves its guards outstanding; any other call first takes them all,
  // so that no rank gets through another call before a disagreement is named.
  return checkAcks(!sameCall(ctx_.acks.back().desc, desc_));
}

Status Exec::checkAcks(bool all) {
  while (!ctx_.acks.empty()) {
    Context::PendingAck& a = ctx_.acks.front();
    if (a.request.pending()) {
      if (!all) return Status::ok();
      // Another call comes: wait for the oldest, under this call's deadline.
      startClock();
      Backoff backoff;
      while (a.request.pending()) {
        if (deadline_.expired()) {
          return failure(a.request.peer, false,
                         makeError(ErrorCode::kTimeout,
                                   "timed out after %.1f s (FERRY_TIMEOUT) on rank %d's "
                                   "acknowledgement of %s #%llu",
                                   secondsSince(start_), a.request.peer, describe(a.desc).c_str(),
                                   static_cast<unsigned long long>(a.seq)));
        }
        if (ctx_.hooks != nullptr) FERRY_TRY(ctx_.hooks->poll(a.request.peer));
        if (!ctx_.transport->progress()) backoff.pause();
      }
    }
    const int peer = a.request.peer;
    const uint32_t theirs = tagFingerprint(a.request.peerTag);
    const bool truncated =
        a.request.state == Request::State::kFailed && a.request.error.rfind("message truncated", 0) == 0;
    if (a.request.state == Request::State::kFailed && !truncated) {
      // Often the echo of the peer's own failure, which it reported first: prefer that report.
      if (ctx_.hooks != nullptr) {
        for (int i = 0; i < 16; ++i) ctx_.transport->progress();
        Status h = ctx_.hooks->poll(-1);
        if (!h.isOk()) return failure(peer, false, h);
      }
      return failure(peer, false,
                     makeError(ErrorCode::kRemoteError, "acknowledgement of %s #%llu failed: %s",
                               describe(a.desc).c_str(), static_cast<unsigned long long>(a.seq),
                               a.request.error.c_str()));
    }
    if (truncated || a.request.received != 0 || theirs != fingerprint(a.desc) ||
        tagSeq(a.request.peerTag) != (a.seq & kSeqMask)) {
      return failure(peer, false,
                     makeError(ErrorCode::kMismatch,
                               "collective mismatch: rank %d, root of %s as its call #%llu, expected only an "
                               "acknowledgement from rank %d but received data of rank %d's call #%llu, which %s "
                               "(rank %d does not take rank %d for the root)",
                               ctx_.rank, describe(a.desc).c_str(), static_cast<unsigned long long>(a.seq), peer, peer,
                               static_cast<unsigned long long>(tagSeq(a.request.peerTag)),
                               theirs == fingerprint(a.desc) ? "has the same description"
                                                             : explainMismatch(a.desc, theirs, ctx_.size).c_str(),
                               peer, ctx_.rank));
    }
    ctx_.acks.pop_front();
  }
  return Status::ok();
}

Status Exec::checkUnchecked() {
  if (ctx_.arena == nullptr || !ctx_.checkMismatch || !announced_ || tagClass_ != TagClass::kCollective) {
    return Status::ok();
  }
  if (!compared_) {
    Context::Unchecked& s = ctx_.streak;
    if (ctx_.hasStreak && s.last + 1 == seq_ && s.digest == digest_) {
      s.last = seq_;
    } else {
      flushStreak();
      s = {seq_, seq_, digest_, desc_};
      ctx_.hasStreak = true;
      ++ctx_.uncheckedCount;
      ctx_.lastUnchecked = desc_;
    }
  }
  // A stream of calls that wait on nobody compares every kAckEvery calls (a few stores a call
  // otherwise); any call that waited on a peer compares everything kept.
  if (!compared_ && seq_ % Context::kAckEvery != 0) return Status::ok();
  return compareUnchecked();
}

void Exec::flushStreak() {
  if (!ctx_.hasStreak) return;
  ctx_.hasStreak = false;
  --ctx_.uncheckedCount;
  const size_t n = static_cast<size_t>(ctx_.size);
  if (ctx_.unchecked.size() != n) {
    ctx_.uncheckedDepth = std::bit_floor(ctx_.arena->ringDepth());
    ctx_.unchecked.assign(n, {});
    for (auto& q : ctx_.unchecked) q.entries.resize(ctx_.uncheckedDepth);
  }
  const size_t depth = ctx_.uncheckedDepth, mask = depth - 1;
  const Context::Unchecked& s = ctx_.streak;
  for (size_t p = 0; p < n; ++p) {
    if (static_cast<int>(p) == ctx_.rank) continue;
    Context::UncheckedRing& q = ctx_.unchecked[p];
    if (q.size > 0) {
      // The run the last flush ended goes on (a compare came between): one entry.
      Context::Unchecked& back = q.entries[(q.head + q.size - 1) & mask];
      if (back.last + 1 == s.first && back.digest == s.digest) {
        back.last = s.last;
        continue;
      }
    }
    if (q.size == depth) {  // the oldest can no longer be in the peer's log
      q.head = (q.head + 1) & mask;
      --q.size;
      --ctx_.uncheckedCount;
    }
    q.entries[(q.head + q.size) & mask] = s;
    ++q.size;
    ++ctx_.uncheckedCount;
  }
}

Status Exec::uncheckedMismatch(int peer, uint64_t seq, const OpDesc& mine) {
  // The peer's header still holds that call while it has not run two more: name its fields.
  const transport::CallHeader& h = ctx_.arena->header(peer, static_cast<int>(seq & 1));
  if (h.seq.load(std::memory_order_acquire) == seq) {
    OpDesc theirs{static_cast<CallKind>(h.kind), h.count, static_cast<DataType>(h.type), static_cast<RedOp>(h.op),
                  h.root};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (h.seq.load(std::memory_order_relaxed) == seq && !sameCall(theirs, mine)) {
      return failure(peer, false,
                     makeError(ErrorCode::kMismatch,
                               "collective mismatch: rank %d runs %s as its call #%llu while rank %d runs %s", peer,
                               describe(theirs).c_str(), static_cast<unsigned long long>(seq), ctx_.rank,
                               describe(mine).c_str()));
    }
  }
  return failure(peer, false,
                 makeError(ErrorCode::kMismatch,
                           "collective mismatch: rank %d's call #%llu differs from rank %d's %s (in the collective, "
                           "count, type, op, root or FERRY_ALGO/FERRY_PROTO; found at call #%llu)",
                           peer, static_cast<unsigned long long>(seq), ctx_.rank, describe(mine).c_str(),
                           static_cast<unsigned long long>(seq_)));
}

Status Exec::compareUnchecked() {
  flushStreak();
  const size_t n = ctx_.unchecked.size();
  const size_t mask = ctx_.uncheckedDepth - 1;
  for (size_t p = 0; p < n; ++p) {
    if (static_cast<int>(p) == ctx_.rank) continue;
    Context::UncheckedRing& q = ctx_.unchecked[p];
    while (q.size > 0) {
      Context::Unchecked& u = q.entries[q.head];
      const int peer = static_cast<int>(p);
      // Calls older than the peer's log holds cannot be compared any more: skip them.
      if (seq_ > u.first + ctx_.uncheckedDepth) u.first = std::min(u.last + 1, seq_ - ctx_.uncheckedDepth);
      if (u.first <= u.last) {
        bool differs = false;
        u.first = ctx_.arena->matchCalls(peer, u.first, u.last, u.digest, &differs);  // up to one not there yet
        if (differs) return uncheckedMismatch(peer, u.first, u.desc);
      }
      if (u.first <= u.last) break;
      q.head = (q.head + 1) & mask;
      --q.size;
      --ctx_.uncheckedCount;
    }
  }
  return Status::ok();
}

Status Exec::claimSlots(uint64_t depth) {
  if (seq_ < depth) return Status::ok();
  const uint64_t target = (seq_ - depth + 1) << kPhaseBits;
  // Where every peer was last seen past the target (readers of a stream run ahead of the slot
  // the writer claims by up to the ring's depth): no wait and no call.
  if (ctx_.seen.size() == static_cast<size_t>(ctx_.size)) {
    bool all = true;
    for (int p = 0; p < ctx_.size; ++p) all &= p == ctx_.rank || ctx_.seen[static_cast<size_t>(p)] >= target;
    if (all) return Status::ok();
  }
  for (int i = 1; i < ctx_.size; ++i) FERRY_TRY(awaitCounter((ctx_.rank + i) % ctx_.size, target));
  return Status::ok();
}

Status Exec::awaitCounter(int peer, uint64_t target, const std::atomic<uint64_t>* word, uint64_t wordTarget) {
  if (ctx_.seen.size() != static_cast<size_t>(ctx_.size)) ctx_.seen.assign(static_cast<size_t>(ctx_.size), 0);
  uint64_t& seen = ctx_.seen[static_cast<size_t>(peer)];
  if (seen >= target) return Status::ok();
  if (word == nullptr) {
    seen = ctx_.arena->posted(peer);
    if (seen >= target) return Status::ok();
  }
  startClock();
  if (ctx_.trace != nullptr) ctx_.trace->peer.store(peer, std::memory_order_relaxed);
  struct Waiting {
    Exec* exec;
    int peer;
    bool sawMismatch = false;  // this rank read the peer's header: the error already names the call
  } w{this, peer};
  // One captured pointer: std::function keeps it without a heap allocation, every wait.
  auto poll = [w = &w]() -> Status {
    Context& ctx = w->exec->ctx_;
    // A peer that runs another call first: it is the root cause, and that peer may already have
    // failed and exited (a broadcast reader that met the root's mismatching header does at once),
    // its header still in shared memory while the liveness check would only say it died.
    Status call = w->exec->checkPeerCall(w->peer);
    if (!call.isOk()) {
      w->sawMismatch = true;
      return call;
    }
    // Nothing else drives the transport during a wait on shared memory, and other ranks' error
    // reports arrive through it: a peer that failed, reported why (another rank died, say) and
    // exited must be read as that report, not as one more dead rank.
    if (ctx.transport != nullptr) ctx.transport->progress();
    if (ctx.hooks != nullptr) FERRY_TRY(ctx.hooks->poll(w->peer));
    if (ctx.transport != nullptr) FERRY_TRY(ctx.transport->peerError(w->peer));
    return Status::ok();
  };
  Status st = ctx_.arena->wait(peer, target, deadline_, poll, word, wordTarget);
  if (!st.isOk()) {
    if (w.sawMismatch) return st;  // names both calls; a mismatch another rank reported is wrapped below
    // Our own deadline only: a kTimeout from the poll is another rank's timeout, reported to this
    // one (the watchdog keeps the reporter's code), and its message says what really happened.
    if (st.code() == ErrorCode::kTimeout && deadline_.expired()) {
      // Where every rank stands, from the counters in shared memory: the ranks behind this call
      // are the ones to look at. Each is written "rank N", so that a sub-communicator's message
      // is renumbered whole in its parent's numbering (runtime/host_layout.hpp).
      std::string behind, all;
      for (int r = 0; r < ctx_.size; ++r) {
        uint64_t v = ctx_.arena->posted(r);
        unsigned long long call = v >> kPhaseBits, ph = v & ((uint64_t{1} << kPhaseBits) - 1);
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%srank %d at #%llu.%llu", all.empty() ? "" : ", ", r, call, ph);
        all += buf;
        if (call < seq_) behind += (behind.empty() ? "rank " : ", rank ") + std::to_string(r);
      }
      return failure(peer, false,
                     makeError(ErrorCode::kTimeout,
                               "timed out after %.1f s (FERRY_TIMEOUT); ranks that have not "
                               "reached call #%llu: %s (each rank's last call.phase: %s)",
                               secondsSince(start_), static_cast<unsigned long long>(seq_),
                               behind.empty() ? "none" : behind.c_str(), all.c_str()));
    }
    return failure(peer, false, st);
  }
  // Ended by the word, the counter may still be short of the target.
  if (word == nullptr) seen = target;
  if (ctx_.trace != nullptr) ctx_.trace->peer.store(-1, std::memory_order_relaxed);
  return Status::ok();
}

Status Exec::awaitAll(int phase) {
  const int n = ctx_.size;
  for (int i = 1; i < n; ++i) FERRY_TRY(await((ctx_.rank + i) % n, phase));
  return Status::ok();
}

Status Exec::readPeer(int peer, uint64_t remote, void* local, size_t bytes) {
  Status st = ctx_.arena->read(peer, remote, local, bytes);
  if (st.isOk()) return st;
  // A peer that vanished under the read most often left because its own call failed, and it
  // reported why before it exited (another rank died, say): that report names the cause, the
  // failed read only the messenger. The watchdog has it once the transport delivered it (nothing
  // else drives the transport during reads), or it at least says that the peer died.
  if (ctx_.transport != nullptr) {
    for (int i = 0; i < 16; ++i) ctx_.transport->progress();
  }
  if (ctx_.hooks != nullptr) {
    Status why = ctx_.hooks->poll(peer);
    if (!why.isOk()) return failure(peer, false, why);
  }
  return failure(peer, false, st);
}

bool Exec::noteShared() {
  // From the call log, not the headers: a peer that finished this call may already have
  // announced the next but one, rewriting the header of this parity.
  bool any = false, all = true;
  for (int r = 0; r < ctx_.size; ++r) {
    uint32_t bits = 0;
    if (!ctx_.arena->callBits(r, seq_, &bits)) {
      all = false;  // cannot happen after phase 1 (the log outlives it); never guess "shared"
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if ((bits & (1u << (2 * i))) == 0) continue;
      any = true;
      all = all && (bits & (2u << (2 * i))) != 0;
    }
  }
  // Calls without buffers (barriers) say nothing about the next ones' buffers.
  if (any) ctx_.peersShared = all;
  return any && all;
}

void Exec::exposeForRead(const void* addr, size_t bytes) {
  if (ctx_.arena != nullptr && addr != nullptr && bytes > 0) ctx_.arena->exposeForRead(addr, bytes);
}

uint64_t Exec::peerAddr(int peer, int which) {
  return ctx_.arena->header(peer, static_cast<int>(seq_ & 1)).addr[which & 1];
}

Status Exec::checkReceive(Request* req) {
  const OpDesc& mine = req->cookie != 0 ? *reinterpret_cast<const OpDesc*>(req->cookie) : desc_;
  if (ctx_.checkMismatch) {
    // Collectives run in the same order on every rank: a message of another call number is left
    // over from a call the ranks did not agree on (a sender that took itself for the root).
    if (tagClass_ == TagClass::kCollective && tagSeq(req->peerTag) != (seq_ & kSeqMask)) {
      return failure(req, makeError(ErrorCode::kMismatch,
                                    "collective mismatch: rank %d sent data of its call #%llu (mod %llu) to this "
                                    "rank's call #%llu, %s: the ranks disagreed on an earlier call (its root, "
                                    "count or kind; rank %d's message %s)",
                                    req->peer, static_cast<unsigned long long>(tagSeq(req->peerTag)),
                                    static_cast<unsigned long long>(kSeqMask + 1),
                                    static_cast<unsigned long long>(seq_), describe(mine).c_str(), req->peer,
                                    tagFingerprint(req->peerTag) == fingerprint(mine)
                                        ? "has this call's description"
                                        : explainMismatch(mine, tagFingerprint(req->peerTag), ctx_.size).c_str()));
    }
    uint32_t theirs = tagFingerprint(req->peerTag);
    if (theirs != fingerprint(mine)) {
      return failure(req, makeError(ErrorCode::kMismatch,
                                    "collective mismatch: rank %d %s (its call #%llu) while rank %d runs %s", req->peer,
                                    explainMismatch(mine, theirs, ctx_.size).c_str(),
                                    static_cast<unsigned long long>(tagSeq(req->peerTag)), ctx_.rank,
                                    describe(mine).c_str()));
    }
  }
  if (req->received != req->bytes) {
    return failure(req, makeError(ErrorCode::kMismatch,
                                  "collective mismatch: rank %d sent %zu bytes where rank %d expected %zu (the ranks "
                                  "passed different counts)",
                                  req->peer, req->received, ctx_.rank, req->bytes));
  }
  compared_ = compared_ || ctx_.checkMismatch;
  return Status::ok();
}

Status Exec::wait(Request* req) {
  startClock();
  if (ctx_.trace != nullptr) ctx_.trace->peer.store(req->peer, std::memory_order_relaxed);
  Backoff backoff;
  // The first check comes at the 32nd idle spin, as if due from entry: a wait that completes at
  // once reads no clock.
  Clock::time_point nextCheck{};
  unsigned spins = 0;
  while (req->pending()) {
    if (ctx_.transport->progress()) {
      backoff.reset();
      continue;
    }
    if ((++spins & 31) == 0) {
      Clock::time_point now = Clock::now();
      if (now >= nextCheck) {
        nextCheck = now + std::chrono::milliseconds(5);
        if (deadline_.expired()) {
          return failure(req, makeError(ErrorCode::kTimeout, "timed out after %.1f s (FERRY_TIMEOUT)",
                                        secondsSince(start_)));
        }
        if (ctx_.hooks != nullptr) {
          Status s = ctx_.hooks->poll(req->peer);
          if (!s.isOk()) {
            // A peer that sent its last message and exited right after is not a failure: take
            // what already arrived before believing the bad news.
            for (int i = 0; i < 16 && req->pending(); ++i) ctx_.transport->progress();
            if (!req->pending()) break;
            return failure(req, s);
          }
        }
        Status p = ctx_.transport->peerError(req->peer);
        if (!p.isOk()) return failure(req, p);
        if (announced_) {
          Status m = checkPeerCall(req->peer);
          if (!m.isOk()) return m;
        }
        // A send that completes only once received waits forever on a rank that took itself for
        // the root too: its data in this rank's acknowledgement receive says so.
        if (!ctx_.acks.empty()) FERRY_TRY(checkAcks(false));
        // Blocked for long: ranks waiting on each other over calls that differ (two roots of one
        // reduce) are named from the other ranks' answers, well before the deadline.
        if (tagClass_ == TagClass::kCollective && ctx_.hooks != nullptr && secondsSince(start_) >= kStallSeconds) {
          Status m = ctx_.hooks->probeCalls(seq_, desc_);
          if (!m.isOk()) return failure(req, m);
        }
      }
    }
    backoff.pause([&](long ns) { return ctx_.transport->waitForWork(ns); });
  }
  return finishWait(req);
}

Status Exec::finishWait(Request* req) {
  if (ctx_.trace != nullptr) ctx_.trace->peer.store(-1, std::memory_order_relaxed);
  if (req->state == Request::State::kFailed) {
    // A failed transfer is often the echo of an earlier failure another rank has reported (its
    // report may sit right behind the message that failed): prefer that root cause.
    if (ctx_.hooks != nullptr) {
      for (int i = 0; i < 16; ++i) ctx_.transport->progress();
      Status h = ctx_.hooks->poll(-1);
      if (!h.isOk()) return failure(req, h);
    }
    // A peer that took itself for a broadcast's root too may have failed on it and left: its
    // data in this rank's acknowledgement receive names the disagreement.
    if (!ctx_.acks.empty()) FERRY_TRY(checkAcks(false));
    Status p = ctx_.transport->peerError(req->peer);
    if (!p.isOk()) return failure(req, p);
    if (!req->isSend && req->error.rfind("message truncated", 0) == 0) {
      Status m = checkReceive(req);
      if (!m.isOk()) return m;
    }
    return failure(req, makeError(ErrorCode::kRemoteError, "transfer failed: %s", req->error.c_str()));
  }
  if (!req->isSend) return checkReceive(req);
  return Status::ok();
}

Status Exec::waitAll() {
  if (requests_ == nullptr) return Status::ok();
  for (auto& r : *requests_) {
    if (r.state != Request::State::kIdle) FERRY_TRY(wait(&r));
  }
  return Status::ok();
}

}  // namespace ferry::coll
