// Direct (single-copy) collectives: every rank reads and writes its peers' user buffers.
//
// Needs every peer's buffers in this address space (ranks of one process). Per work and channel:
//   1. publish: thread 0 writes {send, recv} into this rank's DirectSlot, fences, stores
//      seq = previous + 1 (volatile);
//   2. gather: thread 0 polls each peer's slot until its seq reaches ours and fences; a barrier
//      releases the block, whose threads load the peers' pointers from their slots when they need
//      them (a peer cannot be ahead: it leaves work s only after our done >= s);
//   3. move this channel's part (below), reductions in rank order 0, 1, .., n-1 so every rank
//      computes the same bits;
//   4. complete: barrier, thread 0 fences, stores done = seq, waits for every peer's done >= seq and
//      fences; a barrier releases the block. No rank returns while a peer still touches its buffers.
// Parts: all-reduce is two-shot (rank r reduces segment r of every input and writes it to every
// output); reduce-scatter reduces block r into r's output; all-gather pushes r's input into block r
// of every output; reduce reduces segment r into the root's output; broadcast pulls the root's
// input; all-to-all exchanges block pairs (r, j) element by element, loads before stores, each pair
// handled by one of its two ranks, so in-place works.
#pragma once

#include "collectives/cuda/prims.cuh"
#include "collectives/cuda/ring_kernels.cuh"

namespace ferry::gpu {

/// This rank's sequence number of the direct work now starting on channel c.
struct DirectWork {
  uint64_t seq;
};

/// Publishes this rank's pointers for the work and waits (thread 0) until every peer has published
/// its own; the barrier then releases the block, which reads the peers' pointers with peerSend /
/// peerRecv. The pointers stay in the peers' slots (no per-thread copy of every rank's pair).
FERRY_DEVICE_NOINLINE __device__ inline DirectWork directBegin(const DevComm& comm, const DevWork& w, int c) {
  DirectSlot* mine = comm.directSlot(comm.rank, c);
  const DirectWork d{loadVolatile(&mine->seq) + 1};
  __syncthreads();  // every thread has read the old seq
  if (threadIdx.x == 0) {
    storeVolatile<uint64_t>(&mine->send, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(w.send)));
    storeVolatile<uint64_t>(&mine->recv, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(w.recv)));
    peerFence(comm);  // pointers before seq
    storeVolatile<uint64_t>(&mine->seq, d.seq);
    for (int q = 0; q < comm.nRanks; ++q) {
      waitAtLeast(comm, c, q, DevWait::kDirectSeq, d.seq, &comm.directSlot(q, c)->seq, d.seq);
    }
    peerFence(comm);  // seq before pointers (and the peers' earlier writes)
  }
  __syncthreads();
  return d;
}
__device__ __forceinline__ const uint8_t* peerSend(const DevComm& comm, int q, int c) {
  return reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(loadVolatile(&comm.directSlot(q, c)->send)));
}
__device__ __forceinline__ uint8_t* peerRecv(const DevComm& comm, int q, int c) {
  return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(loadVolatile(&comm.directSlot(q, c)->recv)));
}

FERRY_DEVICE_NOINLINE __device__ inline void directEnd(const DevComm& comm, const DirectWork& d, int c) {
  __syncthreads();  // every thread's reads and writes of peer buffers are done
  if (threadIdx.x == 0) {
    peerFence(comm);
    storeVolatile<uint64_t>(&comm.directSlot(comm.rank, c)->done, d.seq);
    for (int q = 0; q < comm.nRanks; ++q) {
      waitAtLeast(comm, c, q, DevWait::kDirectDone, d.seq, &comm.directSlot(q, c)->done, d.seq);
    }
    peerFence(comm);
  }
  __syncthreads();
}

/// dsts[j][i] = srcs[0][i] op .. op srcs[n-1][i] (avg: divided once at the last step). More than
/// 8 sources or destinations go through the channel's scratch, slotBytes at a time, in the same order.
template <class R>
__device__ void reduceMany(const DevComm& comm, int c, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                           size_t bytes, uint32_t div, const R& red) {
  if (bytes == 0) return;
  if (nSrcs <= 8 && nDsts <= 8) {
    red.run(nSrcs, srcs, nDsts, dsts, bytes, div);
    return;
  }
  uint8_t* scr = comm.scratch(c);
  const size_t chunk = comm.layout.slotBytes / red.elemBytes() * red.elemBytes();
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = bytes - off < chunk ? bytes - off : chunk;
    const void* s[8] = {};
    void* d[8] = {};
    int used = 0;
    for (bool first = true; used < nSrcs; first = false) {
      int k = 0;
      if (!first) s[k++] = scr;
      while (k < 8 && used < nSrcs) s[k++] = static_cast<const uint8_t*>(srcs[used++]) + off;
      void* to = scr;
      red.run(k, s, 1, &to, len, used == nSrcs ? div : 0);
      __syncthreads();
    }
    for (int d0 = 0; d0 < nDsts; d0 += 8) {
      const int k = nDsts - d0 < 8 ? nDsts - d0 : 8;
      for (int j = 0; j < k; ++j) d[j] = static_cast<uint8_t*>(dsts[d0 + j]) + off;
      gpu::copyBytes(k, d, scr, len);
    }
    __syncthreads();
  }
}

