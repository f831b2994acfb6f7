// The TCP transport (tcp_transport.hpp): matching, the send queues and the receive state of every
// stream.
//
// Sending: postSend splits the message (splitOf) and queues one frame per piece on its stream
// (the header travels with piece 0 on stream 0), then writes what the sockets take at once; the
// rest goes out in progress() when poll() says a socket has room. A send completes when its last
// byte is in the kernel.
//
// Receiving: stream 0 is always read, so headers (and small messages) never wait behind anything.
// A header is matched against the posted receives in posting order; unmatched, its message is
// "unexpected" and lands in memory of its own until a receive takes it. Streams 1.. are read only
// while a known message owes them a piece, so a piece is never read before its header. A message
// that was unexpected when a piece started keeps that piece in its own memory and copies it to the
// receive when the piece is done; pieces started after the match go straight to the receive.
#include "transports/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <random>
#include <string>

#include "base/deadline.hpp"
#include "base/log.hpp"
#include "transports/tcp/buffer_pool.hpp"
#include "transports/tcp/tcp_connect.hpp"
#include "transports/tcp/tcp_wire.hpp"

namespace ferry::transport::tcp {
namespace {

struct SendOp {
  Request* req = nullptr;
  int framesLeft = 0;
  bool started = false;  // a byte of it is in the kernel: it can no longer be withdrawn
};

// One piece (or the transport's own goodbye) queued on a stream.
struct OutFrame {
  SendOp* op = nullptr;  // null: the goodbye
  std::array<uint8_t, 16> head{};
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;  // of 16 + bytes
};

// Where a piece of an incoming message is, as seen by its receive.
enum class PieceState : uint8_t { kWaiting, kToOwn, kInOwn, kDirect };

struct InMsg {
  int peer = -1;
  uint64_t tag = 0;
  size_t bytes = 0;
  Split split;
  int piecesLeft = 0;
  Request* req = nullptr;  // the receive it matched
  bool discard = false;    // matched a receive too small: the rest is read and dropped
  PooledBuffer own;        // unexpected: where pieces land until a receive takes it
  std::array<PieceState, kMaxStreams> pieces{};
  std::list<InMsg*>::iterator unexpectedAt;
  bool unexpected = false;
};

struct Stream {
  int fd = -1;
  std::deque<OutFrame> out;
  std::deque<InMsg*> owed;  // streams 1..: messages that owe this stream a piece, oldest first
  std::array<uint8_t, 16> head{};
  size_t headDone = 0;
  InMsg* cur = nullptr;  // the message whose piece is being read
  int curPiece = 0;
  size_t curDone = 0;
};

struct Peer {
  std::vector<Stream> streams;
  Status failure;
  bool goodbye = false;
  bool ended = false;  // stream 0 ended while the other streams still owed pieces: read those first
  std::list<std::unique_ptr<InMsg>> incoming;  // every message not yet handed to its receive
};

struct Posted {
  Request* req;
  uint64_t mask;
};

bool wouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TcpOptions& o, int listenFd, const TcpAddress& self)
      : rank_(o.rank), size_(o.size), options_(o), listenFd_(listenFd), self_(self) {}
  ~TcpTransport() override { close(0, true); }

  const char* name() const override { return "tcp"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.detectsPeerDeath = true;
    c.buffersSends = true;
    return c;
  }
  std::vector<uint8_t> localAddress() const override { return self_.serialize(); }

