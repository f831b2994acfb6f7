#include "runtime/shrink.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "base/config.hpp"
#include "base/log.hpp"

namespace ferry {

using bootstrap::Fd;
using bootstrap::IoEnd;
using bootstrap::SocketAddress;

namespace {

constexpr uint32_t kHelloMagic = 0x46534831;  // "FSH1"
constexpr uint32_t kReplyMagic = 0x46534852;  // "FSHR"
constexpr size_t kMaxRoundBytes = size_t{64} << 20;
constexpr size_t kMaxRanks = size_t{1} << 20;
/// How long a connection to a candidate leader, or a probe of a rank's listener, may take.
constexpr double kConnectSeconds = 0.5;

// What stops a shrink early besides its deadline (Comm::abort() on the communicator being shrunk),
// for the thread running gatherSurvivors().
thread_local const std::function<Status()>* tStop = nullptr;

Status stopRequested() { return tStop != nullptr && *tStop ? (*tStop)() : Status::ok(); }

/// Wait until `fd` is readable, checking for a stop every 100 ms: false at the deadline (*stop ok)
/// or when stopped (*stop says why).
bool readableOrStopped(int fd, Deadline deadline, Status* stop) {
  for (;;) {
    const Clock::time_point slice = std::min(deadline.at(), Clock::now() + std::chrono::milliseconds(100));
    if (bootstrap::waitReadable(fd, slice)) return true;
    *stop = stopRequested();
    if (!stop->isOk() || deadline.expired()) return false;
  }
}

/// The earlier of `d` and `seconds` from now.
Deadline capped(const Deadline& d, double seconds) {
  Deadline c = Deadline::after(seconds);
  return d.at() < c.at() ? d : c;
}

void put(Bytes& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

std::string rankList(const std::vector<int>& v) {
  if (v.empty()) return "none";
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

Status sendBytes(int fd, const Bytes& b, Deadline deadline, const char* what, int peer) {
  int err = 0;
  IoEnd end = bootstrap::sendAll(fd, b, deadline.at(), &err);
  if (end == IoEnd::kDone) return Status::ok();
  return makeError(end == IoEnd::kTimedOut ? ErrorCode::kTimeout : ErrorCode::kRemoteError,
                   "shrink: sending %s to rank %d %s", what, peer,
                   end == IoEnd::kTimedOut ? "timed out"
                   : end == IoEnd::kClosed ? "failed: it closed the connection"
                                           : std::strerror(err));
}

/// Exactly n bytes before the deadline.
Status recvExact(int fd, void* dst, size_t n, Deadline deadline, const char* what, int peer) {
  auto* at = static_cast<uint8_t*>(dst);
  size_t got = 0;
  while (got < n) {
    ssize_t k = ::recv(fd, at + got, n - got, 0);
    if (k > 0) {
      got += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) {
      return makeError(ErrorCode::kRemoteError, "shrink: rank %d closed the connection before sending %s", peer, what);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return makeError(ErrorCode::kRemoteError, "shrink: receiving %s from rank %d failed: %s", what, peer,
                       std::strerror(errno));
    }
    Status stop;
    if (!readableOrStopped(fd, deadline, &stop)) {
      if (!stop.isOk()) return stop;
      return makeError(ErrorCode::kTimeout, "shrink: rank %d sent no %s within the deadline", peer, what);
    }
  }
  return Status::ok();
}

template <typename T>
Status recvValue(int fd, T* v, Deadline deadline, const char* what, int peer) {
  return recvExact(fd, v, sizeof(T), deadline, what, peer);
}

/// One length-prefixed contribution (u64 length, bytes).
Result<Bytes> recvFrame(int fd, Deadline deadline, int peer) {
  uint64_t len = 0;
  FERRY_TRY(recvValue(fd, &len, deadline, "a round's length", peer));
  if (len > kMaxRoundBytes) {
    return makeError(ErrorCode::kRemoteError, "shrink: rank %d announced a %llu-byte contribution (at most %zu)", peer,
                     static_cast<unsigned long long>(len), kMaxRoundBytes);
  }
  Bytes b(len);
  if (len > 0) FERRY_TRY(recvExact(fd, b.data(), len, deadline, "a round's bytes", peer));
  return b;
}

void putFrame(Bytes& out, const Bytes& b) {
  uint64_t len = b.size();
  put(out, &len, 8);
  put(out, b.data(), b.size());
}

/// The leader's side of the new communicator's init rounds: gathers every member's bytes, then
/// sends each member all of them.
class LeaderRendezvous final : public Rendezvous {
 public:
  LeaderRendezvous(std::vector<Fd> conns, std::vector<int> members, int newRank)
      : conns_(std::move(conns)), members_(std::move(members)), newRank_(newRank) {}
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline deadline) override {
    const size_t n = members_.size();
    std::vector<Bytes> all(n);
    all[static_cast<size_t>(newRank_)] = mine;
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int>(r) == newRank_) continue;
      auto b = recvFrame(conns_[r].get(), deadline, members_[r]);
      FERRY_TRY(b);
      all[r] = std::move(*b);
    }
    Bytes out;
    uint32_t count = static_cast<uint32_t>(n);
    put(out, &count, 4);
    for (const Bytes& b : all) putFrame(out, b);
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int>(r) == newRank_) continue;
      FERRY_TRY(sendBytes(conns_[r].get(), out, deadline, "the round's contributions", members_[r]));
    }
    return all;
  }

 private:
  std::vector<Fd> conns_;  ///< indexed by new rank; the leader's own entry is empty
  std::vector<int> members_;
  int newRank_;
};

