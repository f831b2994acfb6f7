// Shared-memory transport.
//
// Every rank owns one shared segment (a memfd that peers map through /proc: segment.hpp) holding
// one ring per sender: ring s of rank r's segment carries messages from rank s to rank r (single
// producer, single consumer). Messages up to kEagerMax (eager) carry their bytes in the ring, in
// as many consecutive slots as they fill, each slot naming its offset in the message; the send
// completes once its last slot is written. Larger ones (rendezvous) take one slot with the
// address of the sender's buffer, and the receiver copies straight from it into the posted buffer
// with process_vm_readv (one copy, no staging), then puts an acknowledgement in the sender's
// segment, which completes the send. A receiver that cannot read a sender's memory (ptrace
// refused: Yama, seccomp, another user) says so in that sender's ring when it connects, and the
// sender then streams every message through the ring.
//
// Withdrawing a rendezvous send (cancel(), close()) cannot just forget it: the receiver holds its
// slot and would copy whatever the buffer holds later. The sender puts a withdrawal behind it in
// the same ring and keeps the send pending; the receiver, reaching it, drops the message if it
// has not taken it and answers with a refusal (an acknowledgement with status ECANCELED), or
// ignores it if it has (its acknowledgement is already on the way). Either answer ends the send:
// kFailed, or kDone with the bytes the buffer held while the send was pending. A receiver that
// closes refuses every rendezvous message it holds, so no sender waits on it for ever.
//
// Memory ordering: the producer writes a slot, then publishes it with a release store of tail;
// the consumer reads tail with acquire, reads the slot, then frees it with a release store of
// head, which the producer reads with acquire before reusing the slot.
//
// Matching follows the Transport contract: a message goes to the earliest posted receive that
// names its sender (or any sender) and whose tag matches under the receive's mask; messages that
// find none wait, in arrival order, in an unexpected list (eager bytes copied out of the ring, so
// rings never stall on an unposted receive). An eager message spanning several slots is matched
// on its first: the rest follow into the same receive, or the same unexpected entry, which a
// receive posted part way takes over. Nothing here blocks: rings that are full leave
// outgoing slots queued until progress() finds room. All completion happens inside progress().
#include "transports/shm/shm_transport.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <unordered_map>
#include <vector>

#include "base/deadline.hpp"
#include "base/log.hpp"
#include "transports/shm/huge_pages.hpp"
#include "transports/shm/segment.hpp"
#include "transports/shm/shared_memory.hpp"