  Status connect(const std::vector<std::vector<uint8_t>>& addrs) override {
    if (addrs.size() != static_cast<size_t>(size_)) {
      return makeError(ErrorCode::kInternalError, "TCP connect got %zu addresses, expected %d", addrs.size(), size_);
    }
    std::vector<TcpAddress> peers(addrs.size());
    std::vector<int> streams(addrs.size(), 0);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        peers[static_cast<size_t>(r)] = self_;
        continue;
      }
      auto a = TcpAddress::deserialize(addrs[static_cast<size_t>(r)], r);
      FERRY_TRY(a);
      peers[static_cast<size_t>(r)] = *a;
      const bool same = static_cast<size_t>(r) < options_.sameHost.size() && options_.sameHost[static_cast<size_t>(r)];
      streams[static_cast<size_t>(r)] = same ? 1 : static_cast<int>(std::min(a->streams, self_.streams));
    }
    auto fds =
        connectStreams(rank_, listenFd_, peers, streams, options_.congestion, Deadline::after(options_.connectSeconds));
    FERRY_TRY(fds);
    peers_.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      for (int fd : (*fds)[static_cast<size_t>(r)]) {
        peers_[static_cast<size_t>(r)].streams.emplace_back();
        peers_[static_cast<size_t>(r)].streams.back().fd = fd;
      }
    }
    ::close(listenFd_);
    listenFd_ = -1;
    FERRY_INFO(log::kTransport, "TCP transport: rank %d joined %d ranks, %d stream(s) per pair between hosts", rank_,
               size_, static_cast<int>(self_.streams));
    return Status::ok();
  }

  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override {
    FERRY_TRY(checkPost(true, peer, tag));
    req->start(true, peer, tag, bytes);
    noteActivity();
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.failure.isOk()) return failNow(req, p.failure.message());
    const Split split = splitOf(bytes, static_cast<int>(p.streams.size()));
    auto* op = new SendOp{req, split.count, false};
    req->handle = op;
    const auto* data = static_cast<const uint8_t*>(buf);
    for (int i = 0; i < split.count; ++i) {
      const Piece piece = pieceOf(bytes, split, i);
      OutFrame f;
      f.op = op;
      f.data = data + piece.offset;
      f.bytes = piece.bytes;
      if (i == 0) {
        MsgHeader h{tag, bytes};
        std::memcpy(f.head.data(), &h, sizeof(h));
      } else {
        PieceHeader h{piece.offset, piece.bytes};
        std::memcpy(f.head.data(), &h, sizeof(h));
      }
      p.streams[static_cast<size_t>(i)].out.push_back(f);
    }
    for (int i = 0; i < split.count && p.failure.isOk(); ++i) flush(peer, i);
    return Status::ok();
  }

  Status postRecv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t bytes, Request* req) override {
    FERRY_TRY(checkPost(false, peer, tag));
    req->start(false, peer, tag, bytes);
    noteActivity();
    req->handle = buf;
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      InMsg* m = *it;
      if (matches(peer, tag, mask, m)) {
        unexpected_.erase(it);
        m->unexpected = false;
        match(m, req);
        return Status::ok();
      }
    }
    // Nothing from a failed peer is left to take.
    if (peer != kAnyPeer && !peers_[static_cast<size_t>(peer)].failure.isOk()) {
      return failNow(req, peers_[static_cast<size_t>(peer)].failure.message());
    }
    posted_.push_back({req, mask});
    return Status::ok();
  }

  void cancel(Request* req) override {
    if (closed_ || !req->pending()) return;
    if (!req->isSend) {
      for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        if (it->req == req) {
          posted_.erase(it);
          (void)failNow(req, "canceled");
          return;
        }
      }
      return;  // matched: its message is arriving, and it completes
    }
    auto* op = static_cast<SendOp*>(req->handle);
    if (op == nullptr || op->started) return;  // some of it is on the wire: it completes
    for (Stream& s : peers_[static_cast<size_t>(req->peer)].streams) {
      for (auto it = s.out.begin(); it != s.out.end();) it = it->op == op ? s.out.erase(it) : it + 1;
    }
    delete op;
    (void)failNow(req, "canceled before any byte was sent");
  }

  bool progress() override {
    if (closed_ || peers_.empty()) return false;
    moved_ = false;
    if (!pollSet(0)) return false;
    for (size_t i = 0; i < pollfds_.size(); ++i) {
      const short re = pollfds_[i].revents;
      if (re == 0) continue;
      const int r = where_[i].first, s = where_[i].second;
      if (!peers_[static_cast<size_t>(r)].failure.isOk()) continue;
      if (re & POLLOUT) flush(r, s);
      if ((re & (POLLIN | POLLHUP | POLLERR)) && peers_[static_cast<size_t>(r)].failure.isOk()) readStream(r, s);
    }
    if (moved_) noteActivity();
    return moved_;
  }

  // Within the spin window of the last activity the wait keeps the core and only yields it: a
  // thread that blocks hands its core to the idle loop, and waking it when the next piece arrives
  // (an interrupt, and in a virtual machine an exit to the hypervisor) costs tens of microseconds
  // at every step of a collective (evidence: docs/ARCHITECTURE.md, "Layers", transports/tcp).
  bool waitForWork(long ns) override {
    if (closed_ || peers_.empty()) return false;
    if (spin_.count() > 0 && Clock::now() - lastActive_ < spin_) {
      sched_yield();
      return true;
    }
    (void)pollSet(ns);
    return true;
  }

 private:
  // poll() the streams that have something to do (stream 0 always, others while a piece is owed
  // or a frame queued) for at most `ns`; true when one is ready (pollfds_ says which).
  bool pollSet(long ns) {
    pollfds_.clear();
    where_.clear();
    for (int r = 0; r < size_; ++r) {
      Peer& p = peers_[static_cast<size_t>(r)];
      if (!p.failure.isOk()) continue;
      for (size_t s = 0; s < p.streams.size(); ++s) {
        Stream& st = p.streams[s];
        short events = 0;
        if ((s == 0 && !p.ended) || st.cur != nullptr || !st.owed.empty()) events |= POLLIN;
        if (!st.out.empty()) events |= POLLOUT;
        if (events == 0) continue;
        pollfds_.push_back({st.fd, events, 0});
        where_.push_back({r, static_cast<int>(s)});
      }
    }
    if (pollfds_.empty()) return false;
    timespec ts{0, ns};
    return ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr) > 0;
  }

 public:
  Status peerError(int peer) const override {
    if (peer < 0 || peer >= size_ || peers_.empty()) return Status::ok();
    return peers_[static_cast<size_t>(peer)].failure;
  }

  void close(double seconds, bool force) override {
    if (closed_) return;
    if (!peers_.empty()) {
      Deadline deadline = Deadline::after(seconds);
      Backoff backoff;
      while (!force && !deadline.expired() && sendsQueued()) {
        if (progress()) {
          backoff.reset();
        } else {
          backoff.pause();
        }
      }
      // Say goodbye where it fits at once, so the peers read the end of the streams as a close.
      for (int r = 0; r < size_; ++r) {
        Peer& p = peers_[static_cast<size_t>(r)];
        if (!p.failure.isOk() || p.streams.empty()) continue;
        if (!force && p.streams[0].out.empty()) {
          OutFrame f;
          MsgHeader h{kGoodbye, 0};
          std::memcpy(f.head.data(), &h, sizeof(h));
          p.streams[0].out.push_back(f);
          flush(r, 0);
        }
      }
      for (int r = 0; r < size_; ++r) {
        if (peers_[static_cast<size_t>(r)].failure.isOk()) {
          drain(r);
          failPeer(r, makeError(ErrorCode::kRemoteError, "rank %d closed its TCP transport", rank_), false);
        }
      }
    }
    // Receives nobody matched end too.
    for (const Posted& p : posted_) (void)failNow(p.req, "the transport was closed");
    posted_.clear();
    unexpected_.clear();
    if (listenFd_ >= 0) ::close(listenFd_);
    listenFd_ = -1;
    closed_ = true;
  }

 private:
  // Starts waitForWork's spin window anew.
  void noteActivity() {
    if (spin_.count() > 0) lastActive_ = Clock::now();
  }

  Status checkPost(bool send, int peer, uint64_t tag) {
    const char* what = send ? "send to" : "receive from";
    if (closed_)
      return makeError(ErrorCode::kInvalidUsage, "TCP transport of rank %d: %s rank %d after close()", rank_, what,
                       peer);
    if (peers_.empty())
      return makeError(ErrorCode::kInvalidUsage, "TCP transport of rank %d: %s rank %d before connect()", rank_, what,
                       peer);
    const bool any = peer == kAnyPeer && !send;
    if (!any && (peer < 0 || peer >= size_ || peer == rank_)) {
      return makeError(ErrorCode::kInvalidArgument,
                       "TCP transport of rank %d: cannot %s rank %d (expected 0 <= peer < %d, not %d itself)", rank_,
                       what, peer, size_, rank_);
    }
    if (tag > kTagMask) {
      return makeError(ErrorCode::kInvalidArgument, "TCP transport of rank %d: tag %llu exceeds %d bits", rank_,
                       static_cast<unsigned long long>(tag), kTagBits);
    }
    return Status::ok();
  }

  Status failNow(Request* req, const std::string& why) {
    req->handle = nullptr;
    req->error = why;
    req->state = Request::State::kFailed;
    moved_ = true;
    return Status::ok();
  }

  static bool matches(int peer, uint64_t tag, uint64_t mask, const InMsg* m) {
    return (peer == kAnyPeer || peer == m->peer) && ((tag ^ m->tag) & mask) == 0;
  }

  bool sendsQueued() const {
    for (const Peer& p : peers_) {
      if (!p.failure.isOk()) continue;
      for (const Stream& s : p.streams) {
        if (!s.out.empty()) return true;
      }
    }
    return false;
  }

  // Write what the socket takes of stream `s` to `peer`.
  void flush(int peer, int s) {
    Stream& st = peers_[static_cast<size_t>(peer)].streams[static_cast<size_t>(s)];
    while (!st.out.empty()) {
      OutFrame& f = st.out.front();
      iovec iov[2];
      int n = 0;
      if (f.done < 16) iov[n++] = {f.head.data() + f.done, 16 - f.done};
      const size_t dataDone = f.done > 16 ? f.done - 16 : 0;
      if (f.bytes > dataDone) iov[n++] = {const_cast<uint8_t*>(f.data) + dataDone, f.bytes - dataDone};
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = static_cast<size_t>(n);
      ssize_t w = ::sendmsg(st.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (wouldBlock(errno)) return;
        const int err = errno;
        // The peer closed or reset the connection: what it sent before it went (its last
        // messages, often the report of why it stopped) is still to be read, and says more than
        // the broken pipe does.
        Peer& p = peers_[static_cast<size_t>(peer)];
        for (size_t i = 0; i < p.streams.size() && p.failure.isOk(); ++i) readStream(peer, static_cast<int>(i));
        if (p.failure.isOk()) {
          failPeer(peer,
                   makeError(ErrorCode::kRemoteError, "the TCP connection to rank %d failed: %s", peer,
                             std::strerror(err)),
                   true);
        }
        return;
      }
      moved_ = true;
      f.done += static_cast<size_t>(w);
      if (f.op != nullptr) f.op->started = true;
      if (f.done < 16 + f.bytes) return;  // the socket is full
      SendOp* op = f.op;
      st.out.pop_front();
      if (op != nullptr && --op->framesLeft == 0) {
        op->req->handle = nullptr;
        op->req->state = Request::State::kDone;
        delete op;
      }
    }
  }

  // Read what stream `s` from `peer` has, as far as the messages known allow.
  void readStream(int peer, int s) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    Stream& st = p.streams[static_cast<size_t>(s)];
    for (int rounds = 0; rounds < 64 && p.failure.isOk(); ++rounds) {
      if (st.cur == nullptr) {
        if (s > 0 && st.owed.empty()) return;
        ssize_t r = ::recv(st.fd, st.head.data() + st.headDone, 16 - st.headDone, 0);
        if (r <= 0) {
          if (r < 0 && wouldBlock(errno)) return;
          lost(peer, s, r == 0 ? 0 : errno);
          return;
        }
        moved_ = true;
        st.headDone += static_cast<size_t>(r);
        if (st.headDone < 16) continue;
        st.headDone = 0;
        if (s == 0) {
          MsgHeader h;
          std::memcpy(&h, st.head.data(), sizeof(h));
          if (h.tag & kGoodbye) {
            p.goodbye = true;
            continue;
          }
          InMsg* m = arrive(peer, h);
          if (m == nullptr) return;
          startPiece(st, m, 0);
        } else {
          PieceHeader h;
          std::memcpy(&h, st.head.data(), sizeof(h));
          InMsg* m = st.owed.front();
          st.owed.pop_front();
          const Piece want = pieceOf(m->bytes, m->split, s);
          if (h.offset != want.offset || h.bytes != want.bytes) {
            failPeer(peer,
                     makeError(ErrorCode::kRemoteError,
                               "TCP stream %d from rank %d fell out of step (a piece at %llu+%llu where one at "
                               "%zu+%zu was due)",
                               s, peer, static_cast<unsigned long long>(h.offset),
                               static_cast<unsigned long long>(h.bytes), want.offset, want.bytes),
                     true);
            return;
          }
          startPiece(st, m, s);
        }
        continue;
      }
      InMsg* m = st.cur;
      const Piece piece = pieceOf(m->bytes, m->split, st.curPiece);
      const size_t left = piece.bytes - st.curDone;
      uint8_t* dst = target(m, st.curPiece);
      ssize_t r = dst != nullptr ? ::recv(st.fd, dst + piece.offset + st.curDone, left, 0)
                                 : ::recv(st.fd, sink_.data(), std::min(left, sink_.size()), 0);
      if (r <= 0) {
        if (r < 0 && wouldBlock(errno)) return;
        lost(peer, s, r == 0 ? 0 : errno);
        return;
      }
      moved_ = true;
      st.curDone += static_cast<size_t>(r);
      if (st.curDone == piece.bytes) {
        st.cur = nullptr;
        pieceDone(m, st.curPiece);
        if (p.ended && !piecesOwed(p)) {
          lost(peer, 0, 0);  // the last piece the ended peer owed is in: now it is gone
          return;
        }
      }
    }
  }

  // Where piece `i` of `m` is written: the receive's buffer, its own memory, or nowhere.
  static uint8_t* target(InMsg* m, int i) {
    if (m->discard) return nullptr;
    if (m->pieces[static_cast<size_t>(i)] == PieceState::kDirect) return static_cast<uint8_t*>(m->req->handle);
    return m->own.get();
  }

  void startPiece(Stream& st, InMsg* m, int i) {
    m->pieces[static_cast<size_t>(i)] = m->req != nullptr ? PieceState::kDirect : PieceState::kToOwn;
    if (pieceOf(m->bytes, m->split, i).bytes == 0) {
      pieceDone(m, i);
      return;
    }
    st.cur = m;
    st.curPiece = i;
    st.curDone = 0;
  }

  void pieceDone(InMsg* m, int i) {
    PieceState& ps = m->pieces[static_cast<size_t>(i)];
    if (ps == PieceState::kToOwn) {
      if (m->req != nullptr && !m->discard) {
        const Piece piece = pieceOf(m->bytes, m->split, i);
        std::memcpy(static_cast<uint8_t*>(m->req->handle) + piece.offset, m->own.get() + piece.offset, piece.bytes);
        ps = PieceState::kDirect;
      } else {
        ps = PieceState::kInOwn;
      }
    }
    if (--m->piecesLeft == 0) delivered(m);
  }

  // A header arrived: the message is matched to a posted receive or kept as unexpected.
  InMsg* arrive(int peer, const MsgHeader& h) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    p.incoming.push_back(std::make_unique<InMsg>());
    InMsg* m = p.incoming.back().get();
    m->peer = peer;
    m->tag = h.tag & kTagMask;
    m->bytes = h.bytes;
    m->split = splitOf(h.bytes, static_cast<int>(p.streams.size()));
    m->piecesLeft = m->split.count;
    for (int i = 1; i < m->split.count; ++i) p.streams[static_cast<size_t>(i)].owed.push_back(m);
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
      if (matches(it->req->peer, it->req->tag, it->mask, m)) {
        Request* req = it->req;
        posted_.erase(it);
        match(m, req);
        return m;
      }
    }
    if (h.bytes > 0) {
      if (!m->own.take(&pool_, h.bytes)) {
        failPeer(peer,
                 makeError(ErrorCode::kSystemError,
                           "rank %d cannot hold a message of %llu bytes from rank %d that no receive takes yet", rank_,
                           static_cast<unsigned long long>(h.bytes), peer),
                 true);
        return nullptr;
      }
    }
    m->unexpected = true;
    unexpected_.push_back(m);
    m->unexpectedAt = std::prev(unexpected_.end());
    return m;
  }

  // `req` takes `m`: pieces already in the message's memory are copied now, the rest on arrival.
  void match(InMsg* m, Request* req) {
    req->source = m->peer;
    req->peerTag = m->tag;
    req->received = m->bytes;
    if (m->bytes > req->bytes) {
      (void)failNow(req, "message truncated: rank " + std::to_string(m->peer) + " sent " + std::to_string(m->bytes) +
                             " bytes, more than the " + std::to_string(req->bytes) + " bytes posted");
      m->discard = true;
      m->own.reset();
      if (m->piecesLeft == 0) retire(m);
      return;
    }
    void* buf = req->handle;  // the receive's buffer (postRecv put it there; target() reads it)
    m->req = req;
    for (int i = 0; i < m->split.count; ++i) {
      PieceState& ps = m->pieces[static_cast<size_t>(i)];
      if (ps != PieceState::kInOwn) continue;
      const Piece piece = pieceOf(m->bytes, m->split, i);
      if (piece.bytes > 0)
        std::memcpy(static_cast<uint8_t*>(buf) + piece.offset, m->own.get() + piece.offset, piece.bytes);
      ps = PieceState::kDirect;
    }
    if (m->piecesLeft == 0) delivered(m);
  }

  // Every piece of `m` arrived.
  void delivered(InMsg* m) {
    if (m->discard) {
      retire(m);
      return;
    }
    if (m->req == nullptr) return;  // unexpected: it waits for its receive
    Request* req = m->req;
    req->handle = nullptr;
    req->state = Request::State::kDone;
    moved_ = true;
    retire(m);
  }

  void retire(InMsg* m) {
    if (m->unexpected) unexpected_.erase(m->unexpectedAt);
    auto& list = peers_[static_cast<size_t>(m->peer)].incoming;
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->get() == m) {
        list.erase(it);
        return;
      }
    }
  }

  // Read and drop what `peer` sent that nobody will take, so that closing the sockets sends the
  // peer an orderly end rather than a reset (which could drop our last bytes before it reads them).
  void drain(int peer) {
    for (Stream& st : peers_[static_cast<size_t>(peer)].streams) {
      for (int i = 0; i < 1024 && ::recv(st.fd, sink_.data(), sink_.size(), MSG_DONTWAIT) > 0; ++i) {
      }
    }
  }

  // The streams from `peer` ended (err 0) or broke.
  void lost(int peer, int s, int err) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (s == 0 && err == 0 && piecesOwed(p)) {
      // The peer wrote its last messages before it went: their pieces on the other streams are
      // still to be read, and the peer is gone only once they are in (or those streams end too).
      p.ended = true;
      return;
    }
    if (err == 0 && p.goodbye) {
      failPeer(peer,
               makeError(ErrorCode::kRemoteError, "rank %d closed its connections (it destroyed the communicator)",
                         peer),
               false);
    } else if (err == 0) {
      failPeer(peer,
               makeError(ErrorCode::kRemoteError,
                         "the TCP connection to rank %d ended: its process exited or was killed", peer),
               true);
    } else {
      failPeer(peer,
               makeError(ErrorCode::kRemoteError, "the TCP connection to rank %d failed: %s", peer, std::strerror(err)),
               true);
    }
  }

  static bool piecesOwed(const Peer& p) {
    for (size_t i = 1; i < p.streams.size(); ++i) {
      if (p.streams[i].cur != nullptr || !p.streams[i].owed.empty()) return true;
    }
    return false;
  }

  // Every request naming `peer` fails with `why`, and so will every later one; its sockets close.
  void failPeer(int peer, Status why, bool log) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.failure.isOk()) return;
    if (log) FERRY_WARN(log::kTransport, "%s", why.message().c_str());
    p.failure = why;
    const std::string msg = why.message();
    moved_ = true;
    for (Stream& st : p.streams) {
      for (OutFrame& f : st.out) {
        if (f.op == nullptr) continue;
        if (f.op->req != nullptr) (void)failNow(f.op->req, msg);
        f.op->req = nullptr;
        if (--f.op->framesLeft == 0) delete f.op;
      }
      st.out.clear();
      st.owed.clear();
      st.cur = nullptr;
      if (st.fd >= 0) {
        ::shutdown(st.fd, SHUT_WR);
        ::close(st.fd);
      }
      st.fd = -1;
    }
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->req->peer == peer) {
        (void)failNow(it->req, msg);
        it = posted_.erase(it);
      } else {
        ++it;
      }
    }
    // Messages that arrived whole before the end stay receivable: a peer that sent its last
    // message and closed (or died) right after did send it. The rest fail or go.
    for (auto it = p.incoming.begin(); it != p.incoming.end();) {
      InMsg* m = it->get();
      if (m->unexpected && m->piecesLeft == 0 && !m->discard) {
        ++it;
        continue;
      }
      if (m->req != nullptr && !m->discard) (void)failNow(m->req, msg);
      if (m->unexpected) unexpected_.erase(m->unexpectedAt);
      it = p.incoming.erase(it);
    }
  }

  const int rank_;
  const int size_;
  const TcpOptions options_;
  int listenFd_ = -1;
  const TcpAddress self_;
  BufferPool pool_{static_cast<size_t>(options_.poolBytes)};  // before the messages whose memory it lends
  std::vector<Peer> peers_;
  std::list<Posted> posted_;      // receives no message matched yet, in posting order
  std::list<InMsg*> unexpected_;  // messages no receive matched yet, in arrival order
  std::vector<pollfd> pollfds_;
  std::vector<std::pair<int, int>> where_;  // pollfds_[i] is (peer, stream)
  std::array<uint8_t, 64 * 1024> sink_{};   // where discarded bytes go
  bool moved_ = false;
  bool closed_ = false;
  const std::chrono::microseconds spin_{options_.spinUs};  // waitForWork's spin window
  Clock::time_point lastActive_{};                         // the last post or moved byte
};

}  // namespace

