// StoreServer: the root's poll loop, its connections, and the keeper of detached servers.
//
// One thread serves every connection with poll(): no thread per rank, so a thousand-rank job costs
// one thread and a thousand sockets. Every socket is non-blocking and every connection has its own
// receive state (a ServerSession) and send queue, so a slow, stalled or hostile peer only ever delays
// itself. Frames are checked (magic, type, length) before their payload is allocated; a connection
// that breaks the protocol is dropped with a WARN naming its address and the reason. The rules of
// the rendezvous itself live in RootState; this file only moves bytes and keeps time.
//
// Connections that have not proved the secret yet cost the root a descriptor each, so they are
// bounded: at most kMaxUnauthPerSource from one address and kMaxUnauthTotal in all (fewer when the
// descriptor limit is low), each with kHandshakeSeconds to finish the handshake. A new connection
// over a limit evicts an unauthenticated one (one that has sent nothing first, then the one idle
// longest), so a flood of idle connections costs the attacker its own connections, never the
// root's ability to accept; when accept() itself runs out of descriptors, the root evicts the same
// way and tries again. An authenticated connection is never evicted: only its own protocol errors
// and stalls drop it.
//
// A detached server is owned by a process-global keeper. Its thread ends on its own once every rank
// has left after its last round (or nothing happened for FERRY_TIMEOUT seconds), closes its sockets,
// detaches itself from the keeper and frees its state, so nobody has to join it.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/bootstrap/root_state.hpp"
#include "runtime/bootstrap/server_session.hpp"
#include "runtime/bootstrap/socket.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {
namespace {

// Longest a registered rank may sit in a half-received frame.
constexpr double kStallSeconds = 10.0;
// Longest a connection may take from accept to a verified AUTH (two round trips for an honest rank).
constexpr double kHandshakeSeconds = 3.0;
// Unauthenticated connections held from one source address, and in all.
constexpr size_t kMaxUnauthPerSource = 64;
constexpr size_t kMaxUnauthTotal = 256;
// Connections accepted per wake-up, so that those already accepted get read between batches.
constexpr int kAcceptBatch = 64;
// Per-connection read budget per wake-up, so one fast sender cannot starve the others.
constexpr size_t kReadBudgetBytes = 1u << 20;
constexpr int kMaxPollMs = 250;

// One accepted connection: its socket and send queue here, what its bytes mean in `session`.
struct Conn {
  Conn(uint64_t id, Fd fd, std::string peer, std::string source)
      : fd(std::move(fd)), session(id, std::move(peer)), source(std::move(source)) {}
  std::string who() const { return session.who(); }

  Fd fd;
  ServerSession session;
  std::string source;  // the peer's address without its port: what the per-source limit counts
  bool spoke = false;  // it has sent at least one byte
  std::deque<wire::OutFrame> out;
  size_t outOffset = 0;
  bool closing = false;  // refused: close as soon as `out` is sent
  bool dead = false;     // removed at the end of this loop iteration
  Clock::time_point acceptedAt = Clock::now();
  Clock::time_point lastProgress = acceptedAt;
};

}  // namespace

struct StoreServer::Impl final : ReplySink {
  Impl(const Secret& secret, int worldSize) : state_(secret, worldSize, *this) {}
  ~Impl() override = default;

  void reply(uint64_t conn, wire::OutFrame frame) override;
  void admit(uint64_t conn, int rank) override;
  void refuse(uint64_t conn) override;
  static void threadMain(Impl* self);
  void loop();
  void acceptAll();
  bool evictFor(const std::string& source);
  void readFrom(Conn& c);
  void flush(Conn& c);
  void drop(Conn& c, const std::string& why);
  void dropStranger(Conn& c, const std::string& why);
  void checkStalls();
  void sweep();
  bool detachedWorkDone();
  void wake() {
    uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof(one));
  }

  Fd listenFd_;
  Fd wakeFd_;
  SocketAddress bound_;
  RootState state_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t nextId_ = 1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> detached_{false};
  std::thread thread_;
  // Progress of the job (a rank registered or sent a request); strangers do not keep a detached
  // root alive.
  Clock::time_point lastActivity_ = Clock::now();
  Clock::time_point acceptPausedUntil_{};
  double stallSeconds_ = kStallSeconds;
  double handshakeSeconds_ = kHandshakeSeconds;
  double idleSeconds_ = 300;
  size_t maxUnauthTotal_ = kMaxUnauthTotal;
  uint64_t strangersDropped_ = 0;  // evicted or timed out before proving the secret
};

