// The measured cost constants of this host, for the tuner's alpha-beta-gamma model.
//
// Measured once per host (about 0.2 s) the first time a communicator with several ranks on one
// host is built, and cached in a small text file keyed by the host's identity; rank 0 measures or
// loads it and hands it to every rank at init, so all ranks of a communicator plan with the same
// numbers (they must: a plan is a protocol between them).
#pragma once

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry {

struct HostModel {
  double syncSpin = 0;   ///< seconds for a flag store to be seen by a spinning peer on another core
  double syncSleep = 0;  ///< seconds for a flag store to wake a peer sleeping in the kernel
  double copyBw = 0;     ///< memcpy, bytes per second, buffers larger than the caches
  double copyBwCache = 0;  ///< memcpy, bytes per second, buffers of one chunk (l2Bytes / 8) that stay in the L2
  double reduceBw = 0;   ///< float32 sum of two inputs into an output, output bytes per second
  double reduceBwCache = 0;  ///< the same on buffers of one chunk that stay in the L2
  double cmaBw = 0;      ///< cross-memory attach reads, bytes per second
  double cmaCall = 0;    ///< seconds per cross-memory attach call, beyond its bytes (a 64-byte read)
  int64_t l2Bytes = 0;   ///< per-core cache the read-and-reduce chunks should fit
  int cores = 0;         ///< cores this process may run on

  /// "sync 0.2/8.1 us, copy 17.9 GB/s, reduce 12.0 GB/s, cma 15.1 GB/s + 1.2 us, L2 2 MiB, 2 cores".
  std::string describe() const;
  std::vector<uint8_t> serialize() const;
  static Result<HostModel> deserialize(const std::vector<uint8_t>& bytes);
};

/// The network between hosts, measured when a communicator spanning hosts is built
/// (runtime/hierarchy.cpp): a message of b bytes over one stream takes alpha + b * beta.
struct NetLevel {
  double alpha = 0;  ///< seconds per message (half a round trip)
  double beta = 0;   ///< seconds per byte over one stream
  bool measured = false;
};

/// The cached model for `hostKey`, or a fresh measurement (then cached). `cacheFile` as the
/// FERRY_TUNE_FILE knob: empty for the default location, "none" to skip the cache.
/// `cpus`: the CPUs the host's ranks have between them (hostCpus()); the model counts them as
/// its cores, and the spinning hand-off runs on two of them.
HostModel loadOrMeasureHostModel(const std::string& hostKey, const std::string& cacheFile, const cpu_set_t& cpus);

/// Measure now (tests, ferry-config), on `cpus`.
HostModel measureHostModel(const cpu_set_t& cpus);

}  // namespace ferry
