// Point-to-point over the FIFOs: runs of send/recv works, and the FIFO all-to-all.
//
// Both are scheduled in rounds k = 0 .. n/2. In round k a rank talks to a = r+k and b = r-k only:
// it has up to two send streams (to a, to b) and two receive streams (from b, from a), each the
// concatenation, in list order, of its works' parts for this channel, moved one step per stream
// per iteration: sends first, then receives. Its peers are in the same round with the mirror
// streams (b's stream to b+k = r). Why this cannot deadlock, whatever order the user listed the
// works in: order all operations by (round, iteration, stream index). A receive at iteration i
// waits only for the peer's send at iteration i, which comes first in that order (sends precede
// receives); a send waits only for the receiver to finish iteration i - slots. So the smallest
// pending operation can always proceed. All-to-all in place works for the same reason: the
// receive from b into block b comes after the send of the same slice of block b.
//
// Works to or from the same peer keep their list order on the connection, as NCCL requires. A
// stream step uses its work's protocol; sender and receiver must pass the same protocol, type and
// count (the runtime's tuner decides from those, so they do).
#pragma once

#include "collectives/cuda/prims.cuh"
#include "collectives/cuda/ring_kernels.cuh"

namespace ferry::gpu {

/// A channel's part of `bytes` bytes, in 16-byte units so parts stay aligned.
__device__ __forceinline__ Part bytePart(size_t bytes, int nChannels, int c) {
  const size_t units = (bytes + 15) / 16;
  size_t b = segmentBegin(units, nChannels, c) * 16, e = b + segmentCount(units, nChannels, c) * 16;
  b = b < bytes ? b : bytes;
  e = e < bytes ? e : bytes;
  return {b, e - b};
}

/// One direction of traffic with one peer in a round. It walks the works in list order and takes
/// those that move data on this direction (a send to, or a receive from, `peer`; all-to-all's block
/// for `peer`), one step of this channel's part at a time. Nothing is collected in arrays: the
/// works stay in the kernel parameters, so a stream is a few registers, not a stack frame.
struct P2pStream {
  const DevWork* works;
  int nWorks;
  int next;  // the work after the current one
  int peer;
  bool send;
  bool ll;       // the current work's protocol
  uint8_t* ptr;  // the current work's part, from its next unsent byte
  size_t left;   // bytes of the current part still to move; 0: finished
  union {        // a stream only sends or only receives: one pair of endpoints
    struct {
      SimpleSend ss;
      LLSend ls;
    };
    struct {
      SimpleRecv sr;
      LLRecv lr;
    };
  };

  __device__ void begin(const DevComm& comm, const DevWork* w, int n, int p, bool isSend, int c, int nChannels) {
    works = w, nWorks = n, next = 0, peer = p, send = isSend, left = 0;
    if (send) {
      ss.init(comm.sendTo(c, peer), comm, c, peer);
      ls.init(comm.sendTo(c, peer), comm, c, peer);
    } else {
      sr.init(comm.recvFrom(c, peer), comm, c, peer);
      lr.init(comm.recvFrom(c, peer), comm, c, peer);
    }
    advance(c, nChannels);
  }
  /// Moves to the next work with bytes for this direction on this channel (both sides compute the
  /// same parts, so both skip the same empty ones).
  __device__ void advance(int c, int nChannels) {
    while (next < nWorks) {
      const DevWork& w = works[next++];
      const size_t es = elemBytes(w.type);
      const uint8_t* base = nullptr;
      if (w.kind == CallKind::kAllToAll) {
        const size_t blk = w.count * es * peer;
        base = send ? static_cast<const uint8_t*>(w.send) + blk : static_cast<uint8_t*>(w.recv) + blk;
      } else if (w.root == peer && (w.kind == CallKind::kSend) == send) {
        base = static_cast<const uint8_t*>(send ? w.send : w.recv);
      } else {
        continue;
      }
      const Part part = bytePart(w.count * es, nChannels, c);
      if (part.len == 0) continue;
      ptr = const_cast<uint8_t*>(base) + part.off;
      left = part.len;
      ll = w.proto == DevProto::kLL;
      return;
    }
    left = 0;
  }
  __device__ bool finished() const { return left == 0; }

