// The measured cost constants of this host, for the tuner's alpha-beta-gamma model.
//
// Measured once per host (about 0.2 s) the first time a communicator with several ranks on one
// host, or one spanning hosts, is built, and cached in a small text file keyed by the host's
// identity; rank 0 measures or loads it and hands it to every rank at init, so all ranks of a
// communicator plan with the same numbers (they must: a plan is a protocol between them).
#pragma once

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/cost_model.hpp"
#include "ferry/status.hpp"

namespace ferry {

/// The cached model for `hostKey`, or a fresh measurement (then cached). `cacheFile` as the
/// FERRY_TUNE_FILE knob: empty for the default location, "none" to skip the cache.
/// `cpus`: the CPUs the host's ranks have between them (hostCpus()); the model counts them as
/// its cores, and the spinning hand-off runs on two of them.
HostModel loadOrMeasureHostModel(const std::string& hostKey, const std::string& cacheFile, const cpu_set_t& cpus);

/// The copy and reduction rates that communicators between hosts price with (one core's, whatever
/// the core count): the cached model for `hostKey` even where it was measured for another number
/// of CPUs (so a communicator of one rank per host does not measure again and overwrite the model
/// its host's arena uses), else loadOrMeasureHostModel's.
HostModel loadHostRates(const std::string& hostKey, const std::string& cacheFile, const cpu_set_t& cpus);

/// Measure now (tests, ferry-config), on `cpus`.
HostModel measureHostModel(const cpu_set_t& cpus);

}  // namespace ferry