/// All-reduce, reduce-scatter, reduce.
template <class R>
FERRY_DEVICE_NOINLINE __device__ void directReduceWork(const DevComm& comm, const DevWork& w, int c, int nChannels,
                                                       const R& red) {
  const int n = comm.nRanks, r = comm.rank;
  const size_t es = red.elemBytes();
  const uint32_t div = w.op == RedOp::kAvg ? static_cast<uint32_t>(n) : 0u;
  const DirectWork dw = directBegin(comm, w, c);
  const void* srcs[kMaxDevRanks];
  void* dsts[kMaxDevRanks];
  int nd = 0;
  size_t inOff, outOff, len;
  if (w.kind == CallKind::kReduceScatter) {
    const Part part = channelPart(w.count, nChannels, c);
    inOff = (w.count * r + part.off) * es, outOff = part.off * es, len = part.len * es;
    dsts[nd++] = peerRecv(comm, r, c) + outOff;
  } else {
    const Part part = channelPart(segmentCount(w.count, n, r), nChannels, c);
    inOff = outOff = (segmentBegin(w.count, n, r) + part.off) * es, len = part.len * es;
    if (w.kind == CallKind::kReduce) {
      dsts[nd++] = peerRecv(comm, w.root, c) + outOff;
    } else {
      for (int q = 0; q < n; ++q) dsts[nd++] = peerRecv(comm, q, c) + outOff;
    }
  }
  for (int q = 0; q < n; ++q) srcs[q] = peerSend(comm, q, c) + inOff;
  reduceMany(comm, c, n, srcs, nd, dsts, len, div, red);
  directEnd(comm, dw, c);
}

/// outA[i] = inB[i] and outB[i] = inA[i], every load before the stores of the same bytes.
__device__ inline void exchangeBytes(uint8_t* outA, const uint8_t* inA, uint8_t* outB, const uint8_t* inB,
                                     size_t bytes) {
  const uintptr_t al = reinterpret_cast<uintptr_t>(outA) | reinterpret_cast<uintptr_t>(inA) |
                       reinterpret_cast<uintptr_t>(outB) | reinterpret_cast<uintptr_t>(inB);
  size_t done = 0;
  if ((al & 15) == 0) {
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
      const uint4 x = reinterpret_cast<const uint4*>(inA)[i], y = reinterpret_cast<const uint4*>(inB)[i];
      reinterpret_cast<uint4*>(outB)[i] = x;
      reinterpret_cast<uint4*>(outA)[i] = y;
    }
    done = bytes / 16 * 16;
  }
  for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) {
    const uint8_t x = inA[i], y = inB[i];
    outB[i] = x;
    outA[i] = y;
  }
}

/// All-gather, broadcast, all-to-all.
FERRY_DEVICE_NOINLINE __device__ inline void directCopyWork(const DevComm& comm, const DevWork& w, size_t es, int c,
                                                            int nChannels) {
  const int n = comm.nRanks, r = comm.rank;
  const DirectWork dw = directBegin(comm, w, c);
  const Part part = channelPart(w.count, nChannels, c);
  const size_t off = part.off * es, len = part.len * es, blk = w.count * es;
  if (len > 0 && w.kind == CallKind::kAllGather) {
    const uint8_t* src = peerSend(comm, r, c) + off;
    void* d[8] = {};
    int k = 0;
    for (int q = 0; q < n; ++q) {
      uint8_t* to = peerRecv(comm, q, c) + blk * r + off;
      if (to != src) d[k++] = to;
      if (k == 8 || (q == n - 1 && k > 0)) {
        gpu::copyBytes(k, d, src, len);
        k = 0;
      }
    }
  } else if (len > 0 && w.kind == CallKind::kBroadcast) {
    void* to = peerRecv(comm, r, c) + off;
    const uint8_t* from = peerSend(comm, w.root, c) + off;
    if (to != from) gpu::copyBytes(1, &to, from, len);
  } else if (len > 0) {  // all-to-all
    const uint8_t* mySend = peerSend(comm, r, c);
    uint8_t* myRecv = peerRecv(comm, r, c);
    for (int j = 0; j < n; ++j) {
      const int d = ringMod(j - r, n);
      if (j == r) {
        void* to = myRecv + blk * r + off;
        if (to != mySend + blk * r + off) gpu::copyBytes(1, &to, mySend + blk * r + off, len);
      } else if (2 * d < n || (2 * d == n && r < j)) {
        exchangeBytes(myRecv + blk * j + off, mySend + blk * j + off, peerRecv(comm, j, c) + blk * r + off,
                      peerSend(comm, j, c) + blk * r + off, len);
      }
    }
  }
  directEnd(comm, dw, c);
}

}  // namespace ferry::gpu