namespace {

// Owns detached servers. Allocated once and never freed: a server thread may still be finishing
// while static destructors run; the guard asks every server to stop at exit and waits briefly.
class Keeper {
 public:
  static Keeper& instance() {
    static Keeper* keeper = new Keeper;
    static struct Guard {
      ~Guard() { keeper->stopAll(); }
    } guard;
    return *keeper;
  }

  void adopt(std::unique_ptr<StoreServer::Impl> impl) {
    StoreServer::Impl* raw = impl.release();
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.push_back(raw);
      raw->detached_ = true;
    }
    raw->wake();  // it may already have nothing left to do
  }

  // Runs on the server's own thread as its last act.
  void retire(StoreServer::Impl* impl) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(std::find(live_.begin(), live_.end(), impl));
    impl->thread_.detach();
    delete impl;
    cv_.notify_all();
  }

 private:
  void stopAll() {
    std::unique_lock<std::mutex> lock(mu_);
    for (StoreServer::Impl* impl : live_) {
      impl->stop_ = true;
      impl->wake();
    }
    cv_.wait_for(lock, std::chrono::seconds(2), [this] { return live_.empty(); });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StoreServer::Impl*> live_;
};

}  // namespace

void StoreServer::Impl::threadMain(Impl* self) {
  self->loop();
  // Free the sockets now; a detached server then frees itself. A server that is not detached ended
  // because its destructor asked, which excludes a concurrent detach().
  self->conns_.clear();
  self->listenFd_.reset();
  if (self->detached_) Keeper::instance().retire(self);
}

