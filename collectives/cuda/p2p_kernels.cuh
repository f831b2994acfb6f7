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

namespace ferry::coll::gpu {

/// A channel's part of `bytes` bytes, in 16-byte units so parts stay aligned.
__device__ __forceinline__ Part bytePart(size_t bytes, int nChannels, int c) {
  const size_t units = (bytes + 15) / 16;
  size_t b = segmentBegin(units, nChannels, c) * 16, e = b + segmentCount(units, nChannels, c) * 16;
  b = b < bytes ? b : bytes;
  e = e < bytes ? e : bytes;
  return {b, e - b};
}

/// One direction of traffic with one peer in a round.
struct P2pStream {
  bool send = false;
  int nItems = 0;
  int item = 0;
  size_t done = 0;  // bytes of the current item's part moved so far
  uint8_t* ptr[kMaxWorksPerLaunch];
  size_t len[kMaxWorksPerLaunch];  // this channel's part
  DevProto proto[kMaxWorksPerLaunch];
  SimpleSend ss;
  SimpleRecv sr;
  LLSend ls;
  LLRecv lr;

  __device__ void add(const void* p, size_t bytes, DevProto pr, int c, int nChannels) {
    const Part part = bytePart(bytes, nChannels, c);
    if (part.len == 0) return;  // both sides skip it: they compute the same part
    ptr[nItems] = const_cast<uint8_t*>(static_cast<const uint8_t*>(p)) + part.off;
    len[nItems] = part.len;
    proto[nItems] = pr;
    ++nItems;
  }
  __device__ bool finished() const { return item >= nItems; }

  /// Moves one step of the current item (every thread calls it with the same state).
  __device__ void step() {
    if (finished()) return;
    const bool ll = proto[item] == DevProto::kLL;
    const size_t room = ll ? (send ? ls.slotBytes : lr.slotBytes) : (send ? ss.slotBytes : sr.slotBytes);
    const size_t bytes = len[item] - done < room ? len[item] - done : room;
    uint8_t* p = ptr[item] + done;
    if (send && !ll) {
      void* slot = ss.wait();
      kernels::cuda::copyBytes(1, &slot, p, bytes);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        ss.publish();
      }
      ++ss.step;
    } else if (send) {
      uint64_t* slot = ls.wait();
      const uint32_t flag = llFlag(ls.step);
      for (size_t i = threadIdx.x; i < (bytes + 7) / 8; i += blockDim.x) llStore(slot, i, loadPack(p, i, bytes), flag);
      ++ls.step;
    } else if (!ll) {
      void* dst = p;
      kernels::cuda::copyBytes(1, &dst, sr.wait(), bytes);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        sr.publish();
      }
      ++sr.step;
    } else {
      const uint64_t* slot = lr.slot();
      const uint32_t flag = llFlag(lr.step);
      for (size_t i = threadIdx.x; i < (bytes + 7) / 8; i += blockDim.x) storePack(p, i, bytes, llLoad(slot, i, flag));
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        lr.publish();
      }
      ++lr.step;
    }
    done += bytes;
    if (done >= len[item]) {
      ++item;
      done = 0;
    }
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
FERRY_DEVICE_NOINLINE __device__ void p2pRun(const DevComm& comm, const DevWork* works, int nWorks, int c, int nChannels) {
  const int n = comm.nRanks, r = comm.rank;
  for (int k = 0; k <= n / 2; ++k) {
    const int a = ringMod(r + k, n), b = ringMod(r - k, n);
    const int peers[4] = {a, b, b, a};
    const bool sends[4] = {true, true, false, false};
    P2pStream st[4];
    int ns = 0;
    for (int i = 0; i < 4; ++i) {
      if ((i == 1 || i == 3) && a == b) continue;  // one peer in this round
      P2pStream& s = st[ns];
      s.send = sends[i];
      const int peer = peers[i];
      for (int j = 0; j < nWorks; ++j) {
        const DevWork& w = works[j];
        const size_t es = elemBytes(w.type);
        if (w.kind == WorkKind::kAllToAll) {
          const size_t blk = w.count * es * peer;
          s.add(s.send ? static_cast<const uint8_t*>(w.send) + blk : static_cast<uint8_t*>(w.recv) + blk, w.count * es,
                w.proto, c, nChannels);
        } else if (w.root == peer && (w.kind == WorkKind::kSend) == s.send) {
          s.add(s.send ? w.send : w.recv, w.count * es, w.proto, c, nChannels);
        }
      }
      if (s.nItems == 0) continue;
      if (s.send) {
        s.ss.init(comm.sendTo(c, peer), comm.layout);
        s.ls.init(comm.sendTo(c, peer), comm.layout);
      } else {
        s.sr.init(comm.recvFrom(c, peer), comm.layout);
        s.lr.init(comm.recvFrom(c, peer), comm.layout);
      }
      ++ns;
    }
    if (ns == 0) continue;
    for (bool busy = true; busy;) {
      busy = false;
      for (int i = 0; i < ns; ++i) {
        st[i].step();
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

}  // namespace ferry::coll::gpu
