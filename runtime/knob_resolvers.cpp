#include "runtime/knob_resolvers.hpp"

#include <algorithm>

#include "base/config.hpp"
#include "runtime/topology.hpp"

namespace ferry {

// Every resolver a FERRY_AUTO row names exists (and is not overloaded).
#define FERRY_AUTO(field, resolver, a, b, rule) static_assert(sizeof(&resolver) > 0);
#include "base/knobs.def"

size_t resolveStreamMinBytes() {
  // An output as large as the last-level cache cannot stay in it until its reader comes.
  static const size_t automatic = [] {
    auto t = discoverTopology();
    if (t.isOk() && t->l3Bytes > 0) return t->l3Bytes * static_cast<size_t>(std::max(t->l3Count, 1));
    if (t.isOk() && t->l2Bytes > 0) return t->l2Bytes * static_cast<size_t>(std::max(t->cores, 1));
    return static_cast<size_t>(knob_auto::streamMinBytes.a);
  }();
  const int64_t v = config().streamMinBytes;
  return v < 0 ? automatic : static_cast<size_t>(v);
}

Result<size_t> resolveHierChunkBytes(int rank, const NetLevel& net, double copyBw) {
  const int64_t v = config().hierChunkBytes;
  if (v < -1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_HIER_CHUNK_BYTES=%lld on rank %d: expected -1 (automatic), 0 (never) or a chunk size in "
                     "bytes",
                     static_cast<long long>(v), rank);
  }
  if (v >= 0) return static_cast<size_t>(v);
  // Chunks overlap the crossing with the intra-host steps: that pays only where the crossing is
  // the call's time (docs/ARCHITECTURE.md, "Several hosts").
  const double slower = static_cast<double>(knob_auto::hierChunkBytes.b);
  const bool slow = net.measured && net.beta > 0 && copyBw > 0 && 1.0 / net.beta * slower <= copyBw;
  return slow ? static_cast<size_t>(knob_auto::hierChunkBytes.a) : 0;
}

int resolveTuneTrials(bool oneHost) {
  // Across hosts a plan's first calls hide the backlog it leaves: more calls a trial there
  // (docs/ARCHITECTURE.md, "Several hosts").
  const int64_t v = config().tuneTrials;
  const int64_t trials = v >= 0 ? v : oneHost ? knob_auto::tuneTrials.a : knob_auto::tuneTrials.b;
  return static_cast<int>(std::clamp<int64_t>(trials, 0, 16));
}

// Spinning wins where every rank has a core; where ranks outnumber cores it burns the time of
// the rank being waited for.
int64_t resolveSpinNs(int ranks, int cores) {
  const int64_t v = config().spinNs;
  return v >= 0 ? v : ranks <= cores ? knob_auto::spinNs.a : knob_auto::spinNs.b;
}

int64_t resolveYieldNs(int ranks, int cores) {
  const int64_t v = config().yieldNs;
  return v >= 0 ? v : ranks <= cores ? knob_auto::yieldNs.a : knob_auto::yieldNs.b;
}

}  // namespace ferry