void StoreServer::Impl::loop() {
  std::vector<pollfd> fds;
  std::vector<Conn*> order;
  while (!stop_) {
    if (detached_ && detachedWorkDone()) return;
    fds.clear();
    order.clear();
    fds.push_back({wakeFd_.get(), POLLIN, 0});
    bool accepting = Clock::now() >= acceptPausedUntil_;
    fds.push_back({accepting ? listenFd_.get() : -1, POLLIN, 0});  // poll ignores negative fds
    for (auto& entry : conns_) {
      Conn* c = entry.second.get();
      auto events = static_cast<short>((c->closing ? 0 : POLLIN) | (c->out.empty() ? 0 : POLLOUT));
      fds.push_back({c->fd.get(), events, 0});
      order.push_back(c);
    }
    int n = ::poll(fds.data(), fds.size(), pollTimeoutMs(state_.nextDeadline(), kMaxPollMs));
    if (n < 0 && errno != EINTR) {
      FERRY_WARN(log::kBootstrap, "poll() failed on the root at %s: %s", bound_.toString().c_str(),
                 std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (n > 0) {
      if (fds[0].revents != 0) {
        uint64_t count = 0;
        (void)!::read(wakeFd_.get(), &count, sizeof(count));
      }
      if ((fds[1].revents & POLLIN) != 0) acceptAll();
      for (size_t i = 0; i < order.size(); ++i) {
        Conn& c = *order[i];
        short re = fds[i + 2].revents;
        if (re == 0 || c.dead) continue;
        if ((re & POLLOUT) != 0) flush(c);
        if (c.dead) continue;
        if (c.closing && (re & (POLLHUP | POLLERR)) != 0) c.dead = true;
        if (!c.closing && (re & (POLLIN | POLLHUP | POLLERR)) != 0) readFrom(c);
      }
    }
    state_.tick();
    checkStalls();
    sweep();
  }
}

bool StoreServer::Impl::detachedWorkDone() {
  if (state_.finished()) {
    FERRY_INFO(log::kBootstrap, "every rank has left; the detached root at %s stops", bound_.toString().c_str());
    return true;
  }
  if (secondsSince(lastActivity_) > idleSeconds_) {
    FERRY_WARN(log::kBootstrap, "nothing happened for %.0f s (FERRY_TIMEOUT); the detached root at %s stops",
               idleSeconds_, bound_.toString().c_str());
    return true;
  }
  return false;
}

void StoreServer::Impl::acceptAll() {
  for (int accepted = 0; accepted < kAcceptBatch;) {
    SocketAddress peer;
    int err = 0;
    Fd fd = acceptOne(listenFd_.get(), &peer, &err);
    if (!fd.valid()) {
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED) continue;
      // Out of descriptors: free one held by a stranger and try again; with none to free, the
      // listen socket stays readable, so pause instead of spinning.
      if ((err == EMFILE || err == ENFILE) && evictFor("")) continue;
      FERRY_WARN(log::kBootstrap, "the root at %s cannot accept connections: %s; retrying in 100 ms",
                 bound_.toString().c_str(), std::strerror(err));
      acceptPausedUntil_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    ++accepted;
    std::string source = peer.toString();
    source = source.substr(0, source.rfind(':'));
    while (evictFor(source)) {
    }
    uint64_t id = nextId_++;
    auto conn = std::make_unique<Conn>(id, std::move(fd), peer.toString(), std::move(source));
    Conn& c = *conn;
    conns_.emplace(id, std::move(conn));
    // An honest rank's HELLO is usually here already: reading it now moves the connection out of
    // the first class of eviction candidates before the next accept.
    readFrom(c);
  }
}

// Evicts one unauthenticated connection when `source` (every source for "") holds its share or
// the total is at the limit; false when no eviction was needed or possible. Victims: connections
// that never sent a byte before those that did, and among them the one idle longest.
bool StoreServer::Impl::evictFor(const std::string& source) {
  size_t total = 0;
  size_t fromSource = 0;
  Conn* victim = nullptr;
  Conn* sourceVictim = nullptr;
  auto worse = [](const Conn* a, const Conn* b) {
    if (b == nullptr) return true;
    if (a->spoke != b->spoke) return !a->spoke;
    return a->lastProgress < b->lastProgress;
  };
  for (auto& entry : conns_) {
    Conn* c = entry.second.get();
    if (c->dead || c->session.authenticated()) continue;
    ++total;
    if (worse(c, victim)) victim = c;
    if (c->source == source) {
      ++fromSource;
      if (worse(c, sourceVictim)) sourceVictim = c;
    }
  }
  Conn* chosen = nullptr;
  if (source.empty()) {
    chosen = victim;
  } else if (fromSource >= kMaxUnauthPerSource) {
    chosen = sourceVictim;
  } else if (total >= maxUnauthTotal_) {
    chosen = victim;
  }
  if (chosen == nullptr) return false;
  std::string why = source.empty() ? "the root is out of descriptors"
                    : fromSource >= kMaxUnauthPerSource
                        ? "its address holds " + std::to_string(fromSource) + " unauthenticated connections"
                        : "the root holds " + std::to_string(total) + " unauthenticated connections";
  dropStranger(*chosen, "evicted (" + why + "; it " +
                            (chosen->spoke ? "is at " + chosen->session.progress() : std::string("sent nothing")) +
                            ")");
  return true;
}

void StoreServer::Impl::readFrom(Conn& c) {
  size_t budget = kReadBudgetBytes;
  while (!c.dead && !c.closing && budget > 0) {
    std::span<uint8_t> space = c.session.space();
    size_t want = std::min(space.size(), budget);
    ssize_t n = ::recv(c.fd.get(), space.data(), want, 0);
    if (n > 0) {
      budget -= static_cast<size_t>(n);
      c.spoke = true;
      c.lastProgress = Clock::now();
      bool activity = false;
      Status ok = c.session.received(static_cast<size_t>(n), state_, &activity);
      if (activity) lastActivity_ = Clock::now();
      if (!ok.isOk()) return drop(c, ok.message());
      if (c.session.refused()) c.closing = true;
      continue;
    }
    if (n == 0) {
      if (c.session.midFrame()) {
        return drop(c, "it closed the connection mid-frame (" + c.session.progress() + ")");
      }
      FERRY_INFO(log::kBootstrap, "%s closed its connection", c.who().c_str());
      c.dead = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return drop(c, std::string("receiving failed: ") + std::strerror(errno));
  }
}

void StoreServer::Impl::admit(uint64_t conn, int rank) {
  auto it = conns_.find(conn);
  if (it != conns_.end()) it->second->session.admit(rank);
}

void StoreServer::Impl::refuse(uint64_t conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  it->second->session.markRefused();
  it->second->closing = true;
  if (it->second->out.empty()) it->second->dead = true;
}

void StoreServer::Impl::reply(uint64_t conn, wire::OutFrame frame) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second->dead) return;
  it->second->out.push_back(std::move(frame));
  flush(*it->second);
}

void StoreServer::Impl::flush(Conn& c) {
  while (!c.out.empty()) {
    const std::vector<uint8_t>& buf = *c.out.front();
    ssize_t n = ::send(c.fd.get(), buf.data() + c.outOffset, buf.size() - c.outOffset, MSG_NOSIGNAL);
    if (n > 0) {
      c.outOffset += static_cast<size_t>(n);
      if (c.outOffset == buf.size()) {
        c.out.pop_front();
        c.outOffset = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    FERRY_INFO(log::kBootstrap, "cannot send to %s: %s", c.who().c_str(), n < 0 ? std::strerror(errno) : "no progress");
    c.dead = true;
    return;
  }
  if (c.closing) c.dead = true;
}

void StoreServer::Impl::drop(Conn& c, const std::string& why) {
  FERRY_WARN(log::kBootstrap, "dropping connection from %s: %s", c.who().c_str(), why.c_str());
  c.dead = true;
}

void StoreServer::Impl::dropStranger(Conn& c, const std::string& why) {
  ++strangersDropped_;
  // A WARN at the 1st, 2nd, 4th, 8th... keeps a flood from flooding the log as well.
  if ((strangersDropped_ & (strangersDropped_ - 1)) == 0) {
    FERRY_WARN(log::kBootstrap,
               "dropping connection from %s, which has not proved the job secret: %s (%llu such "
               "connections dropped so far)",
               c.who().c_str(), why.c_str(), static_cast<unsigned long long>(strangersDropped_));
  } else {
    FERRY_INFO(log::kBootstrap, "dropping connection from %s, which has not proved the job secret: %s", c.who().c_str(),
               why.c_str());
  }
  c.dead = true;
  c.fd.reset();  // free the descriptor now: accept() may be waiting for one
}

void StoreServer::Impl::checkStalls() {
  const auto now = Clock::now();
  const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stallSeconds_));
  const auto handshakeLimit =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(handshakeSeconds_));
  for (auto& entry : conns_) {
    Conn& c = *entry.second;
    if (c.dead) continue;
    if (c.closing) {
      if (now - c.acceptedAt > limit) c.dead = true;  // it does not read its refusal; no matter
    } else if (!c.session.authenticated() && now - c.acceptedAt > handshakeLimit) {
      char limitText[32];
      std::snprintf(limitText, sizeof(limitText), "%.1f", handshakeSeconds_);
      dropStranger(c, std::string("no valid handshake within ") + limitText + " s (" + c.session.progress() + ")");
    } else if (c.session.midFrame() && now - c.lastProgress > limit) {
      drop(c, "a frame made no progress for " + std::to_string(static_cast<int>(stallSeconds_)) + " s (" +
                  c.session.progress() + ")");
    }
  }
}

