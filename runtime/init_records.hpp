// What the ranks tell each other at init after who they are (PeerInfo, round 1): where each one
// listens (round 2), that each one is ready (round 3), and, with two levels, the intra-host inputs
// rank 0 hands every rank (agreedLevelTuner). Each record parses what another rank sent: a record
// that runs past its end, or holds a value no rank writes, is refused with an error naming the rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/group_exchange.hpp"
#include "runtime/host_model.hpp"
#include "runtime/shrink.hpp"

namespace ferry {

/// Round 2: where a rank can be reached. A single-rank communicator sends none.
struct AddressRecord {
  Bytes transport;       ///< Transport::localAddress()
  ShrinkContact shrink;  ///< where shrink() finds this rank; not valid when it opened no listener
  Bytes arena;           ///< Arena::localAddress(); empty without an arena

  /// [u32 length][transport address][u32 length][shrink contact][arena address, to the end].
  Bytes serialize() const;
  static Result<AddressRecord> deserialize(const Bytes& bytes, int rank);
};

/// Round 3, the ready barrier: whether single-copy reads from peers' buffers work on this rank, the
/// RDMA ports its transport uses between hosts (every rank then counts each host's links alike),
/// and rank 0's host model, so every rank plans with its numbers.
struct ReadyRecord {
  bool singleCopyReads = false;
  std::string rdmaPorts;  ///< comma-separated ("mlx5_0:1"); empty: none (TCP, the loopback, one host)
  std::optional<HostModel> model;

  /// Longest RDMA port list a rank may send (a device name is at most 64 bytes, and a port few).
  static constexpr uint32_t kMaxPortsBytes = 4096;
  /// [u8 0 or 1][u32 length][the RDMA ports][the host model's text, when there is one].
  Bytes serialize() const;
  static Result<ReadyRecord> deserialize(const Bytes& bytes, int rank);
};

/// Rank 0's intra-host tuner inputs (its host's ranks, mailboxes, model), which every rank of a
/// communicator with two levels prices the intra-host level with (agreedLevelTuner).
struct LevelRecord {
  int ranks = 1;
  uint64_t mailboxBytes = 0;
  bool arena = false;            ///< the level's ranks share an arena; `model` holds its host's numbers
  bool singleCopyReads = false;  ///< and read from each other's buffers in one copy
  HostModel model;

  /// Most bytes a record takes: a host model is a line of text.
  static constexpr uint64_t kMaxBytes = 1u << 20;
  /// [u64 ranks][u64 mailbox bytes][u64 flags: 1 arena, 2 single-copy reads][the host model's text].
  Bytes serialize() const;
  static Result<LevelRecord> deserialize(const Bytes& bytes, int rank);
};

}  // namespace ferry
