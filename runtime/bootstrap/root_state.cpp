// RootState: the rules of the rendezvous (vocabulary in root_state.hpp).
//
// Every refusal and failure is phrased for the rank that reads it: what it sent, what the root
// expected, and which other rank is to blame. Refusals are also logged at WARN on the root, since
// the refused client may be a stranger that will never read its reply.
#include "runtime/bootstrap/root_state.hpp"

#include <algorithm>
#include <cstdio>

#include "base/log.hpp"

namespace ferry::bootstrap {

std::string describeRanks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

Status RootState::checkClaim(const std::string& peer, const Claim& c) const {
  if (!failure_.isOk()) {
    return Status(failure_.code(), "the job already failed: " + failure_.message());
  }
  if (c.size == 0 || c.size > static_cast<uint32_t>(wire::kMaxWorldSize)) {
    return makeError(ErrorCode::kInvalidArgument, "world size %u is out of range (expected 1 to %d)", c.size,
                     wire::kMaxWorldSize);
  }
  if (c.rank >= c.size) {
    return makeError(ErrorCode::kInvalidArgument, "rank %u is out of range for world size %u (expected 0 to %u)",
                     c.rank, c.size, c.size - 1);
  }
  if (size_ == 0) return Status::ok();
  if (c.size != static_cast<uint32_t>(size_)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "rank %u says the world size is %u but rank 0's configuration says it is %d; expected %d", c.rank,
                     c.size, size_, size_);
  }
  const Slot& slot = slots_[c.rank];
  if (slot.state == SlotState::kConnected) {
    return makeError(ErrorCode::kInvalidUsage,
                     "rank %u is already registered by %s (expected each rank of %d exactly once; this "
                     "connection came from %s)",
                     c.rank, slot.peer.c_str(), size_, peer.c_str());
  }
  if (slot.state == SlotState::kLeft) {
    return makeError(ErrorCode::kInvalidUsage,
                     "rank %u already registered (from %s) and left the rendezvous; a rank cannot join twice", c.rank,
                     slot.peer.c_str());
  }
  return Status::ok();
}

void RootState::refuse(uint64_t conn, const std::string& peer, const Status& why) {
  FERRY_WARN(log::kBootstrap, "refusing connection from %s: %s", peer.c_str(), why.message().c_str());
  sink_.reply(conn, wire::encodeError(why));
  sink_.refuse(conn);
}

void RootState::hello(uint64_t conn, const std::string& peer, const Claim& c, wire::OutFrame welcome) {
  Status verdict = checkClaim(peer, c);
  if (!verdict.isOk()) {
    FERRY_WARN(log::kBootstrap, "refusing connection from %s (claims rank %u of %u): %s", peer.c_str(), c.rank, c.size,
               verdict.message().c_str());
    sink_.reply(conn, wire::encodeError(verdict));
    sink_.refuse(conn);
    return;
  }
  if (size_ == 0 && c.rank != 0) {
    FERRY_INFO(log::kBootstrap, "rank %u (of %u, from %s) waits for rank 0 to set the world size", c.rank, c.size,
               peer.c_str());
    parked_.push_back(Parked{conn, peer, c, std::move(welcome)});
    return;
  }
  if (size_ == 0) {
    size_ = static_cast<int>(c.size);
    slots_.assign(static_cast<size_t>(size_), Slot{});
  }
  admit(conn, peer, c, std::move(welcome));
  // Rank 0 fixed the size: judge the parked claims in the order they came.
  std::vector<Parked> waiting = std::move(parked_);
  parked_.clear();
  for (Parked& p : waiting) hello(p.conn, p.peer, p.claim, std::move(p.welcome));
}

void RootState::forget(uint64_t conn) {
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(), [conn](const Parked& p) { return p.conn == conn; }),
                parked_.end());
}

void RootState::admit(uint64_t conn, const std::string& peer, const Claim& c, wire::OutFrame welcome) {
  Slot& slot = slots_[c.rank];
  slot.state = SlotState::kConnected;
  slot.conn = conn;
  slot.peer = peer;
  ++connected_;
  FERRY_INFO(log::kBootstrap, "rank %u of %d registered from %s (%d connected)", c.rank, size_, peer.c_str(),
             connected_);
  sink_.admit(conn, static_cast<int>(c.rank));
  sink_.reply(conn, std::move(welcome));
}

