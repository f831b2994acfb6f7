// StoreServer: the root's poll loop, its connections, and the keeper of detached servers.
//
// One thread serves every connection with poll(): no thread per rank, so a thousand-rank job costs
// one thread and a thousand sockets. Every socket is non-blocking and every connection has its own
// receive state (a ServerSession) and send queue, so a slow, stalled or hostile peer only ever delays
// itself. Frames are checked (magic, type, length) before their payload is allocated; a connection
// that breaks the protocol is dropped with a WARN naming its address and the reason. The rules of
// the rendezvous itself live in RootState; this file only moves bytes and keeps time.
//
// A detached server is owned by a process-global keeper. Its thread ends on its own once every rank
// has left after its last round (or nothing happened for FERRY_TIMEOUT seconds), closes its sockets,
// detaches itself from the keeper and frees its state, so nobody has to join it.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/bootstrap/root_state.hpp"
#include "runtime/bootstrap/server_session.hpp"
#include "runtime/bootstrap/socket.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {
namespace {

// Longest a connection may go without presenting a valid HELLO, or sit in a half-received frame.
constexpr double kStallSeconds = 10.0;
// Connections that have not yet presented the secret; more are closed as soon as they are accepted.
constexpr size_t kMaxUnregistered = 1024;
// Per-connection read budget per wake-up, so one fast sender cannot starve the others.
constexpr size_t kReadBudgetBytes = 1u << 20;
constexpr int kMaxPollMs = 250;

// One accepted connection: its socket and send queue here, what its bytes mean in `session`.
struct Conn {
  Conn(uint64_t id, Fd fd, std::string peer) : fd(std::move(fd)), session(id, std::move(peer)) {}
  std::string who() const { return session.who(); }

  Fd fd;
  ServerSession session;
  std::deque<wire::OutFrame> out;
  size_t outOffset = 0;
  bool closing = false;  // refused: close as soon as `out` is sent
  bool dead = false;     // removed at the end of this loop iteration
  Clock::time_point acceptedAt = Clock::now();
  Clock::time_point lastProgress = acceptedAt;
};

}  // namespace

struct StoreServer::Impl final : ReplySink {
  explicit Impl(const Secret& secret) : state_(secret, *this) {}
  ~Impl() override = default;

  void reply(uint64_t conn, wire::OutFrame frame) override;
  static void threadMain(Impl* self);
  void loop();
  void acceptAll();
  void readFrom(Conn& c);
  void flush(Conn& c);
  void drop(Conn& c, const std::string& why);
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
  double idleSeconds_ = 300;
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
    FERRY_INFO(log::kBootstrap, "every rank has left; the detached root at %s stops",
               bound_.toString().c_str());
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
  for (;;) {
    SocketAddress peer;
    int err = 0;
    Fd fd = acceptOne(listenFd_.get(), &peer, &err);
    if (!fd.valid()) {
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED) continue;
      // Out of descriptors or memory: the listen socket stays readable, so pause instead of spinning.
      FERRY_WARN(log::kBootstrap, "the root at %s cannot accept connections: %s; retrying in 100 ms",
                 bound_.toString().c_str(), std::strerror(err));
      acceptPausedUntil_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    size_t unregistered = 0;
    for (const auto& entry : conns_) unregistered += entry.second->session.rank() < 0 ? 1 : 0;
    if (unregistered >= kMaxUnregistered) {
      FERRY_WARN(log::kBootstrap, "dropping connection from %s: %zu connections have not presented "
                 "the secret yet", peer.toString().c_str(), unregistered);
      continue;
    }
    uint64_t id = nextId_++;
    conns_.emplace(id, std::make_unique<Conn>(id, std::move(fd), peer.toString()));
  }
}

void StoreServer::Impl::readFrom(Conn& c) {
  size_t budget = kReadBudgetBytes;
  while (!c.dead && !c.closing && budget > 0) {
    std::span<uint8_t> space = c.session.space();
    size_t want = std::min(space.size(), budget);
    ssize_t n = ::recv(c.fd.get(), space.data(), want, 0);
    if (n > 0) {
      budget -= static_cast<size_t>(n);
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
    FERRY_INFO(log::kBootstrap, "cannot send to %s: %s", c.who().c_str(),
               n < 0 ? std::strerror(errno) : "no progress");
    c.dead = true;
    return;
  }
  if (c.closing) c.dead = true;
}

void StoreServer::Impl::drop(Conn& c, const std::string& why) {
  FERRY_WARN(log::kBootstrap, "dropping connection from %s: %s", c.who().c_str(), why.c_str());
  c.dead = true;
}

void StoreServer::Impl::checkStalls() {
  const auto now = Clock::now();
  const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stallSeconds_));
  for (auto& entry : conns_) {
    Conn& c = *entry.second;
    if (c.dead) continue;
    if (c.closing) {
      if (now - c.acceptedAt > limit) c.dead = true;  // it does not read its refusal; no matter
    } else if (c.session.rank() < 0 && now - c.acceptedAt > limit) {
      drop(c, "no valid HELLO within " + std::to_string(static_cast<int>(stallSeconds_)) + " s (" +
                  c.session.progress() + ")");
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
      if (gone->session.rank() >= 0) state_.disconnected(gone->session.rank());
      again = true;
    }
  }
}

Result<std::unique_ptr<StoreServer>> StoreServer::start(const SocketAddress& bind, const Secret& secret) {
  auto impl = std::make_unique<Impl>(secret);
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