namespace ferry::transport::shm {
namespace {

constexpr uint32_t kMagic = 0x48535246;  // "FRSH"
constexpr int kSlots = 32;
constexpr size_t kSlotBytes = 8192;

enum class Kind : uint32_t { kEager = 1, kRendezvous = 2, kAck = 3, kWithdraw = 4 };

// Acknowledgement statuses besides 0 and the errno of a failed copy.
constexpr int32_t kWithdrawn = ECANCELED;  // the receiver dropped a withdrawn message
constexpr int32_t kRefused = ESHUTDOWN;    // the receiver closed before taking the message

struct SlotHeader {
  uint32_t kind;
  int32_t status;  // acks: 0, kWithdrawn, kRefused, or the errno the receiver's copy failed with
  uint64_t tag;
  uint64_t bytes;
  uint64_t addr;    // rendezvous: the sender's buffer; eager: the slot's offset in the message
  uint64_t cookie;  // rendezvous, ack and withdraw: the sender's id of the send
  uint8_t pad[24];
};
static_assert(sizeof(SlotHeader) == 64);
constexpr size_t kPayload = kSlotBytes - sizeof(SlotHeader);
// The largest eager message. Up to here two copies through the ring beat a cross-memory read, whose
// system call and acknowledgement cost a round trip between the ranks; above it the second copy
// costs more than the trip (evidence: docs/PERFORMANCE.md, "Eager messages over several ring
// slots"). Well under the ring (kSlots x kPayload), so a sender is rarely held up by a receiver
// that has not yet drained it.
constexpr size_t kEagerMax = 32 << 10;

struct Slot {
  SlotHeader h;
  uint8_t payload[kPayload];
};

struct alignas(64) Ring {
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint64_t> head;
  // Set by the receiver when it connects (before the init barrier, so before any send): it will
  // not read the sender's memory, so every message comes eagerly, whatever its size.
  alignas(64) std::atomic<uint32_t> eagerOnly;
  alignas(64) Slot slots[kSlots];
};

struct alignas(64) SegmentHeader {
  uint32_t magic;
  int32_t size;
  int32_t owner;
};

size_t segmentBytes(int n) { return sizeof(SegmentHeader) + sizeof(Ring) * static_cast<size_t>(n); }
Ring* rings(void* base) { return reinterpret_cast<Ring*>(static_cast<uint8_t*>(base) + sizeof(SegmentHeader)); }

struct Posted {
  uint64_t order;
  int peer;
  uint64_t tag;
  uint64_t mask;
  void* buf;
  size_t bytes;
  Request* req;
};

struct Unexpected {
  int from;
  Kind kind;
  uint64_t tag;
  uint64_t bytes;
  uint64_t addr;
  uint64_t cookie;
  std::vector<uint8_t> data;  // eager bytes
};

struct Outgoing {
  SlotHeader h;
  const void* payload;  // eager bytes, copied into the slots when they are written
  Request* req;         // eager sends complete when written; null for acks and rendezvous
  size_t written = 0;   // eager: bytes already in the ring
};

// An eager message of several slots being received from one sender: where its slots go.
struct Assembly {
  enum class Into { kNothing, kPosted, kUnexpected, kDiscard } into = Into::kNothing;
  Posted posted{};                   // kPosted: the receive it completes
  Unexpected* unexpected = nullptr;  // kUnexpected: the entry it fills (list nodes stay put)
  uint64_t bytes = 0;                // the whole message
  uint64_t taken = 0;                // bytes of it consumed
};

// A rendezvous send written to its peer's ring, until the peer answers.
struct AwaitingAck {
  Request* req;
  bool withdrawn;  // a withdrawal follows it
};

void succeed(Request* r) { r->state = Request::State::kDone; }
void fail(Request* r, std::string why) {
  r->error = std::move(why);
  r->state = Request::State::kFailed;
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, uint64_t commId, bool singleCopy, HugeBacking* huge)
      : rank_(rank), size_(size), commId_(commId), singleCopy_(singleCopy), out_(size, nullptr),
        peerMaps_(size, nullptr), pids_(size, 0), pending_(size), posted_(size + 1), assembling_(size),
        touchedOut_(size, false), touchedIn_(size, false), huge_(huge) {}

  ~ShmTransport() override {
    close(0, true);
    if (own_ != nullptr) munmap(own_, segmentBytes(size_));
    sealed();
  }

