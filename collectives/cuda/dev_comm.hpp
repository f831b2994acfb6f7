// DevComm: the device handle of a communicator, and the layout of one rank's resource block.
//
// Every rank owns one zero-filled block ("rank resources"). It is cut into one region per channel;
// a channel region holds, for this rank R:
//
//   DirectSlot            R's pointer-exchange slot and completion counter (direct algorithms)
//   ConnCtrl[p], p < n    counters of the connections between R and peer p (both directions)
//   scratch               slotBytes of per-channel scratch (direct reductions over more than 8 ranks)
//   fifo[p]               simple-protocol FIFO of data p sends to R: slots x slotBytes
//   ll[p]                 LL FIFO of data p sends to R: llSlots x (2 x llSlotBytes)
//
// Data always lands in the receiver's memory (a sender writes remotely, a receiver reads locally);
// each counter lives with the rank that reads it, except the private step counters. p == R is a
// real connection (a rank sending to itself goes through its own FIFO).
//
// Memory-ordering notes on every word are at the structs below; kernels.cu has the full design.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/cuda/device.hpp"
#include "collectives/ring_math.hpp"  // FERRY_HOST_DEVICE

namespace ferry::gpu {

/// Pointer exchange of the direct algorithms, one per rank and channel, in that rank's memory.
/// Written only by the owning rank's block (thread 0), read by every peer's block of the channel.
struct DirectSlot {
  /// Sequence number of the direct work whose pointers are below. Stored last, with a volatile
  /// store after __threadfence_system(), so a peer that reads seq == s and then fences sees the
  /// pointers of work s. Peers poll it with volatile loads. Starts at 0; the first work is 1.
  uint64_t seq;
  uint64_t send;  ///< the work's send buffer (address in the shared address space); volatile
  uint64_t recv;  ///< the work's recv buffer; volatile
  /// Channel 0's slot only: claimed (atomicCAS 0 -> 1) by the first thread of this rank whose wait
  /// timed out, so that one thread alone writes the host-mapped DevError.
  uint64_t trapClaim;
  uint64_t pad0[12];
  /// Completion counter: the owner stores s (volatile, after a barrier and a system fence) when its
  /// block has finished every read and write of work s in peers' buffers. A rank leaves work s
  /// only when every peer's done >= s, so it never returns while a peer still touches its buffers,
  /// and a peer never reads a slot being rewritten for work s+1.
  uint64_t done;
  uint64_t pad1[15];
};
static_assert(sizeof(DirectSlot) == 256);

/// Counters of the connections between the owning rank R and peer p (one channel). Remote-written
/// words are 64 bytes apart so that polls of one do not contend with writes of another.
struct ConnCtrl {
  /// Simple protocol, data p -> R: steps p has posted into R's fifo[p]. Written by p (thread 0,
  /// after a block barrier and __threadfence_system(), volatile store); polled by R with volatile
  /// loads, each polling thread fencing before it reads the slot.
  uint64_t head;
  uint64_t pad0[7];
  /// Simple protocol, data R -> p: steps p has consumed from p's fifo[R]. Written by p (thread 0,
  /// after a barrier and a system fence: every read of the slot happens before); polled by R
  /// before it overwrites a slot, fencing after the poll.
  uint64_t tail;
  uint64_t pad1[7];
  /// LL protocol, data R -> p: steps p has consumed from p's ll[R]. Same ordering as tail.
  uint64_t llTail;
  uint64_t pad2[7];
  /// Private to R's block of this channel (thread 0 stores after a barrier; every thread loads at
  /// the start of a work): the next step of each direction and protocol. They persist across
  /// launches, so graph replays continue the sequence.
  uint64_t sendStep, recvStep, llSendStep, llRecvStep;
  uint64_t pad3[4];
};
static_assert(sizeof(ConnCtrl) == 256);

/// Byte offsets inside a rank's block; the same for every rank of a communicator.
struct DevLayout {
  int nRanks = 1;
  int slots = 1;
  int llSlots = 1;
  size_t slotBytes = 0;
  size_t llSlotBytes = 0;  ///< LL payload per slot; the slot itself holds twice as many bytes
  size_t connOffset = 0;   ///< ConnCtrl[0] inside a channel region
  size_t scratchOffset = 0;
  size_t fifoOffset = 0;    ///< fifo[0]
  size_t fifoBytes = 0;     ///< one peer's fifo: slots * slotBytes
  size_t llOffset = 0;      ///< ll[0]
  size_t llBytes = 0;       ///< one peer's LL FIFO: llSlots * 2 * llSlotBytes
  size_t channelBytes = 0;  ///< one channel region (multiple of 256)
};

/// One direction of a connection as this rank uses it (all pointers already resolved).
struct SendEndpoint {
  uint8_t* fifo;         ///< the peer's fifo[me] (remote)
  uint64_t* head;        ///< the peer's ConnCtrl[me].head (remote; I store)
  const uint64_t* tail;  ///< my ConnCtrl[peer].tail (local; the peer stores)
  uint64_t* ll;          ///< the peer's ll[me] (remote), 8-byte LL words
  const uint64_t* llTail;
  uint64_t* step;    ///< my ConnCtrl[peer].sendStep (private)
  uint64_t* llStep;  ///< my ConnCtrl[peer].llSendStep (private)
};
struct RecvEndpoint {
  const uint8_t* fifo;   ///< my fifo[peer] (local)
  const uint64_t* head;  ///< my ConnCtrl[peer].head (local; the peer stores)
  uint64_t* tail;        ///< the peer's ConnCtrl[me].tail (remote; I store)
  const uint64_t* ll;    ///< my ll[peer]
  uint64_t* llTail;      ///< the peer's ConnCtrl[me].llTail (remote; I store)
  uint64_t* step;
  uint64_t* llStep;
};

/// Device view of a communicator: trivially copyable, copied once to device memory by the runtime.
struct DevComm {
  int rank = 0;
  int nRanks = 1;
  int nChannels = 1;
  int oneDevice = 0;          ///< every rank on one GPU: fences at .gpu scope (DevConfig::oneDevice)
  uint64_t timeoutNs = 0;     ///< deadline of every device wait (0: none)
  DevError* error = nullptr;  ///< this rank's host-mapped error record (null: trap without one)
  DevLayout layout;
  uint8_t* bases[kMaxDevRanks] = {};  ///< every rank's resource block, as this rank addresses it