void StoreServer::Impl::sweep() {
  // Telling RootState that a rank left may queue errors that reveal more dead connections.
  for (bool again = true; again;) {
    again = false;
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (!it->second->dead) {
        ++it;
        continue;
      }
      std::unique_ptr<Conn> gone = std::move(it->second);
      it = conns_.erase(it);
      if (gone->session.rank() >= 0) {
        state_.disconnected(gone->session.rank());
      } else if (gone->session.authenticated()) {
        state_.forget(gone->session.id());
      }
      again = true;
    }
  }
}

Result<std::unique_ptr<StoreServer>> StoreServer::start(const SocketAddress& bind, const Secret& secret,
                                                        int worldSize) {
  if (worldSize < 0 || worldSize > wire::kMaxWorldSize) {
    return makeError(ErrorCode::kInvalidArgument,
                     "world size %d for the rendezvous root is out of range (expected "
                     "0, for rank 0's choice, or 1 to %d)",
                     worldSize, wire::kMaxWorldSize);
  }
  auto impl = std::make_unique<Impl>(secret, worldSize);
  auto listening = listenOn(bind, &impl->bound_);
  FERRY_TRY(listening);
  impl->listenFd_ = std::move(listening.value());
  impl->wakeFd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->wakeFd_.valid()) {
    return makeError(ErrorCode::kSystemError, "cannot create the wake-up eventfd of the root at %s: %s",
                     impl->bound_.toString().c_str(), std::strerror(errno));
  }
  const double timeout = config().timeout;  // kNoTimeout (none): a detached root idles until every rank left
  impl->idleSeconds_ = timeout;
  impl->stallSeconds_ = std::min(kStallSeconds, timeout);
  impl->handshakeSeconds_ = std::min(kHandshakeSeconds, timeout);
  // Strangers may hold at most a quarter of the descriptors this process may open.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    impl->maxUnauthTotal_ = std::clamp<size_t>(static_cast<size_t>(files.rlim_cur) / 4, 8, kMaxUnauthTotal);
  }
  try {
    impl->thread_ = std::thread(&Impl::threadMain, impl.get());
  } catch (const std::system_error& e) {
    return makeError(ErrorCode::kSystemError, "cannot start the thread of the root at %s: %s",
                     impl->bound_.toString().c_str(), e.what());
  }
  FERRY_INFO(log::kBootstrap, "rendezvous root listening on %s", impl->bound_.toString().c_str());
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(impl)));
}

StoreServer::StoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreServer::~StoreServer() {
  if (!impl_) return;
  impl_->stop_ = true;
  impl_->wake();
  if (impl_->thread_.joinable()) impl_->thread_.join();
}

void StoreServer::detach(std::unique_ptr<StoreServer> server) {
  if (!server || !server->impl_) return;
  Keeper::instance().adopt(std::move(server->impl_));
}

SocketAddress StoreServer::address() const { return impl_->bound_; }

}  // namespace ferry::bootstrap
