// The one-sided interface the single-host collectives are written against.
//
// An Arena joins the ranks of one host. Each rank owns:
//   - a progress counter that only it advances (post) and every peer can wait on (wait); the
//     collectives encode (call sequence number, phase) in it, so "peer p finished phase k of call
//     s" is one comparison;
//   - two call headers (one per parity of the call sequence number) saying which call the rank is
//     in and which of its buffers peers may read;
//   - two mailboxes (one per parity) of slotBytes() that peers read directly, for small messages;
//   - a ring of small slots, for small one-way messages a sender may post several calls ahead;
//   - a ring of line slots (a few cache lines each, packed): a call of a few bytes travels with
//     its own flag and call description in them (LineHeader), so a reader waits on, checks and
//     copies one slot instead of a counter, a header and a slot on three lines;
//   - with canRead(), its whole address space readable by peers with read() (a single copy from
//     the owner's buffer into the reader's, e.g. cross-memory attach);
//   - the buffers it allocated as shared memory (ferry::hostAlloc), which peers may map and read
//     in place (mapped()): no copy at all for a reduction, a memcpy for a read.
// Double buffering by parity is what lets a rank start call s+1 while a slower peer still reads
// what it published for call s; before it rewrites that mailbox in call s+2 it waits until every
// peer has entered call s+1 (their counters say so), which they do only after finishing call s.
//
// Memory ordering: everything a rank writes to its header and mailbox before post() is visible to
// a peer whose wait() for that post returned (release on post, acquire in wait).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"

namespace ferry::transport {

/// Which call a rank is in, and the buffers of its own address space it lets peers read.
/// Written by its owner before it posts phase 1 of the call.
struct CallHeader {
  std::atomic<uint64_t> seq;  ///< call sequence number; written last (release), read first (acquire)
  uint32_t kind;              ///< the caller's description of the call, compared across ranks
  uint32_t type;
  uint32_t op;
  int32_t root;
  uint64_t count;
  uint32_t algorithm;
  uint32_t protocol;
  uint64_t addr[2];  ///< e.g. the send and the receive buffer
};

/// The start of a line slot (Arena::lineSlot): the call's data follows it in the same slot. Its
/// writer fills the data and `call` and `root`, then stores `seq` (release); a reader that loads
/// `seq` equal to its call's (acquire) may read the rest.
struct LineHeader {
  std::atomic<uint64_t> seq;  ///< call sequence number; 0: never written
  uint32_t call;              ///< the call's kind, type, op, algorithm, protocol and count, packed
  int32_t root;
};
static_assert(sizeof(LineHeader) == 16);

/// The peers of one host as shared memory.
class Arena {
 public:
  virtual ~Arena() = default;

  /// Bytes other ranks need to attach to this rank (exchanged through the bootstrap).
  virtual std::vector<uint8_t> localAddress() const = 0;
  /// Attach to every rank's arena; addrs[r] is rank r's localAddress() (own entry ignored).
  virtual Status connect(const std::vector<std::vector<uint8_t>>& addrs) = 0;
  /// Every rank has attached: release what only setup needed (descriptors peers opened segments by).
  virtual void sealed() = 0;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Bytes of one mailbox.
  virtual size_t slotBytes() const = 0;
  /// Whether read() works between these ranks (checked by connect()).
  virtual bool canRead() const = 0;

  /// Rank `r`'s mailbox for calls of parity `parity`: writable for its owner, readable by all.
  virtual void* slot(int r, int parity) = 0;
  /// Rank `r`'s line slot for call `index` (mod ringDepth()): lineSlotBytes(), 64-byte aligned,
  /// starting with a LineHeader, for one-way calls whose writer may run up to ringDepth() calls
  /// ahead of its readers (small broadcasts).
  virtual void* lineSlot(int r, uint64_t index) = 0;
  virtual size_t lineSlotBytes() const = 0;
  virtual size_t ringDepth() const = 0;
  /// Rank `r`'s eager heap (eagerBytes(), page aligned): the data of one-way calls too big for a
  /// line slot, at offsets their writer chose and put in the call's line slot.
  virtual uint8_t* eagerHeap(int r) = 0;
  virtual size_t eagerBytes() const = 0;
  /// Rank `r`'s header for calls of parity `parity`.
  virtual CallHeader& header(int r, int parity) = 0;

  /// Advance this rank's counter to `value` (monotonic) and wake peers waiting for it.
  virtual void post(uint64_t value) = 0;
  /// Rank `r`'s counter now.
  virtual uint64_t posted(int r) const = 0;
  /// Wait until rank `r`'s counter reaches `target`. Spins briefly, then sleeps in the kernel;
  /// every millisecond or so checks `deadline` (kTimeout) and calls `poll` (its error ends the wait).
  /// With `word` (a word of rank r's segment, e.g. a line slot's seq), the wait also ends when it
  /// reaches `wordTarget`, and its spin polls that word alone: for a peer that writes the word
  /// before it posts `target`, whose sleeping waiters the post wakes.
  virtual Status wait(int r, uint64_t target, Deadline deadline, const std::function<Status()>& poll,
                      const std::atomic<uint64_t>* word = nullptr, uint64_t wordTarget = 0) = 0;

  /// Copy `bytes` from address `remote` of rank `r`'s process into `local` (a memcpy where
  /// mapped() maps them).
  virtual Status read(int r, uint64_t remote, void* local, size_t bytes) = 0;
  /// Where [remote, remote + bytes) of rank `r`'s process is mapped in this one, or null: only
  /// memory the owner allocated as shared memory maps. Valid for the current call.
  virtual const uint8_t* mapped(int r, uint64_t remote, size_t bytes) = 0;
  /// Record 4 bits and a 32-bit digest of this rank's call `seq` (before posting its phase 1)
  /// that peers read with callBits() until this rank is far ahead (over ringDepth() calls):
  /// unlike the two headers, which a rank running two calls ahead rewrites, it outlives any peer
  /// still in call `seq`.
  virtual void noteCall(uint64_t seq, uint32_t bits, uint32_t digest) = 0;
  /// Rank `r`'s bits (and digest, where asked) for call `seq`; false if it has not recorded them
  /// (or recorded far later calls).
  virtual bool callBits(int r, uint64_t seq, uint32_t* bits, uint32_t* digest = nullptr) const = 0;
  /// Compare calls first..last with rank `r`'s log, all expected with `digest`: the first call
  /// that differs (*differs = true) or that `r` has not recorded (*differs = false), or last + 1
  /// when every one matched. One call for a run of calls: a stream's compares read many.
  virtual uint64_t matchCalls(int r, uint64_t first, uint64_t last, uint32_t digest, bool* differs) const = 0;
  /// Whether [addr, addr + bytes) of this process lies in memory peers can map.
  virtual bool mappable(const void* addr, size_t bytes) const = 0;
  /// This rank announces [addr, addr + bytes) for peers to read() in this call: the arena may
  /// prepare it for cheaper reads (never changing its contents). No effect by default.
  virtual void exposeForRead(const void* addr, size_t bytes) {
    (void)addr;
    (void)bytes;
  }
};

}  // namespace ferry::transport
