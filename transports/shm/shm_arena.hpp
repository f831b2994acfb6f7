// The shared-memory Arena: one segment per rank (counter, headers, mailboxes), futex wake-ups for
// sleeping waiters, and cross-memory attach (process_vm_readv) for single-copy reads.
#pragma once

#include <memory>

#include "transports/arena.hpp"

namespace ferry::transport::shm {

struct ArenaOptions {
  int rank = 0;
  int size = 1;
  /// Unique per communicator and identical on all ranks (segment names derive from it).
  uint64_t commId = 0;
  /// Bytes of each of a rank's two mailboxes (rounded up to a page).
  size_t slotBytes = size_t{1} << 20;
  /// How long a wait spins before it sleeps in the kernel. Spinning wins when every rank has a
  /// core; when ranks outnumber cores it only burns the time of the peer being waited for.
  int64_t spinNs = 20000;
  /// How long a wait then yields the core before it sleeps in the kernel.
  int64_t yieldNs = 200000;
  /// Then sleep in short timed naps (2 us doubling to 100 us) instead of a futex wait that the
  /// poster must wake: better when ranks outnumber cores.
  bool pollSleep = false;
  /// Move the plain buffers peers read with cross-memory attach onto huge pages when they are
  /// offered again (huge_pages.hpp): reads from them then run at memcpy's rate.
  bool hugePages = true;
};

/// All ranks must run on this host in one pid namespace. Segments are memfds (segment.hpp): nothing
/// is named, so nothing outlives the processes; sealed() closes the descriptor peers open them by.
Result<std::unique_ptr<Arena>> createShmArena(const ArenaOptions& options);

}  // namespace ferry::transport::shm