Result<std::unique_ptr<Transport>> createTcpTransport(const TcpOptions& options) {
  if (options.streams < 1 || options.streams > kMaxStreams) {
    return makeError(ErrorCode::kInvalidArgument, "FERRY_SOCKET_STREAMS=%d on rank %d is out of range (expected 1..%d)",
                     options.streams, options.rank, kMaxStreams);
  }
  if (options.spinUs < 0 || options.spinUs > kMaxSpinUs) {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_SOCKET_SPIN_US=%ld on rank %d is out of range (expected 0..%ld)", options.spinUs,
                     options.rank, kMaxSpinUs);
  }
  if (options.poolBytes < 0 || options.poolBytes > kMaxPoolBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_SOCKET_POOL_BYTES=%lld on rank %d is out of range (expected 0..%lld)",
                     static_cast<long long>(options.poolBytes), options.rank, static_cast<long long>(kMaxPoolBytes));
  }
  TcpAddress self;
  auto fd = listenTcp(options.bind, options.bindLength, options.congestion, &self.addr, &self.length);
  FERRY_TRY(fd);
  std::random_device rd;
  self.rank = static_cast<uint32_t>(options.rank);
  self.streams = static_cast<uint32_t>(options.streams);
  self.commId = options.commId;
  self.nonce = (uint64_t{rd()} << 32) ^ rd();
  return std::unique_ptr<Transport>(new TcpTransport(options, *fd, self));
}

}  // namespace ferry::transport::tcp