void RootState::gather(int rank, wire::GatherRequest req) {
  Slot& slot = slots_[static_cast<size_t>(rank)];
  if (!failure_.isOk()) {
    sink_.reply(slot.conn, wire::encodeError(failure_));
    return;
  }
  const auto round = static_cast<unsigned long long>(round_);
  if (req.round != round_ || slot.arrived) {
    failRound(makeError(ErrorCode::kMismatch,
                        "rank %d sent allGather round %llu while the rendezvous is at round %llu%s: all ranks "
                        "must call allGather and barrier the same number of times",
                        rank, static_cast<unsigned long long>(req.round), round,
                        slot.arrived ? " (and it already contributed to it)" : ""),
              rank);
    return;
  }
  if (roundBytes_ + req.data.size() > wire::kMaxRoundBytes) {
    failRound(makeError(ErrorCode::kInvalidArgument,
                        "allGather round %llu exceeds %zu bytes in all when rank %d adds %zu bytes to %zu; "
                        "expected a smaller exchange",
                        round, wire::kMaxRoundBytes, rank, req.data.size(), roundBytes_),
              rank);
    return;
  }
  const auto now = Clock::now();
  if (arrived_ == 0) roundStart_ = now;
  if (req.deadlineMs != wire::kNoDeadline) {
    roundDeadline_ = std::min(roundDeadline_, now + std::chrono::milliseconds(req.deadlineMs));
  }
  slot.arrived = true;
  slot.data = std::move(req.data);
  roundBytes_ += slot.data.size();
  ++arrived_;
  if (arrived_ == size_) {
    completeRound();
    return;
  }
  // A rank that already left can never contribute: fail now instead of at the deadline.
  for (int r = 0; r < size_; ++r) {
    if (slots_[static_cast<size_t>(r)].state == SlotState::kLeft) {
      failRound(makeError(ErrorCode::kRemoteError,
                          "rank %d disconnected from the rendezvous before allGather round %llu, which rank %d "
                          "is waiting for",
                          r, round, rank));
      return;
    }
  }
}

void RootState::completeRound() {
  std::vector<std::vector<uint8_t>> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = std::move(slots_[static_cast<size_t>(r)].data);
  // One buffer shared by every connection's send queue.
  wire::OutFrame reply = wire::encodeGatherReply(round_, all);
  for (auto& slot : slots_) {
    sink_.reply(slot.conn, reply);
    slot.arrived = false;
    slot.data.clear();
  }
  FERRY_TRACE(log::kBootstrap, "allGather round %llu complete (%zu bytes from %d ranks)",
              static_cast<unsigned long long>(round_), roundBytes_, size_);
  ++round_;
  arrived_ = 0;
  roundBytes_ = 0;
  roundDeadline_ = Clock::time_point::max();
}

void RootState::failRound(Status why, int alsoTell) {
  failure_ = why;
  FERRY_WARN(log::kBootstrap, "%s", why.message().c_str());
  wire::OutFrame frame = wire::encodeError(why);
  for (int r = 0; r < size_; ++r) {
    Slot& slot = slots_[static_cast<size_t>(r)];
    if (slot.state == SlotState::kConnected && (slot.arrived || r == alsoTell)) sink_.reply(slot.conn, frame);
    slot.arrived = false;
    slot.data.clear();
  }
  arrived_ = 0;
  roundBytes_ = 0;
  roundDeadline_ = Clock::time_point::max();
}

void RootState::disconnected(int rank) {
  Slot& slot = slots_[static_cast<size_t>(rank)];
  slot.state = SlotState::kLeft;
  --connected_;
  ++left_;
  FERRY_INFO(log::kBootstrap, "rank %d (%s) left the rendezvous (%d of %d still connected)", rank, slot.peer.c_str(),
             connected_, size_);
  if (failure_.isOk() && arrived_ > 0) {
    failRound(makeError(ErrorCode::kRemoteError,
                        "rank %d disconnected from the rendezvous (from %s) before allGather round %llu completed",
                        rank, slot.peer.c_str(), static_cast<unsigned long long>(round_)));
  }
}

std::string RootState::timeoutMessage() const {
  std::vector<int> missing;
  std::vector<int> came;
  std::vector<int> neverConnected;
  for (int r = 0; r < size_; ++r) {
    const Slot& slot = slots_[static_cast<size_t>(r)];
    (slot.arrived ? came : missing).push_back(r);
    if (slot.state == SlotState::kAbsent) neverConnected.push_back(r);
  }
  char head[96];
  std::snprintf(head, sizeof(head), "rendezvous timed out after %.1f s: ", secondsSince(roundStart_));
  std::string msg = head + describeRanks(missing) + " (of " + std::to_string(size_) + ") never arrived (" +
                    describeRanks(came) + " did)";
  if (!neverConnected.empty()) msg += "; " + describeRanks(neverConnected) + " never connected to the root";
  return msg;
}

void RootState::tick() {
  if (arrived_ > 0 && Clock::now() >= roundDeadline_) failRound(Status(ErrorCode::kTimeout, timeoutMessage()));
}

Clock::time_point RootState::nextDeadline() const { return arrived_ > 0 ? roundDeadline_ : Clock::time_point::max(); }

bool RootState::finished() const {
  return (size_ > 0 && left_ == size_ && parked_.empty()) || (!failure_.isOk() && connected_ == 0);
}

}  // namespace ferry::bootstrap
