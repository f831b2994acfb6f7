// StoreClient: one rank's side of the rendezvous.
//
// The client is a plain request/reply loop on one non-blocking socket, every step bounded by the
// caller's deadline. The root enforces the deadline too (it fails a round at the earliest deadline
// any rank sent and names the missing ranks), so the client's own limit, the deadline plus a small
// grace, only fires when the root itself is dead or hung; that error says so. Any failure of a
// round is sticky: the job's rendezvous is broken and every later call returns the same error.
//
// The handshake (handshake.hpp) never sends the secret: the rank proves it over both nonces and its
// claim, and sends no data until the root has proved the secret in return, so a process squatting
// on the root's address learns nothing and receives nothing.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/log.hpp"
#include "runtime/bootstrap/handshake.hpp"
#include "runtime/bootstrap/socket.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {
namespace {

// How long past its deadline a rank still waits for the root's own timeout report, which names the
// missing ranks and is therefore worth more than the client's bare "no answer".
constexpr std::chrono::milliseconds kGrace(500);

Clock::time_point withGrace(Deadline deadline) {
  if (deadline.at() == Clock::time_point::max()) return deadline.at();
  return deadline.at() + kGrace;
}

}  // namespace

struct StoreClient::Impl {
  Status send(const wire::OutFrame& frame, Clock::time_point until, const char* what);
  Result<wire::Frame> receive(Clock::time_point until, const char* what, size_t maxOk, bool challenge = false);
  Status handshake(const Secret& secret, Clock::time_point until);
  double secondsUntil(Clock::time_point until) const { return std::chrono::duration<double>(until - started).count(); }

  Fd fd;
  std::string root;  // "127.0.0.1:29500", for messages
  int rank = 0;
  int size = 0;
  uint64_t round = 0;
  Status failed;              // sticky
  Clock::time_point started;  // of the current request, for messages
};

Status StoreClient::Impl::send(const wire::OutFrame& frame, Clock::time_point until, const char* what) {
  int err = 0;
  switch (sendAll(fd.get(), *frame, until, &err)) {
    case IoEnd::kDone: return Status::ok();
    case IoEnd::kClosed:
      return makeError(ErrorCode::kRemoteError,
                       "rendezvous root at %s closed the connection while rank %d sent %s; the root process may "
                       "have exited",
                       root.c_str(), rank, what);
    case IoEnd::kTimedOut:
      return makeError(ErrorCode::kTimeout, "rendezvous root at %s did not accept rank %d's %s within %.1f s",
                       root.c_str(), rank, what, secondsUntil(until));
    case IoEnd::kFailed: break;
  }
  return makeError(ErrorCode::kSystemError, "sending %s from rank %d to the rendezvous root at %s failed: %s", what,
                   rank, root.c_str(), std::strerror(err));
}

Result<wire::Frame> StoreClient::Impl::receive(Clock::time_point until, const char* what, size_t maxOk,
                                               bool challenge) {
  wire::FrameReader reader([&](const wire::FrameHeader& h) -> Status {
    size_t limit = 0;
    if (challenge && h.type == static_cast<uint16_t>(wire::MsgType::kChallenge)) {
      limit = wire::kChallengeBytes;
    } else if (!challenge && h.type == static_cast<uint16_t>(wire::MsgType::kOk)) {
      limit = maxOk;
    } else if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
      limit = wire::kMaxErrorBytes;
    } else {
      return makeError(ErrorCode::kRemoteError, "a %s frame, which the root does not send at this point",
                       wire::msgTypeName(h.type).c_str());
    }
    if (h.length > limit) {
      return makeError(ErrorCode::kRemoteError, "a %s frame of %u bytes (at most %zu expected)",
                       wire::msgTypeName(h.type).c_str(), h.length, limit);
    }
    return Status::ok();
  });
  while (!reader.complete()) {
    std::span<uint8_t> space = reader.space();
    ssize_t n = ::recv(fd.get(), space.data(), space.size(), 0);
    if (n > 0) {
      Status ok = reader.commit(static_cast<size_t>(n));
      if (!ok.isOk()) {
        return makeError(ErrorCode::kRemoteError,
                         "rendezvous root at %s answered rank %d's %s with a malformed frame: %s", root.c_str(), rank,
                         what, ok.message().c_str());
      }
      continue;
    }
    if (n == 0) {
      return makeError(ErrorCode::kRemoteError,
                       "rendezvous root at %s closed the connection while rank %d waited for the reply to its %s; "
                       "the root process may have exited%s",
                       root.c_str(), rank, what,
                       challenge ? " or run an older ferry that speaks another protocol version" : "");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitReadable(fd.get(), until)) {
        return makeError(ErrorCode::kTimeout,
                         "rendezvous root at %s did not answer rank %d's %s within %.1f s (its deadline plus %.1f s "
                         "of grace); the root process may be dead or hung",
                         root.c_str(), rank, what, secondsUntil(until), kGrace.count() / 1000.0);
      }
      continue;
    }
    return makeError(ErrorCode::kRemoteError,
                     "receiving the reply to rank %d's %s from the rendezvous root at %s "
                     "failed: %s",
                     rank, what, root.c_str(), std::strerror(errno));
  }
  return reader.take();
}