class MemberRendezvous final : public Rendezvous {
 public:
  MemberRendezvous(Fd conn, int leader, size_t n) : conn_(std::move(conn)), leader_(leader), n_(n) {}
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline deadline) override {
    Bytes frame;
    putFrame(frame, mine);
    FERRY_TRY(sendBytes(conn_.get(), frame, deadline, "its contribution", leader_));
    uint32_t count = 0;
    FERRY_TRY(recvValue(conn_.get(), &count, deadline, "the round's count", leader_));
    if (count != n_) {
      return makeError(ErrorCode::kRemoteError, "shrink: leader rank %d sent %u contributions, expected %zu", leader_,
                       count, n_);
    }
    std::vector<Bytes> all;
    for (uint32_t i = 0; i < count; ++i) {
      auto b = recvFrame(conn_.get(), deadline, leader_);
      FERRY_TRY(b);
      all.push_back(std::move(*b));
    }
    return all;
  }

 private:
  Fd conn_;
  int leader_;
  size_t n_;
};

/// What a joiner sends the leader first.
Bytes helloFrame(const bootstrap::Secret& leaderSecret, uint64_t commId, int rank, const std::vector<int>& exclude) {
  Bytes b;
  put(b, &kHelloMagic, 4);
  put(b, leaderSecret.bytes.data(), leaderSecret.bytes.size());
  put(b, &commId, 8);
  int32_t r = rank;
  put(b, &r, 4);
  uint32_t n = static_cast<uint32_t>(exclude.size());
  put(b, &n, 4);
  for (int e : exclude) {
    int32_t v = e;
    put(b, &v, 4);
  }
  return b;
}

/// The leader's answer: ok and the members, or the error every member then returns.
Bytes replyFrame(const Status& st, const std::vector<int>& members, const std::vector<int>& gone) {
  Bytes b;
  put(b, &kReplyMagic, 4);
  int32_t code = static_cast<int32_t>(st.code());
  put(b, &code, 4);
  std::string msg = st.message().substr(0, 4096);
  uint32_t len = static_cast<uint32_t>(msg.size());
  put(b, &len, 4);
  put(b, msg.data(), msg.size());
  for (const std::vector<int>* v : {&members, &gone}) {
    uint32_t n = static_cast<uint32_t>(v->size());
    put(b, &n, 4);
    for (int r : *v) {
      int32_t x = r;
      put(b, &x, 4);
    }
  }
  return b;
}

Result<std::vector<int>> recvRanks(int fd, Deadline deadline, int peer, size_t limit) {
  uint32_t n = 0;
  FERRY_TRY(recvValue(fd, &n, deadline, "a rank count", peer));
  if (n > limit) {
    return makeError(ErrorCode::kRemoteError, "shrink: rank %d sent a list of %u ranks (at most %zu)", peer, n, limit);
  }
  std::vector<int32_t> v(n);
  if (n > 0) FERRY_TRY(recvExact(fd, v.data(), 4 * size_t{n}, deadline, "a rank list", peer));
  return std::vector<int>(v.begin(), v.end());
}

}  // namespace

