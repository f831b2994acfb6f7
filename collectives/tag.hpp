// Layout of the 40 tag bits the transports leave to the caller.
//
//   [39:38] class  (collective, point-to-point, control)
//   [37:24] sequence number of the call, mod 2^14 (diagnostics: "rank 3 is at #12")
//   [23:0]  fingerprint of the call (op.hpp)
// Receives match on the class only: the transport's per-sender ordering already pairs messages of
// consistent ranks, and the other bits are compared after arrival to name a mismatch.
#pragma once

#include <cstdint>

namespace ferry::coll {

/// kControl: error reports (runtime/watchdog.hpp); kStatus: "where does your call stand?" queries
/// and their answers, which a rank that timed out sends to name the ranks behind it.
enum class TagClass : uint64_t { kCollective = 0, kPointToPoint = 1, kControl = 2, kStatus = 3 };

inline constexpr int kSeqBits = 14;
inline constexpr uint64_t kFingerprintMask = (1u << 24) - 1;
inline constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
inline constexpr uint64_t kClassMask = uint64_t{3} << 38;

inline constexpr uint64_t makeTag(TagClass c, uint64_t seq, uint32_t fingerprint) {
  return (static_cast<uint64_t>(c) << 38) | ((seq & kSeqMask) << 24) | (fingerprint & kFingerprintMask);
}
inline constexpr uint32_t tagFingerprint(uint64_t tag) { return static_cast<uint32_t>(tag & kFingerprintMask); }
inline constexpr uint64_t tagSeq(uint64_t tag) { return (tag >> 24) & kSeqMask; }

}  // namespace ferry::coll
