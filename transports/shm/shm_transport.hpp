// The shared-memory transport: ranks of one host talk through rings in shared segments, and large
// messages move with one copy straight from the sender's buffer (cross-memory attach).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "ferry/status.hpp"
#include "transports/transport.hpp"

namespace ferry::transport::shm {

struct ShmOptions {
  int rank = 0;
  int size = 1;
  /// Unique per communicator and identical on all ranks (segment names derive from it).
  uint64_t commId = 0;
  /// Move rendezvous send buffers onto huge pages when they are sent again (huge_pages.hpp).
  bool hugePages = true;
  /// Read large messages straight from the sender's memory (process_vm_readv) where the kernel
  /// permits, probed per peer when connecting; false: never, every message then comes through the
  /// rings (two copies), as it does from a peer whose memory this rank may not read.
  bool singleCopy = true;
};

/// All peers must run on this host (same pid namespace). Segments are memfds (segment.hpp): nothing
/// is named, so nothing outlives the processes; sealed() closes the descriptor peers open them by.
Result<std::unique_ptr<Transport>> createShmTransport(const ShmOptions& options);

}  // namespace ferry::transport::shm