  /// Thread 0 only: waits until this step can move (slot free or full; LL receives wait per word).
  __device__ void wait() {
    if (finished()) return;
    if (send && !ll) {
      ss.waitFree();
    } else if (send) {
      ls.waitFree();
    } else if (!ll) {
      sr.waitFull();
    }
  }
  /// Moves one step of the current work (every thread calls it with the same state, after the
  /// barrier that follows thread 0's wait() and fence).
  __device__ void step(int c, int nChannels) {
    if (finished()) return;
    const size_t room = ll ? (send ? ls.slotBytes : lr.slotBytes) : (send ? ss.slotBytes : sr.slotBytes);
    const size_t bytes = left < room ? left : room;
    if (send && !ll) {
      void* slot = ss.slot();
      gpu::copyBytes(1, &slot, ptr, bytes);
      __syncthreads();
      if (threadIdx.x == 0) {
        peerFence(*ss.link.comm);
        ss.publish();
      }
      ++ss.step;
    } else if (send) {
      uint64_t* slot = ls.slot();
      const uint32_t flag = llFlag(ls.step);
      for (size_t i = threadIdx.x; i < (bytes + 7) / 8; i += blockDim.x) {
        llStore(slot, i, loadPack(ptr, i, bytes), flag);
      }
      ++ls.step;
    } else if (!ll) {
      void* dst = ptr;
      gpu::copyBytes(1, &dst, sr.slot(), bytes);
      __syncthreads();
      if (threadIdx.x == 0) {
        peerFence(*sr.link.comm);
        sr.publish();
      }
      ++sr.step;
    } else {
      const uint64_t* slot = lr.slot();
      const uint32_t flag = llFlag(lr.step);
      for (size_t i = threadIdx.x; i < (bytes + 7) / 8; i += blockDim.x) {
        storePack(ptr, i, bytes, llLoad(lr, slot, i, flag));
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        peerFence(*lr.link.comm);
        lr.publish();
      }
      ++lr.step;
    }
    ptr += bytes;
    left -= bytes;
    if (left == 0) advance(c, nChannels);
  }
  /// Stores the connection's step counters (thread 0, between barriers).
  __device__ void save() {
    if (send) {
      ss.save();
      ls.save();
    } else {
      sr.save();
      lr.save();
    }
  }
};

/// Runs works [first, last) of `list` (a run of kSend/kRecv works, or one kAllToAll) on channel c.
FERRY_DEVICE_NOINLINE __device__ inline void p2pRun(const DevComm& comm, const DevWork* works, int nWorks, int c,
                                                    int nChannels) {
  const int n = comm.nRanks, r = comm.rank;
  for (int k = 0; k <= n / 2; ++k) {
    const int a = ringMod(r + k, n), b = ringMod(r - k, n);
    // Sends first (to a, to b), then receives (from b, from a): see the top of the file.
    P2pStream st[4];
    int ns = 0;
    for (int i = 0; i < 4; ++i) {
      if ((i == 1 || i == 3) && a == b) continue;  // one peer in this round
      const int peer = i == 0 || i == 3 ? a : b;
      st[ns].begin(comm, works, nWorks, peer, i < 2, c, nChannels);
      if (!st[ns].finished()) ++ns;
    }
    if (ns == 0) continue;
    for (bool busy = true; busy;) {
      busy = false;
      for (int i = 0; i < ns; ++i) {
        if (st[i].finished()) continue;
        if (threadIdx.x == 0) {
          st[i].wait();
          peerFence(comm);
        }
        __syncthreads();
        st[i].step(c, nChannels);
        busy = busy || !st[i].finished();
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int i = 0; i < ns; ++i) st[i].save();
    }
    __syncthreads();
  }
}

}  // namespace ferry::gpu