Result<std::unique_ptr<StoreClient>> StoreClient::connect(const SocketAddress& root, const Secret& secret, int rank,
                                                          int size, Deadline deadline) {
  if (size < 1 || size > wire::kMaxWorldSize) {
    return makeError(ErrorCode::kInvalidArgument, "world size %d is out of range (expected 1 to %d)", size,
                     wire::kMaxWorldSize);
  }
  if (rank < 0 || rank >= size) {
    return makeError(ErrorCode::kInvalidArgument, "rank %d is out of range for world size %d (expected 0 to %d)", rank,
                     size, size - 1);
  }
  auto impl = std::make_unique<Impl>();
  impl->size = size;
  impl->root = root.toString();
  impl->rank = rank;
  impl->size = size;
  impl->started = Clock::now();
  auto connected = connectWithRetry(root, deadline);
  FERRY_TRY(connected);
  impl->fd = std::move(connected.value());

  FERRY_TRY(impl->handshake(secret, withGrace(deadline)));
  FERRY_INFO(log::kBootstrap, "rank %d of %d registered with the root at %s", rank, size, impl->root.c_str());
  return std::unique_ptr<StoreClient>(new StoreClient(std::move(impl)));
}

// HELLO with the rank's nonce, the root's CHALLENGE, AUTH with the rank's proof, the root's proof.
Status StoreClient::Impl::handshake(const Secret& secret, Clock::time_point until) {
  wire::Hello hello;
  hello.nonce = randomNonce();
  FERRY_TRY(send(wire::encodeHello(hello), until, "HELLO"));
  auto challenge = receive(until, "HELLO", 0, true);
  FERRY_TRY(challenge);
  auto refused = [&](const std::vector<uint8_t>& payload) {
    Status why = wire::decodeError(payload);
    return makeError(why.code(), "rendezvous root at %s refused rank %d of %d: %s", root.c_str(), rank, size,
                     why.message().c_str());
  };
  if (challenge->type == wire::MsgType::kError) return refused(challenge->payload);
  auto rootHello = wire::decodeHello(challenge->payload);
  if (!rootHello.isOk() || rootHello->version != wire::kProtocolVersion) {
    return makeError(ErrorCode::kInvalidUsage,
                     "rendezvous root at %s speaks protocol version %u, rank %d speaks %u: all ranks and the root "
                     "must run the same ferry version",
                     root.c_str(), rootHello.isOk() ? rootHello->version : 0u, rank, wire::kProtocolVersion);
  }
  wire::Auth auth;
  auth.claim.rank = static_cast<uint32_t>(rank);
  auth.claim.size = static_cast<uint32_t>(size);
  auth.proof = rankProof(secret, rootHello->nonce, hello.nonce, auth.claim);
  FERRY_TRY(send(wire::encodeAuth(auth), until, "AUTH"));
  auto reply = receive(until, "AUTH", wire::kWelcomeBytes);
  if (!reply.isOk() && reply.status().code() == ErrorCode::kTimeout && rank != 0) {
    // A root that was not told the world size holds every other rank until rank 0 registers.
    return Status(ErrorCode::kTimeout, reply.status().message() +
                                           "; or rank 0 never registered, and a root started without the world "
                                           "size waits for rank 0 to set it");
  }
  FERRY_TRY(reply);
  if (reply->type == wire::MsgType::kError) return refused(reply->payload);
  auto proof = wire::decodeWelcome(reply->payload);
  if (!proof.isOk() || !digestsEqual(*proof, rootProof(secret, rootHello->nonce, hello.nonce, auth.claim))) {
    return makeError(ErrorCode::kRemoteError,
                     "the process at %s could not prove it knows the job secret, so rank %d sends it nothing: "
                     "something other than this job's rendezvous root listens there, or it uses another secret",
                     root.c_str(), rank);
  }
  return Status::ok();
}

StoreClient::StoreClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreClient::~StoreClient() = default;

Result<std::vector<std::vector<uint8_t>>> StoreClient::allGather(const std::vector<uint8_t>& mine, Deadline deadline) {
  Impl& s = *impl_;
  if (!s.failed.isOk()) return s.failed;
  if (mine.size() > wire::kMaxContributionBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "rank %d's allGather contribution of %zu bytes exceeds the store's limit of %zu bytes per rank",
                     s.rank, mine.size(), wire::kMaxContributionBytes);
  }
  char what[64];
  std::snprintf(what, sizeof(what), "allGather round %llu", static_cast<unsigned long long>(s.round));
  s.started = Clock::now();
  int remaining = deadline.remainingMs();
  uint32_t deadlineMs =
      deadline.at() == Clock::time_point::max() ? wire::kNoDeadline : static_cast<uint32_t>(remaining);
  const Clock::time_point until = withGrace(deadline);
  Status sent = s.send(wire::encodeGather(s.round, deadlineMs, mine), until, what);
  if (!sent.isOk()) return s.failed = sent;
  auto reply = s.receive(until, what, wire::maxGatherReplyBytes(s.size));
  if (!reply.isOk()) return s.failed = reply.status();
  if (reply->type == wire::MsgType::kError) return s.failed = wire::decodeError(reply->payload);
  auto all = wire::decodeGatherReply(reply->payload, s.round, s.size);
  if (!all.isOk()) {
    return s.failed = makeError(all.status().code(), "rendezvous root at %s: %s", s.root.c_str(),
                                all.status().message().c_str());
  }
  ++s.round;
  return all;
}

Status StoreClient::barrier(Deadline deadline) {
  auto all = allGather({}, deadline);
  return all.status();
}

}  // namespace ferry::bootstrap