Result<ShrinkGreeting> readShrinkGreeting(int fd, const bootstrap::Secret& secret, uint64_t commId, int size,
                                          Deadline deadline) {
  uint32_t magic = 0;
  FERRY_TRY(recvValue(fd, &magic, deadline, "a greeting", -1));
  if (magic != kHelloMagic) return makeError(ErrorCode::kRemoteError, "not a shrink greeting (magic %08x)", magic);
  bootstrap::Secret s;
  FERRY_TRY(recvExact(fd, s.bytes.data(), s.bytes.size(), deadline, "the secret", -1));
  if (!(s == secret)) return makeError(ErrorCode::kRemoteError, "wrong secret");
  uint64_t id = 0;
  int32_t rank = -1;
  FERRY_TRY(recvValue(fd, &id, deadline, "the communicator id", -1));
  FERRY_TRY(recvValue(fd, &rank, deadline, "the rank", -1));
  if (id != commId) {
    return makeError(ErrorCode::kRemoteError, "greeting for communicator %016llx, this is %016llx",
                     static_cast<unsigned long long>(id), static_cast<unsigned long long>(commId));
  }
  if (rank < 0 || rank >= size) return makeError(ErrorCode::kRemoteError, "greeting from rank %d of %d", rank, size);
  auto ex = recvRanks(fd, deadline, rank, static_cast<size_t>(size));
  FERRY_TRY(ex);
  return ShrinkGreeting{rank, std::move(*ex)};
}

Result<ShrinkReply> readShrinkReply(int fd, int leader, Deadline deadline) {
  uint32_t magic = 0;
  FERRY_TRY(recvValue(fd, &magic, deadline, "the membership", leader));
  if (magic != kReplyMagic) {
    return makeError(ErrorCode::kRemoteError, "shrink: rank %d answered with magic %08x", leader, magic);
  }
  int32_t code = 0;
  uint32_t len = 0;
  FERRY_TRY(recvValue(fd, &code, deadline, "the outcome", leader));
  FERRY_TRY(recvValue(fd, &len, deadline, "the outcome", leader));
  if (len > 4096) return makeError(ErrorCode::kRemoteError, "shrink: rank %d sent a %u-byte message", leader, len);
  std::string msg(len, '\0');
  if (len > 0) FERRY_TRY(recvExact(fd, msg.data(), len, deadline, "the outcome", leader));
  auto members = recvRanks(fd, deadline, leader, kMaxRanks);
  FERRY_TRY(members);
  auto gone = recvRanks(fd, deadline, leader, kMaxRanks);
  FERRY_TRY(gone);
  ShrinkReply out;
  if (code != 0) {
    ErrorCode ec = code > 0 && code <= static_cast<int32_t>(ErrorCode::kAborted) ? static_cast<ErrorCode>(code)
                                                                                 : ErrorCode::kRemoteError;
    out.status = makeError(ec, "%s (from the leader, rank %d)", msg.c_str(), leader);
  }
  out.members = std::move(*members);
  out.gone = std::move(*gone);
  return out;
}

