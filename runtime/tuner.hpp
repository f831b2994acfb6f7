// The tuner: which algorithm, protocol and chunk size each call uses.
//
// An alpha-beta-gamma model over the measured host constants (host_model.hpp): each candidate's
// time is its synchronisations times the flag hand-off latency, plus the bytes each rank copies,
// reads across processes and reduces, divided by the measured rates, with a penalty per
// cross-memory call; when ranks outnumber cores the per-rank work is multiplied by ranks/cores and
// hand-offs cost a kernel wake-up. Where the ranks' buffers are shared memory (ferry::hostAlloc),
// reading a peer's buffer costs a copy at the memory rate and reducing from it nothing extra.
// The cheapest allowed candidate wins. Choices are cached per
// (collective, bytes) and, with FERRY_DEBUG_SUBSYS=TUNE, logged once each with every candidate's
// predicted time. Every rank computes the same plan from the same inputs (rank 0's model).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/op.hpp"
#include "ferry/status.hpp"
#include "runtime/host_model.hpp"

namespace ferry {

struct TunerInputs {
  int ranks = 1;
  bool arena = false;       ///< every rank on this host, shared memory attached
  bool cma = false;         ///< single-copy reads work between every pair
  size_t mailboxBytes = 0;  ///< bytes of one mailbox
  size_t sharedMinBytes = size_t{32} << 20;  ///< FERRY_SHARED_MIN_BYTES (coll::Context::sharedMinBytes)
  int ranksOnHost = 1;
  HostModel model;
};

class Tuner {
 public:
  /// `algo` and `proto` as the FERRY_ALGO and FERRY_PROTO knobs; `chunkBytes` 0 for automatic.
  /// Errors name the knob and the value it did not understand.
  static Result<Tuner> create(const TunerInputs& in, const std::string& algo, const std::string& proto,
                              int64_t chunkBytes);

  /// The plan for one call (count > 0). `shared`: the ranks' buffers were all in shared memory
  /// in the last call that looked (coll::Context::peersShared), so peers' buffers map.
  coll::Plan choose(const coll::OpDesc& d, bool shared = false);

  /// One candidate and its predicted time, for logs and tests.
  struct Candidate {
    coll::Plan plan;
    double seconds;  ///< predicted; infinity when not applicable
    bool allowed;
  };
  std::vector<Candidate> candidates(coll::OpKind kind, size_t bytes, bool shared = false) const;

 private:
  Tuner() = default;
  bool allowed(coll::OpKind kind, coll::Algorithm a, coll::Protocol p) const;

  TunerInputs in_;
  size_t chunk_ = 0;
  // Allowed algorithms per collective (bit per Algorithm value); 0 = any. Index 0: every collective.
  uint32_t algoMask_[9] = {};
  uint32_t protoMask_ = 0;
  std::map<std::tuple<int, size_t, bool>, coll::Plan> cache_;
};

}  // namespace ferry