  FERRY_HOST_DEVICE uint8_t* channel(int r, int c) const { return bases[r] + layout.channelBytes * c; }
  FERRY_HOST_DEVICE ConnCtrl* ctrl(int r, int c, int peer) const {
    return reinterpret_cast<ConnCtrl*>(channel(r, c) + layout.connOffset) + peer;
  }
  FERRY_HOST_DEVICE DirectSlot* directSlot(int r, int c) const { return reinterpret_cast<DirectSlot*>(channel(r, c)); }
  FERRY_HOST_DEVICE uint8_t* scratch(int c) const { return channel(rank, c) + layout.scratchOffset; }

  /// This rank's sending side towards `peer` on channel c.
  FERRY_HOST_DEVICE SendEndpoint sendTo(int c, int peer) const {
    ConnCtrl* mine = ctrl(rank, c, peer);
    uint8_t* theirs = channel(peer, c);
    return {theirs + layout.fifoOffset + layout.fifoBytes * rank,
            &ctrl(peer, c, rank)->head,
            &mine->tail,
            reinterpret_cast<uint64_t*>(theirs + layout.llOffset + layout.llBytes * rank),
            &mine->llTail,
            &mine->sendStep,
            &mine->llSendStep};
  }
  /// This rank's receiving side from `peer` on channel c.
  FERRY_HOST_DEVICE RecvEndpoint recvFrom(int c, int peer) const {
    ConnCtrl* mine = ctrl(rank, c, peer);
    ConnCtrl* theirs = ctrl(peer, c, rank);
    uint8_t* me = channel(rank, c);
    return {me + layout.fifoOffset + layout.fifoBytes * peer,
            &mine->head,
            &theirs->tail,
            reinterpret_cast<const uint64_t*>(me + layout.llOffset + layout.llBytes * peer),
            &theirs->llTail,
            &mine->recvStep,
            &mine->llRecvStep};
  }
};

/// The layout for `config` (host side; buildDevComm stores it in the DevComm).
DevLayout makeDevLayout(const DevConfig& config);

}  // namespace ferry::gpu