namespace {

/// Whether rank `r`'s listener still accepts connections (its process lives).
bool listening(const ShrinkContact& c, Deadline deadline) {
  if (!c.valid) return false;
  return bootstrap::connectWithRetry(c.addr, capped(deadline, kConnectSeconds)).isOk();
}

Result<ShrinkMembership> lead(int rank, uint64_t commId, const std::vector<int>& exclude, ShrinkListener& mine,
                              const std::vector<ShrinkContact>& contacts, Deadline deadline) {
  const int size = static_cast<int>(contacts.size());
  std::set<int> waiting;
  for (int r = 0; r < size; ++r) {
    if (r != rank && !std::binary_search(exclude.begin(), exclude.end(), r)) waiting.insert(r);
  }
  std::map<int, Fd> joined;
  std::vector<int> gone;
  Status failure;
  Clock::time_point nextProbe = Clock::now() + std::chrono::milliseconds(200);
  FERRY_INFO(log::kInit, "shrink: rank %d leads; waiting for %zu ranks (excluded: %s)", rank, waiting.size(),
             rankList(exclude).c_str());
  while (!waiting.empty() && failure.isOk()) {
    failure = stopRequested();
    if (!failure.isOk()) break;
    if (deadline.expired()) {
      std::vector<int> late(waiting.begin(), waiting.end());
      failure = makeError(ErrorCode::kTimeout,
                          "shrink: ranks %s neither joined within %.1f s nor are gone (their listeners still accept "
                          "connections); every remaining rank must call shrink, with the same exclude list",
                          rankList(late).c_str(), config().timeout);
      break;
    }
    pollfd p{mine.fd(), POLLIN, 0};
    (void)::poll(&p, 1, bootstrap::pollTimeoutMs(std::min(deadline.at(), nextProbe), 100));
    for (;;) {
      SocketAddress from;
      int err = 0;
      Fd c = bootstrap::acceptOne(mine.fd(), &from, &err);
      if (!c.valid()) break;
      // A probe (a leader candidate checking this rank lives) sends nothing and closes.
      auto h = readShrinkGreeting(c.get(), mine.contact().secret, commId, size, capped(deadline, 2.0));
      if (!h.isOk()) {
        FERRY_INFO(log::kInit, "shrink: dropped a connection from %s: %s", from.toString().c_str(),
                   h.status().message().c_str());
        continue;
      }
      if (h->exclude != exclude) {
        failure = makeError(ErrorCode::kInvalidUsage,
                            "shrink: ranks disagree on the ranks to exclude: rank %d excludes [%s], rank %d excludes "
                            "[%s] (every remaining rank must pass the same list)",
                            rank, rankList(exclude).c_str(), h->rank, rankList(h->exclude).c_str());
        joined[h->rank] = std::move(c);
        break;
      }
      if (waiting.erase(h->rank) == 0) {
        Status st = makeError(ErrorCode::kInvalidUsage, "shrink: rank %d joined %s", h->rank,
                              std::binary_search(exclude.begin(), exclude.end(), h->rank)
                                  ? "although every rank excludes it"
                                  : "twice, or after it was found gone");
        (void)sendBytes(c.get(), replyFrame(st, {}, {}), Deadline::after(0.5), "an error", h->rank);
        FERRY_WARN(log::kInit, "%s", st.message().c_str());
        continue;
      }
      joined[h->rank] = std::move(c);
    }
    if (Clock::now() >= nextProbe && failure.isOk()) {
      std::vector<int> check(waiting.begin(), waiting.end());
      for (int r : check) {
        if (listening(contacts[static_cast<size_t>(r)], deadline)) continue;
        FERRY_INFO(log::kInit, "shrink: rank %d is gone (its listener at %s refuses connections); left out", r,
                   contacts[static_cast<size_t>(r)].addr.toString().c_str());
        waiting.erase(r);
        gone.push_back(r);
      }
      nextProbe = Clock::now() + std::chrono::milliseconds(500);
    }
  }
  std::vector<int> members{rank};
  for (auto& [r, fd] : joined) members.push_back(r);
  std::sort(members.begin(), members.end());
  std::sort(gone.begin(), gone.end());
  for (auto& [r, fd] : joined) {
    Status st = sendBytes(fd.get(), replyFrame(failure, members, gone), deadline, "the membership", r);
    if (!st.isOk() && failure.isOk()) failure = st;
  }
  FERRY_TRY(failure);
  ShrinkMembership out;
  out.members = members;
  out.gone = gone;
  out.newRank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  std::vector<Fd> conns(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] != rank) conns[i] = std::move(joined[members[i]]);
  }
  out.rendezvous = std::make_unique<LeaderRendezvous>(std::move(conns), members, out.newRank);
  return out;
}

/// Join through candidate leader `leader`: the membership, or an error from the leader; a
/// connection the leader closes before answering comes back as kRemoteError.
Result<ShrinkMembership> join(int rank, uint64_t commId, const std::vector<int>& exclude, int leader,
                              const ShrinkContact& c, Fd conn, Deadline deadline) {
  FERRY_TRY(sendBytes(conn.get(), helloFrame(c.secret, commId, rank, exclude), deadline, "its greeting", leader));
  auto reply = readShrinkReply(conn.get(), leader, deadline);
  FERRY_TRY(reply);
  FERRY_TRY(reply->status);
  std::vector<int>& members = reply->members;
  auto at = std::find(members.begin(), members.end(), rank);
  if (at == members.end() || members.front() != leader) {
    return makeError(ErrorCode::kRemoteError, "shrink: leader rank %d sent members [%s] without rank %d", leader,
                     rankList(members).c_str(), rank);
  }
  ShrinkMembership out;
  out.members = std::move(members);
  out.gone = std::move(reply->gone);
  out.newRank = static_cast<int>(at - out.members.begin());
  out.rendezvous = std::make_unique<MemberRendezvous>(std::move(conn), leader, out.members.size());
  return out;
}

}  // namespace