  Status init() {
    if (singleCopy_) {
      // Under Yama's restricted ptrace only declared tracers may read this process (a rendezvous
      // receive does); any process may, as in the arena (shm_arena.cpp).
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
      // A kernel or seccomp profile that refuses the call outright refuses it for every peer:
      // found here by reading this process's own memory, which ptrace rules always allow.
      uint64_t probe = kMagic, seen = 0;
      iovec local{&seen, sizeof(seen)};
      iovec remote{&probe, sizeof(probe)};
      if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof(seen)) || seen != probe) {
        FERRY_INFO(log::kTransport,
                   "cross-memory reads are refused here (%s): every message to rank %d comes through the "
                   "shared rings, two copies instead of one above %zu KiB",
                   std::strerror(errno), rank_, kEagerMax >> 10);
        singleCopy_ = false;
      }
    }
    char name[96];
    std::snprintf(name, sizeof(name), "ferry-%016llx-%d", static_cast<unsigned long long>(commId_), rank_);
    name_ = name;
    const size_t bytes = segmentBytes(size_);
    auto fd = createSegment(name_, bytes);
    FERRY_TRY(fd);
    fd_ = *fd;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      return makeError(ErrorCode::kSystemError, "cannot map shared segment %s: %s", name, std::strerror(errno));
    }
    own_ = p;
    auto* h = static_cast<SegmentHeader*>(p);
    h->size = size_;
    h->owner = rank_;
    Ring* r = rings(p);
    for (int s = 0; s < size_; ++s) {
      r[s].tail.store(0, std::memory_order_relaxed);
      r[s].head.store(0, std::memory_order_relaxed);
      r[s].eagerOnly.store(0, std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = kMagic;
    return Status::ok();
  }

  const char* name() const override { return "shm"; }
  // Without single-copy reads every send completes once it is in the ring (buffersSends).
  Capabilities capabilities() const override { return {singleCopy_, false, false, !singleCopy_}; }

  // [pid: 8 bytes][segment descriptor: 8][the segment's address here: 8][segment name]
  std::vector<uint8_t> localAddress() const override {
    std::vector<uint8_t> a(kAddressHead);
    int64_t pid = getpid();
    int64_t fd = fd_;
    uint64_t at = reinterpret_cast<uintptr_t>(own_);
    std::memcpy(a.data(), &pid, 8);
    std::memcpy(a.data() + 8, &fd, 8);
    std::memcpy(a.data() + 16, &at, 8);
    a.insert(a.end(), name_.begin(), name_.end());
    return a;
  }

  Status connect(const std::vector<std::vector<uint8_t>>& addrs) override {
    const size_t bytes = segmentBytes(size_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (addrs[p].size() <= kAddressHead || addrs[p].size() > kAddressHead + 90) {
        return makeError(ErrorCode::kInternalError, "rank %d published a malformed shared-memory address", p);
      }
      int64_t pid = 0, fd = -1;
      uint64_t at = 0;
      std::memcpy(&pid, addrs[p].data(), 8);
      std::memcpy(&fd, addrs[p].data() + 8, 8);
      std::memcpy(&at, addrs[p].data() + 16, 8);
      pids_[p] = static_cast<pid_t>(pid);
      std::string name(addrs[p].begin() + kAddressHead, addrs[p].end());
      auto m = mapPeerSegment(pids_[p], fd, name, bytes);
      if (!m.isOk()) {
        return makeError(m.status().code(), "rank %d cannot map rank %d's shared segment: %s", rank_, p,
                         m.status().message().c_str());
      }
      peerMaps_[p] = *m;
      auto* h = static_cast<SegmentHeader*>(*m);
      if (h->magic != kMagic || h->size != size_ || h->owner != p) {
        return makeError(ErrorCode::kInternalError, "rank %d's shared segment %s does not belong to this communicator",
                         p, name.c_str());
      }
      out_[p] = &rings(*m)[rank_];
      if (!canRead(p, at)) rings(own_)[p].eagerOnly.store(1, std::memory_order_release);
    }
    return Status::ok();
  }

  // Whether this rank may read rank p's memory (a rendezvous receive does): the magic at the start
  // of p's segment, read through process_vm_readv at `at`, p's address of it.
  bool canRead(int p, uint64_t at) {
    if (!singleCopy_) return false;
    uint32_t magic = 0;
    iovec local{&magic, sizeof(magic)};
    iovec remote{reinterpret_cast<void*>(at), sizeof(magic)};
    const ssize_t got = process_vm_readv(pids_[p], &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(sizeof(magic)) && magic == kMagic) return true;
    FERRY_INFO(log::kTransport,
               "rank %d cannot read rank %d's memory (%s): rank %d sends it every message through the "
               "shared rings, two copies instead of one above %zu KiB",
               rank_, p, got < 0 ? std::strerror(errno) : "wrong bytes", p, kEagerMax >> 10);
    return false;
  }

  // Peers have mapped the segment: its descriptor served only them.
  void sealed() override {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override {
    if (closed_ || peer < 0 || peer >= size_ || peer == rank_ || out_[peer] == nullptr) {
      return makeError(ErrorCode::kInternalError, "shared-memory send to invalid peer %d (rank %d of %d)", peer, rank_,
                       size_);
    }
    req->start(true, peer, tag, bytes);
    Outgoing o{};
    o.h.tag = tag & kTagMask;
    o.h.bytes = bytes;
    if (bytes <= kEagerMax || out_[peer]->eagerOnly.load(std::memory_order_acquire) != 0) {
      o.h.kind = static_cast<uint32_t>(Kind::kEager);
      o.payload = buf;
      o.req = req;
    } else {
      o.h.kind = static_cast<uint32_t>(Kind::kRendezvous);
      o.h.addr = reinterpret_cast<uint64_t>(buf);
      if (huge_ != nullptr) huge_->offer(buf, bytes);  // the receiver reads it with process_vm_readv
      o.h.cookie = ++lastSendId_;
      awaitingAck_[o.h.cookie] = AwaitingAck{req, false};
      req->handle = reinterpret_cast<void*>(o.h.cookie);
    }
    pending_[peer].push_back(o);
    flush(peer);
    return Status::ok();
  }

  Status postRecv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t bytes, Request* req) override {
    if (closed_ || (peer != kAnyPeer && (peer < 0 || peer >= size_ || peer == rank_))) {
      return makeError(ErrorCode::kInternalError, "shared-memory receive from invalid peer %d (rank %d of %d)", peer,
                       rank_, size_);
    }
    req->start(false, peer, tag, bytes);
    Posted p{++lastOrder_, peer, tag & kTagMask, mask & kTagMask, buf, bytes, req};
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      if ((peer == kAnyPeer || it->from == peer) && ((it->tag ^ p.tag) & p.mask) == 0) {
        Assembly& a = assembling_[static_cast<size_t>(it->from)];
        if (a.into == Assembly::Into::kUnexpected && a.unexpected == &*it) {
          takeOver(a, p, *it);
        } else {
          deliver(p, *it);
        }
        unexpected_.erase(it);
        return Status::ok();
      }
    }
    posted_[peer == kAnyPeer ? size_ : peer].push_back(p);
    return Status::ok();
  }

  void cancel(Request* req) override {
    if (!req->pending() || closed_) return;
    if (!req->isSend) {
      for (Assembly& a : assembling_) {
        if (a.into == Assembly::Into::kPosted && a.posted.req == req) {
          a.into = Assembly::Into::kDiscard;
          fail(req, "canceled");
          return;
        }
      }
      for (auto& q : posted_) {
        for (auto it = q.begin(); it != q.end(); ++it) {
          if (it->req == req) {
            q.erase(it);
            fail(req, "canceled");
            return;
          }
        }
      }
      return;
    }
    // Not written yet: it never reaches the peer. An eager message partly written stays pending
    // until the rest follows, then ends kDone: the peer gets the bytes the buffer holds now.
    if (unqueue(req, false)) {
      fail(req, "canceled");
      return;
    }
    // A rendezvous send the peer holds: withdraw it, and let the peer's answer end it.
    if (req->handle != nullptr) withdraw(reinterpret_cast<uint64_t>(req->handle));
  }

  bool progress() override {
    if (closed_) return false;
    bool any = false;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (!pending_[p].empty()) any |= flush(p);
      Ring& in = rings(own_)[p];
      uint64_t head = in.head.load(std::memory_order_relaxed);
      if (!touchedIn_[p] && head != in.tail.load(std::memory_order_acquire)) {
        touchRing(in);
        touchedIn_[p] = true;
      }
      while (head != in.tail.load(std::memory_order_acquire)) {
        consume(p, in.slots[head % kSlots]);
        in.head.store(++head, std::memory_order_release);
        any = true;
      }
    }
    return any;
  }

  Status peerError(int) const override { return Status::ok(); }

  // Flushes (unless forced) until the limit, then fails the receives, withdraws the sends and
  // refuses what peers offered, waits for the peers' answers until the limit, and fails whatever
  // is left. Only then are the peers' segments unmapped.
  void close(double seconds, bool force) override {
    if (closed_) return;
    // A quarter of the time stays for the withdrawals a flush that ran out of time leaves.
    Deadline flushBy = Deadline::after(std::max(seconds * 0.75, 1e-6));
    Deadline deadline = Deadline::after(std::max(seconds, 1e-6));
    Backoff backoff;
    auto sendsInFlight = [&] {
      if (!awaitingAck_.empty()) return true;
      for (const auto& q : pending_) {
        if (!q.empty()) return true;
      }
      return false;
    };
    while (!force && sendsInFlight() && !flushBy.expired()) {
      if (!progress()) backoff.pause();
    }
    for (auto& q : posted_) {
      for (Posted& p : q) fail(p.req, "canceled: the transport was closed");
      q.clear();
    }
    for (Assembly& a : assembling_) {
      if (a.into == Assembly::Into::kPosted) fail(a.posted.req, "canceled: the transport was closed");
      if (a.into != Assembly::Into::kNothing) a.into = Assembly::Into::kDiscard;
    }
    for (int p = 0; p < size_; ++p) {
      while (Request* r = firstQueuedSend(p)) {
        unqueue(r, true);
        fail(r, "canceled: the transport was closed");
      }
    }
    std::vector<uint64_t> written;
    for (const auto& [cookie, a] : awaitingAck_) written.push_back(cookie);
    for (uint64_t cookie : written) withdraw(cookie);
    refuseUnexpected();
    while (sendsInFlight() && !deadline.expired()) {
      if (!progress()) backoff.pause();
      refuseUnexpected();  // offers that arrived meanwhile
    }
    for (auto& [cookie, a] : awaitingAck_) {
      // The peer did not answer in time: it may still read the buffer if it takes the message
      // before it reaches the withdrawal.
      FERRY_WARN(log::kTransport, "rank %d: rank %d did not answer the withdrawal of a %zu-byte send in time", rank_,
                 a.req->peer, a.req->bytes);
      a.req->handle = nullptr;
      fail(a.req, "canceled: the transport was closed before the receiver answered");
    }
    awaitingAck_.clear();
    closed_ = true;
    for (int p = 0; p < size_; ++p) {
      pending_[p].clear();
      if (peerMaps_[p] != nullptr) munmap(peerMaps_[p], segmentBytes(size_));
      peerMaps_[p] = nullptr;
      out_[p] = nullptr;
    }
  }

 private:
  // The first send still queued for `peer` (not yet in its ring), or null.
  Request* firstQueuedSend(int peer) {
    for (const Outgoing& o : pending_[peer]) {
      if (o.req != nullptr) return o.req;
      if (o.h.kind == static_cast<uint32_t>(Kind::kRendezvous)) return awaitingAck_.at(o.h.cookie).req;
    }
    return nullptr;
  }

  // Removes a send that is still queued (not in the peer's ring); false when it is not there, or
  // when it is an eager message partly written and `partly` is false (the peer would wait for the
  // rest of it).
  bool unqueue(Request* req, bool partly) {
    if (req->peer < 0 || req->peer >= size_) return false;
    const uint64_t cookie = reinterpret_cast<uint64_t>(req->handle);
    auto& q = pending_[req->peer];
    for (auto it = q.begin(); it != q.end(); ++it) {
      const bool rendezvous = it->h.kind == static_cast<uint32_t>(Kind::kRendezvous);
      if (it->req == req || (rendezvous && req->handle != nullptr && it->h.cookie == cookie)) {
        if (it->written > 0 && !partly) return false;
        q.erase(it);
        if (rendezvous) awaitingAck_.erase(cookie);
        req->handle = nullptr;
        return true;
      }
    }
    return false;
  }

  // Queues a withdrawal of the written rendezvous send `cookie` (once).
  void withdraw(uint64_t cookie) {
    auto it = awaitingAck_.find(cookie);
    if (it == awaitingAck_.end() || it->second.withdrawn) return;
    it->second.withdrawn = true;
    const int peer = it->second.req->peer;
    Outgoing w{};
    w.h.kind = static_cast<uint32_t>(Kind::kWithdraw);
    w.h.cookie = cookie;
    pending_[peer].push_back(w);
    flush(peer);
  }

  // Queues an acknowledgement with `status` for rendezvous send `cookie` of rank `to`.
  void answer(int to, uint64_t cookie, int32_t status) {
    if (out_[to] == nullptr) return;
    Outgoing ack{};
    ack.h.kind = static_cast<uint32_t>(Kind::kAck);
    ack.h.status = status;
    ack.h.cookie = cookie;
    pending_[to].push_back(ack);
    flush(to);
  }

  // Closing: refuse every rendezvous message peers offered that no receive took.
  void refuseUnexpected() {
    for (const Unexpected& m : unexpected_) {
      if (m.kind == Kind::kRendezvous) answer(m.from, m.cookie, kRefused);
    }
    unexpected_.clear();
    for (Assembly& a : assembling_) {
      if (a.into == Assembly::Into::kUnexpected) a.into = Assembly::Into::kDiscard;
    }
  }

  // Writes queued slots to `peer`'s ring while it has room; true when something was written.
  bool flush(int peer) {
    Ring& r = *out_[peer];
    if (!touchedOut_[peer]) {
      touchRing(r);
      touchedOut_[peer] = true;
    }
    auto& q = pending_[peer];
    bool wrote = false;
    uint64_t tail = r.tail.load(std::memory_order_relaxed);
    while (!q.empty() && tail - r.head.load(std::memory_order_acquire) < kSlots) {
      Outgoing& o = q.front();
      Slot& s = r.slots[tail % kSlots];
      s.h = o.h;
      if (o.h.kind == static_cast<uint32_t>(Kind::kEager) && o.h.bytes > 0) {
        const size_t n = std::min<size_t>(kPayload, o.h.bytes - o.written);
        s.h.addr = o.written;
        std::memcpy(s.payload, static_cast<const uint8_t*>(o.payload) + o.written, n);
        o.written += n;
      }
      r.tail.store(++tail, std::memory_order_release);
      wrote = true;
      if (o.written < o.h.bytes && o.h.kind == static_cast<uint32_t>(Kind::kEager)) continue;
      if (o.req != nullptr) succeed(o.req);
      q.pop_front();
    }
    return wrote;
  }

  // Maps a ring's pages into this process at once, on its first message in either direction: a
  // stream of messages walks a new slot each time, and a fault in each would cost more than the
  // message. Only rings a pair uses are touched (a segment holds one per sender). Loads only: the
  // peer may be writing the ring's other lines.
  static void touchRing(Ring& r) { touchPages(&r, sizeof(Ring), false); }

  void consume(int from, const Slot& s) {
    Kind kind = static_cast<Kind>(s.h.kind);
    if (kind == Kind::kAck) {
      auto it = awaitingAck_.find(s.h.cookie);
      if (it == awaitingAck_.end()) return;  // failed by close() meanwhile
      Request* r = it->second.req;
      awaitingAck_.erase(it);
      r->handle = nullptr;
      if (s.h.status == 0) {
        succeed(r);
      } else if (s.h.status == kWithdrawn) {
        fail(r, "canceled");
      } else if (s.h.status == kRefused) {
        fail(r, "rank " + std::to_string(from) + " closed its transport before receiving the message");
      } else {
        fail(r,
             std::string("rank ") + std::to_string(from) + " could not read the message: " + std::strerror(s.h.status));
      }
      return;
    }
    if (kind == Kind::kWithdraw) {
      // Behind its message in the ring: the message was either taken (and acknowledged) or waits
      // among the unexpected ones.
      for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
        if (it->from == from && it->kind == Kind::kRendezvous && it->cookie == s.h.cookie) {
          unexpected_.erase(it);
          answer(from, s.h.cookie, kWithdrawn);
          return;
        }
      }
      return;
    }
    if (kind == Kind::kEager && (s.h.addr != 0 || s.h.bytes > kPayload)) {
      consumePart(from, s);
      return;
    }
    Unexpected m{from, kind, s.h.tag, s.h.bytes, s.h.addr, s.h.cookie, {}};
    Posted* match = findPosted(from, m.tag);
    if (match != nullptr) {
      Posted p = *match;
      erasePosted(match);
      if (kind == Kind::kEager) {
        deliverEager(p, m, s.payload);
      } else {
        deliver(p, m);
      }
      return;
    }
    if (kind == Kind::kEager) m.data.assign(s.payload, s.payload + s.h.bytes);
    unexpected_.push_back(std::move(m));
  }

  // One slot of an eager message that spans several: the first is matched like a message of one
  // slot, and where it went (a receive, an unexpected entry, nowhere if it was truncated) the rest
  // follow, in order, since each sender's ring is.
  void consumePart(int from, const Slot& s) {
    Assembly& a = assembling_[static_cast<size_t>(from)];
    const uint64_t offset = s.h.addr;
    if (offset == 0) {
      endCutShort(a, from);
      a.bytes = s.h.bytes;
      a.taken = 0;
      Unexpected m{from, Kind::kEager, s.h.tag, s.h.bytes, 0, 0, {}};
      if (Posted* match = findPosted(from, m.tag)) {
        Posted p = *match;
        erasePosted(match);
        takeOver(a, p, m);
      } else {
        m.data.reserve(m.bytes);
        unexpected_.push_back(std::move(m));
        a.into = Assembly::Into::kUnexpected;
        a.unexpected = &unexpected_.back();
      }
    } else if (a.into == Assembly::Into::kNothing || offset != a.taken || s.h.bytes != a.bytes) {
      FERRY_WARN(log::kTransport, "rank %d: dropped a slot of a %llu-byte message from rank %d at offset %llu, %s",
                 rank_, static_cast<unsigned long long>(s.h.bytes), from, static_cast<unsigned long long>(offset),
                 a.into == Assembly::Into::kNothing ? "none begun" : "out of order");
      return;
    }
    const size_t n = std::min<uint64_t>(kPayload, a.bytes - offset);
    if (a.into == Assembly::Into::kPosted) {
      std::memcpy(static_cast<uint8_t*>(a.posted.buf) + offset, s.payload, n);
    } else if (a.into == Assembly::Into::kUnexpected) {
      a.unexpected->data.insert(a.unexpected->data.end(), s.payload, s.payload + n);
    }
    a.taken += n;
    if (a.taken < a.bytes) return;
    if (a.into == Assembly::Into::kPosted) succeed(a.posted.req);
    a.into = Assembly::Into::kNothing;
  }

  // Receive `p` takes the message `m` being assembled (from the unexpected entry it began in, or
  // its first slot): the bytes so far are copied, the rest go straight to p's buffer.
  void takeOver(Assembly& a, const Posted& p, const Unexpected& m) {
    record(p, m);
    if (m.bytes > p.bytes) {
      fail(p.req, "message truncated: the sender sent more than the " + std::to_string(p.bytes) + " bytes posted");
      a.into = Assembly::Into::kDiscard;
      return;
    }
    if (!m.data.empty()) std::memcpy(p.buf, m.data.data(), m.data.size());
    a.into = Assembly::Into::kPosted;
    a.posted = p;
  }

  // A message begins while the last from the same sender is incomplete: its sender stopped part
  // way (a forced close), and the rest will never come.
  void endCutShort(Assembly& a, int from) {
    if (a.into == Assembly::Into::kPosted) {
      fail(a.posted.req, "rank " + std::to_string(from) + " stopped part way through the message");
    } else if (a.into == Assembly::Into::kUnexpected) {
      unexpected_.remove_if([&](const Unexpected& u) { return &u == a.unexpected; });
    }
    a.into = Assembly::Into::kNothing;
  }

  // The earliest posted receive (by post order) for a message from `from` with `tag`.
  Posted* findPosted(int from, uint64_t tag) {
    Posted* best = nullptr;
    for (auto* q : {&posted_[from], &posted_[size_]}) {
      for (auto& p : *q) {
        if (((p.tag ^ tag) & p.mask) == 0) {
          if (best == nullptr || p.order < best->order) best = &p;
          break;
        }
      }
    }
    return best;
  }

  void erasePosted(Posted* p) {
    auto& q = posted_[p->peer == kAnyPeer ? size_ : p->peer];
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (&*it == p) {
        q.erase(it);
        return;
      }
    }
  }

  void record(const Posted& p, const Unexpected& m) {
    p.req->received = m.bytes;
    p.req->peerTag = m.tag;
    p.req->source = m.from;
  }

  void deliverEager(const Posted& p, const Unexpected& m, const uint8_t* bytes) {
    record(p, m);
    if (m.bytes > p.bytes) {
      fail(p.req, "message truncated: the sender sent more than the " + std::to_string(p.bytes) + " bytes posted");
      return;
    }
    if (m.bytes > 0) std::memcpy(p.buf, bytes, m.bytes);
    succeed(p.req);
  }

  void deliver(const Posted& p, const Unexpected& m) {
    if (m.kind == Kind::kEager) {
      deliverEager(p, m, m.data.data());
      return;
    }
    record(p, m);
    int err = 0;
    if (m.bytes > p.bytes) {
      err = EMSGSIZE;
      fail(p.req, "message truncated: the sender sent more than the " + std::to_string(p.bytes) + " bytes posted");
    } else {
      size_t done = 0;
      while (done < m.bytes) {
        iovec local{static_cast<uint8_t*>(p.buf) + done, m.bytes - done};
        iovec remote{reinterpret_cast<void*>(m.addr + done), m.bytes - done};
        ssize_t got = process_vm_readv(pids_[m.from], &local, 1, &remote, 1, 0);
        if (got <= 0) {
          err = got < 0 ? errno : EIO;
          break;
        }
        done += static_cast<size_t>(got);
      }
      if (err == 0) {
        succeed(p.req);
      } else {
        fail(p.req,
             std::string("cannot copy from rank ") + std::to_string(m.from) + "'s buffer: " + std::strerror(err));
      }
    }
    answer(m.from, m.cookie, err);
  }

  static constexpr size_t kAddressHead = 24;  // localAddress() before the name

  int rank_;
  int size_;
  uint64_t commId_;
  bool singleCopy_;   // false: never read a peer's memory; every peer sends eagerly
  std::string name_;  // the segment's memfd name, which peers check before they map it
  int fd_ = -1;       // the segment until sealed(): peers open it as /proc/<pid>/fd/<fd_>
  void* own_ = nullptr;
  std::vector<Ring*> out_;  // out_[p]: our ring in p's segment
  std::vector<void*> peerMaps_;
  std::vector<pid_t> pids_;
  std::vector<std::deque<Outgoing>> pending_;
  std::vector<std::deque<Posted>> posted_;  // per peer, and [size_] for any peer
  std::list<Unexpected> unexpected_;
  std::unordered_map<uint64_t, AwaitingAck> awaitingAck_;  // by cookie
  std::vector<Assembly> assembling_;                       // per sender: its eager message of several slots
  std::vector<bool> touchedOut_, touchedIn_;               // per peer: its rings touched (touchRing)
  uint64_t lastSendId_ = 0;
  uint64_t lastOrder_ = 0;
  bool closed_ = false;
  HugeBacking* const huge_;  // null: send buffers stay on the pages they have
};

}  // namespace

Result<std::unique_ptr<Transport>> createShmTransport(const ShmOptions& options) {
  auto t = std::make_unique<ShmTransport>(options.rank, options.size, options.commId, options.singleCopy,
                                          options.hugePages ? processHugeBacking() : nullptr);
  FERRY_TRY(t->init());
  FERRY_INFO(log::kTransport, "shared-memory transport: %d rings of %d x %zu-byte slots", options.size, kSlots,
             kSlotBytes);
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace ferry::transport::shm
