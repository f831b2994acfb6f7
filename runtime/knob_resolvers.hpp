// The knobs whose default, -1, means automatic: each resolver returns the value in force, the
// knob's own where it is set, else the automatic one. knobs.def declares each beside its knob
// (FERRY_AUTO: the resolver's name, its constants and the rule ferry-config prints).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/status.hpp"
#include "runtime/host_model.hpp"

namespace ferry {

/// FERRY_STREAM_MIN_BYTES in force.
size_t resolveStreamMinBytes();

/// FERRY_HIER_CHUNK_BYTES in force, for a network `net` between the hosts and a memory copy rate
/// `copyBw` (bytes per second) on them. Errors name the value, `rank` and what is expected.
Result<size_t> resolveHierChunkBytes(int rank, const NetLevel& net, double copyBw);

/// FERRY_TUNE_TRIALS in force (0 to 16), on one host or across hosts.
int resolveTuneTrials(bool oneHost);

/// FERRY_SPIN_NS in force for `ranks` ranks sharing `cores` cores.
int64_t resolveSpinNs(int ranks, int cores);

/// FERRY_YIELD_NS in force for `ranks` ranks sharing `cores` cores.
int64_t resolveYieldNs(int ranks, int cores);

}  // namespace ferry