Bytes ShrinkContact::serialize() const {
  Bytes b;
  uint8_t v = valid ? 1 : 0;
  put(b, &v, 1);
  std::string a = valid ? addr.toString() : std::string();
  uint16_t len = static_cast<uint16_t>(a.size());
  put(b, &len, 2);
  put(b, a.data(), a.size());
  put(b, secret.bytes.data(), secret.bytes.size());
  return b;
}

Result<ShrinkContact> ShrinkContact::deserialize(const Bytes& b, int rank) {
  ShrinkContact c;
  uint16_t len = 0;
  if (b.size() < 3 || (std::memcpy(&len, b.data() + 1, 2), b.size() != 3 + size_t{len} + c.secret.bytes.size())) {
    return makeError(ErrorCode::kInternalError, "rank %d published a malformed shrink contact (%zu bytes)", rank,
                     b.size());
  }
  std::memcpy(c.secret.bytes.data(), b.data() + 3 + len, c.secret.bytes.size());
  if (b[0] == 0) return c;
  // Ranks publish the numeric address they bound: anything else (a name would go to DNS) is refused.
  const std::string text(b.begin() + 3, b.begin() + 3 + len);
  const size_t colon = text.rfind(':');
  std::string host = colon == std::string::npos ? std::string() : text.substr(0, colon);
  const bool v6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (v6) host = host.substr(1, host.size() - 2);
  uint8_t raw[16];
  if (host.empty() || inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), raw) != 1) {
    return makeError(ErrorCode::kInternalError, "rank %d published a shrink address that is not numeric", rank);
  }
  auto a = SocketAddress::parse(text);
  if (!a.isOk()) {
    return makeError(ErrorCode::kInternalError, "rank %d published a bad shrink address: %s", rank,
                     a.status().message().c_str());
  }
  c.addr = *a;
  c.valid = true;
  return c;
}

Result<std::unique_ptr<ShrinkListener>> ShrinkListener::open(const SocketAddress& bind) {
  auto l = std::make_unique<ShrinkListener>();
  SocketAddress bound;
  auto fd = bootstrap::listenOn(bind, &bound);
  FERRY_TRY(fd);
  l->fd_ = std::move(*fd);
  l->contact_.addr = bound;
  l->contact_.secret = bootstrap::Secret::random();
  l->contact_.valid = true;
  return l;
}

Result<ShrinkMembership> gatherSurvivors(int rank, uint64_t commId, const std::vector<int>& exclude,
                                         ShrinkListener& mine, const std::vector<ShrinkContact>& contacts,
                                         Deadline deadline, const std::function<Status()>& stop) {
  struct StopScope {
    const std::function<Status()>* saved = tStop;
    explicit StopScope(const std::function<Status()>* s) { tStop = s; }
    ~StopScope() { tStop = saved; }
  } scope(&stop);
  // The lowest rank alive that nobody excludes leads; a candidate that closes on this rank before
  // answering (it died meanwhile) passes the lead on.
  for (int r = 0; r < rank; ++r) {
    if (std::binary_search(exclude.begin(), exclude.end(), r)) continue;
    const ShrinkContact& c = contacts[static_cast<size_t>(r)];
    if (!c.valid) continue;
    auto conn = bootstrap::connectWithRetry(c.addr, capped(deadline, kConnectSeconds));
    if (!conn.isOk()) {
      FERRY_INFO(log::kInit, "shrink: rank %d does not answer at %s; it cannot lead", r, c.addr.toString().c_str());
      continue;
    }
    auto m = join(rank, commId, exclude, r, c, std::move(*conn), deadline);
    if (m.isOk() || m.status().code() != ErrorCode::kRemoteError || listening(c, deadline)) return m;
    FERRY_INFO(log::kInit, "shrink: candidate leader rank %d went away: %s", r, m.status().message().c_str());
  }
  return lead(rank, commId, exclude, mine, contacts, deadline);
}

}  // namespace ferry
