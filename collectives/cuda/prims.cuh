// Protocol primitives of the collective kernels: one connection direction held in registers, and the
// five ring verbs (send, recvReduceSend, recvReduceCopySend, recvCopySend, recv) over a pair of them.
//
// Every thread of the block runs every primitive with the same arguments and keeps its own copy of
// the step counters (they stay equal); thread 0 alone publishes counters to other ranks and saves
// the private ones (save()), after a barrier.
//
// Simple protocol, one step = one slot of slotBytes:
//   sender    thread 0 polls tail (volatile) until the slot is free and fences (the receiver's reads
//             of the old contents happen before our writes); a barrier releases the block, which
//             writes the slot; barrier; thread 0 fences and stores head = step + 1 (volatile).
//   receiver  thread 0 polls head until head > step and fences (acquire); the barrier orders every
//             thread's reads of the slot after it; barrier; thread 0 fences and stores the
//             sender's tail = step + 1.
// LL protocol, one step = one slot of llSlotBytes payload in 2 x llSlotBytes of 8-byte words
// {data low 32 bits, flag high 32 bits}, each written with one 8-byte volatile store:
//   sender    thread 0 polls llTail as above and fences, a barrier releases the block, which stores
//             its words with flag(step); no fence on the data path.
//   receiver  each thread polls its own words until their flag equals flag(step) (the data came in
//             the same single-copy-atomic store, so no fence is needed); barrier; thread 0 fences
//             and stores llTail = step + 1 in the sender's memory.
// Fences are .gpu scope when every rank runs on one GPU, .sys otherwise (peerFence).
// Every wait has a deadline (DevComm::timeoutNs, from FERRY_TIMEOUT, read from %globaltimer every
// 256 polls): past it the waiting thread writes what it waited for into the host-mapped DevError
// and traps, so a missing peer ends the launch with a named error instead of a hung GPU.
//   flag(step) = 1 + step mod (2^32 - 1): never 0, so zero-filled memory never matches, and a slot's
//   previous contents carry flag(step - llSlots), which differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/cuda/dev_comm.hpp"
#include "kernels/cuda/simt.hpp"

/// Keeps each work function a separate device function: ptxas then compiles ~100 modest functions
/// instead of one kernel with every algorithm x type x op inlined (minutes and gigabytes otherwise).
#if FERRY_SIMT_EMULATED
#define FERRY_DEVICE_NOINLINE
#else
#define FERRY_DEVICE_NOINLINE __noinline__
#endif

namespace ferry::gpu {

using simt::loadVolatile;
using simt::pollPause;
using simt::storeVolatile;

/// Element size on the device (dataTypeSize is host code). fp8 types are one byte.
__device__ __forceinline__ size_t elemBytes(DataType t) {
  switch (t) {
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    default: return 1;
  }
}

__device__ __forceinline__ uint32_t llFlag(uint64_t step) { return static_cast<uint32_t>(step % 0xFFFFFFFFull) + 1u; }

/// Release/acquire fence for data shared with the peers: .gpu scope when every rank runs on one
/// GPU (cheaper: no wait for the system's memory), .sys when a peer may be another GPU.
__device__ __forceinline__ void peerFence(const DevComm& comm) {
  if (comm.oneDevice) {
    __threadfence();
  } else {
    __threadfence_system();
  }
}

/// A wait's deadline passed: the first timed-out thread of this rank fills the host-mapped record
/// (fields, then a system fence, then state = 1), and the launch traps. The host turns the record
/// into the communicator's error.
FERRY_DEVICE_NOINLINE __device__ inline void deviceTimeout(const DevComm& comm, int c, int peer, DevWait what,
                                                           uint64_t step, uint64_t seen, uint64_t awaited,
                                                           uint64_t waitedNs) {
  auto* claim = reinterpret_cast<unsigned long long*>(&comm.directSlot(comm.rank, 0)->trapClaim);
  DevError* e = comm.error;
  if (e != nullptr && atomicCAS(claim, 0ull, 1ull) == 0ull) {
    storeVolatile<int32_t>(&e->rank, comm.rank);
    storeVolatile<int32_t>(&e->channel, c);
    storeVolatile<int32_t>(&e->peer, peer);
    storeVolatile<uint32_t>(reinterpret_cast<uint32_t*>(&e->what), static_cast<uint32_t>(what));
    storeVolatile<uint64_t>(&e->step, step);
    storeVolatile<uint64_t>(&e->seen, seen);
    storeVolatile<uint64_t>(&e->awaited, awaited);
    storeVolatile<uint64_t>(&e->waitedNs, waitedNs);
    __threadfence_system();  // the fields before state
    storeVolatile<uint32_t>(&e->state, 1u);
    __threadfence_system();
  }
  simt::trapLaunch();
}

/// The slow path of a wait: polls until *word >= target, reading the global timer every 256
/// polls; past comm.timeoutNs it reports and traps. Kept out of line: the fast path is one load.
FERRY_DEVICE_NOINLINE __device__ inline void waitAtLeastSlow(const DevComm& comm, int c, int peer, DevWait what,
                                                             uint64_t step, const uint64_t* word, uint64_t target) {
  const uint64_t begin = simt::globalTimerNs();
  for (uint32_t spin = 1;; ++spin) {
    const uint64_t v = loadVolatile(word);
    if (v >= target) return;
    pollPause();
    if ((spin & 255u) == 0u && comm.timeoutNs != 0) {
      const uint64_t waited = simt::globalTimerNs() - begin;
      if (waited > comm.timeoutNs) deviceTimeout(comm, c, peer, what, step, v, target, waited);
    }
  }
}
/// Waits until the counter at `word` (volatile) reaches `target`, within the communicator's deadline.
__device__ __forceinline__ void waitAtLeast(const DevComm& comm, int c, int peer, DevWait what, uint64_t step,
                                            const uint64_t* word, uint64_t target) {
  if (loadVolatile(word) >= target) return;
  waitAtLeastSlow(comm, c, peer, what, step, word, target);
}

/// Where a connection direction is (for waits and their error records).
struct Link {
  const DevComm* comm;
  int channel;
  int peer;
};

/// Simple protocol, sending side of one connection.
struct SimpleSend {
  uint8_t* fifo;
  uint64_t* head;
  const uint64_t* tail;
  uint64_t* stepPtr;
  uint64_t step;
  int slots;
  size_t slotBytes;
  Link link;

  __device__ void init(const SendEndpoint& e, const DevComm& comm, int c, int peer) {
    fifo = e.fifo, head = e.head, tail = e.tail, stepPtr = e.step, step = *e.step;
    slots = comm.layout.slots, slotBytes = comm.layout.slotBytes;
    link = {&comm, c, peer};
  }
  /// Thread 0 only: waits until the next slot is free (the receiver's reads of its old contents
  /// happen before our writes: fence after the poll). The caller's barrier then releases the block.
  __device__ void waitFree() {
    if (step >= static_cast<uint64_t>(slots)) {
      waitAtLeast(*link.comm, link.channel, link.peer, DevWait::kTail, step, tail, step - slots + 1);
    }
  }
  __device__ uint8_t* slot() const { return fifo + (step % static_cast<uint64_t>(slots)) * slotBytes; }
  /// Thread 0 only, after the block barrier that follows the writes and a fence.
  __device__ void publish() { storeVolatile<uint64_t>(head, step + 1); }
  __device__ void save() { *stepPtr = step; }
};

/// Simple protocol, receiving side of one connection.
struct SimpleRecv {
  const uint8_t* fifo;
  const uint64_t* head;
  uint64_t* tail;
  uint64_t* stepPtr;
  uint64_t step;
  int slots;
  size_t slotBytes;
  Link link;

  __device__ void init(const RecvEndpoint& e, const DevComm& comm, int c, int peer) {
    fifo = e.fifo, head = e.head, tail = e.tail, stepPtr = e.step, step = *e.step;
    slots = comm.layout.slots, slotBytes = comm.layout.slotBytes;
    link = {&comm, c, peer};
  }
  /// Thread 0 only: waits until the sender has posted this step (fence after: acquire).
  __device__ void waitFull() { waitAtLeast(*link.comm, link.channel, link.peer, DevWait::kHead, step, head, step + 1); }
  __device__ const uint8_t* slot() const { return fifo + (step % static_cast<uint64_t>(slots)) * slotBytes; }
  __device__ void publish() { storeVolatile<uint64_t>(tail, step + 1); }
  __device__ void save() { *stepPtr = step; }
};

/// LL protocol, sending side.
struct LLSend {
  uint64_t* buf;
  const uint64_t* tail;
  uint64_t* stepPtr;
  uint64_t step;
  int slots;
  size_t slotBytes;  // payload bytes per slot
  Link link;

  __device__ void init(const SendEndpoint& e, const DevComm& comm, int c, int peer) {
    buf = e.ll, tail = e.llTail, stepPtr = e.llStep, step = *e.llStep;
    slots = comm.layout.llSlots, slotBytes = comm.layout.llSlotBytes;
    link = {&comm, c, peer};
  }
  /// Thread 0 only: waits until the slot is free (fence after: the slot is about to be reused).
  __device__ void waitFree() {
    if (step >= static_cast<uint64_t>(slots)) {
      waitAtLeast(*link.comm, link.channel, link.peer, DevWait::kLLTail, step, tail, step - slots + 1);
    }
  }
  __device__ uint64_t* slot() const { return buf + (step % static_cast<uint64_t>(slots)) * (slotBytes / 4); }
  __device__ void save() { *stepPtr = step; }
};

/// LL protocol, receiving side.
struct LLRecv {
  const uint64_t* buf;
  uint64_t* tail;
  uint64_t* stepPtr;
  uint64_t step;
  int slots;
  size_t slotBytes;
  Link link;

  __device__ void init(const RecvEndpoint& e, const DevComm& comm, int c, int peer) {
    buf = e.ll, tail = e.llTail, stepPtr = e.llStep, step = *e.llStep;
    slots = comm.layout.llSlots, slotBytes = comm.layout.llSlotBytes;
    link = {&comm, c, peer};
  }
  __device__ const uint64_t* slot() const { return buf + (step % static_cast<uint64_t>(slots)) * (slotBytes / 4); }
  __device__ void publish() { storeVolatile<uint64_t>(tail, step + 1); }
  __device__ void save() { *stepPtr = step; }
};

/// Pack i (8 bytes) of a chunk of `bytes` bytes at p: whole and aligned packs in one load, the
/// ragged end byte by byte (zero padded).
__device__ __forceinline__ uint64_t loadPack(const uint8_t* p, size_t i, size_t bytes) {
  const uint8_t* q = p + i * 8;
  if (i * 8 + 8 <= bytes && (reinterpret_cast<uintptr_t>(q) & 7) == 0) return *reinterpret_cast<const uint64_t*>(q);
  uint64_t v = 0;
  for (size_t b = 0; b < 8 && i * 8 + b < bytes; ++b) v |= static_cast<uint64_t>(q[b]) << (8 * b);
  return v;
}
__device__ __forceinline__ void storePack(uint8_t* p, size_t i, size_t bytes, uint64_t v) {
  uint8_t* q = p + i * 8;
  if (i * 8 + 8 <= bytes && (reinterpret_cast<uintptr_t>(q) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(q) = v;
    return;
  }
  for (size_t b = 0; b < 8 && i * 8 + b < bytes; ++b) q[b] = static_cast<uint8_t>(v >> (8 * b));
}
/// Pack i of an LL slot: words 2i and 2i+1, each {4 data bytes, flag}.
__device__ __forceinline__ void llStore(uint64_t* slot, size_t i, uint64_t v, uint32_t flag) {
  const uint64_t f = static_cast<uint64_t>(flag) << 32;
  storeVolatile<uint64_t>(slot + 2 * i, (v & 0xFFFFFFFFull) | f);
  storeVolatile<uint64_t>(slot + 2 * i + 1, (v >> 32) | f);
}
/// The slow path of an LL word's wait: polls until its flag is `flag`, within the deadline.
FERRY_DEVICE_NOINLINE __device__ inline uint64_t llWaitSlow(const Link& l, uint64_t step, const uint64_t* word,
                                                            uint32_t flag) {
  const uint64_t begin = simt::globalTimerNs();
  for (uint32_t spin = 1;; ++spin) {
    const uint64_t v = loadVolatile(word);
    if (static_cast<uint32_t>(v >> 32) == flag) return v;
    pollPause();
    if ((spin & 255u) == 0u && l.comm->timeoutNs != 0) {
      const uint64_t waited = simt::globalTimerNs() - begin;
      if (waited > l.comm->timeoutNs) {
        deviceTimeout(*l.comm, l.channel, l.peer, DevWait::kLLFlag, step, v >> 32, flag, waited);
      }
    }
  }
}
__device__ __forceinline__ uint64_t llWord(const Link& l, uint64_t step, const uint64_t* word, uint32_t flag) {
  const uint64_t v = loadVolatile(word);
  return static_cast<uint32_t>(v >> 32) == flag ? v : llWaitSlow(l, step, word, flag);
}
/// Pack i of an LL slot once both its words carry `flag` (the data came in the same stores).
__device__ __forceinline__ uint64_t llLoad(const LLRecv& r, const uint64_t* slot, size_t i, uint32_t flag) {
  const uint64_t lo = llWord(r.link, r.step, slot + 2 * i, flag);
  const uint64_t hi = llWord(r.link, r.step, slot + 2 * i + 1, flag);
  return (lo & 0xFFFFFFFFull) | (hi << 32);
}

/// Reduction policies: how a step combines its sources. Red<T, Op> reduces elements of T; RedCopy
/// only moves bytes (all-gather, broadcast, all-to-all, send/recv), so copies are instantiated once.
struct RedCopy {
  static constexpr size_t kElemBytes = 1;
  __device__ size_t elemBytes() const { return 1; }
  FERRY_DEVICE_NOINLINE __device__ static void run(int, const void* const* srcs, int nDsts, void* const* dsts,
                                                   size_t bytes, uint32_t) {
    gpu::copyBytes(nDsts, dsts, srcs[0], bytes);
  }
  __device__ static uint64_t pack(uint64_t a, uint64_t, uint32_t) { return a; }
};
template <typename T, typename Op>
struct Red {
  static constexpr size_t kElemBytes = sizeof(T);
  __device__ size_t elemBytes() const { return sizeof(T); }
  FERRY_DEVICE_NOINLINE __device__ static void run(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                                                   size_t bytes, uint32_t divisor) {
    if (nSrcs == 1 && divisor == 0) {
      gpu::copyBytes(nDsts, dsts, srcs[0], bytes);
      return;
    }
    const T* s[8] = {};
    T* d[8] = {};
    for (int i = 0; i < nSrcs; ++i) s[i] = static_cast<const T*>(srcs[i]);
    for (int i = 0; i < nDsts; ++i) d[i] = static_cast<T*>(dsts[i]);
    gpu::reduceCopy<T, Op>(nSrcs, s, nDsts, d, bytes / sizeof(T), divisor);
  }
  /// a op b over one pack; with a divisor, the avg's fused last step.
  __device__ static uint64_t pack(uint64_t a, uint64_t b, uint32_t divisor) {
    return divisor != 0 ? gpu::applyPack8Divide<T, Op>(a, b, divisor) : gpu::applyPack8<T, Op>(a, b);
  }
};

/// The reduction policy the algorithms are instantiated with: type and op chosen at run time, each
/// step calling one out-of-line Red<T, Op> function. Instantiating every algorithm for every type
/// and op (12 x 4, times protocols and verbs) made ptxas run for tens of minutes; with one
/// instantiation per protocol the cost is a call per step (simple) or per 8-byte pack (LL, whose
/// messages are small by definition).
struct RedRt {
  DataType type;
  RedOp op;
  uint32_t bytes;  // element size
  __device__ size_t elemBytes() const { return bytes; }
  FERRY_DEVICE_NOINLINE __device__ void run(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t n,
                                            uint32_t divisor) const {
    if (nSrcs == 1 && divisor == 0) {
      RedCopy::run(1, srcs, nDsts, dsts, n, 0);
      return;
    }
    gpu::dispatchTypeOp(type, op,
                        [&]<typename T, typename Op>() { Red<T, Op>::run(nSrcs, srcs, nDsts, dsts, n, divisor); });
  }
  FERRY_DEVICE_NOINLINE __device__ uint64_t pack(uint64_t a, uint64_t b, uint32_t divisor) const {
    uint64_t v = 0;
    gpu::dispatchTypeOp(type, op, [&]<typename T, typename Op>() { v = Red<T, Op>::pack(a, b, divisor); });
    return v;
  }
};

/// The ring verbs over a receive connection (from prev) and a send connection (to next).
/// One call = one step on each connection it uses. `own` is this rank's contribution (nullptr:
/// none), `out` the user buffer to write (nullptr: none); the received data comes first in the
/// reduction: v = recv op own, so the order of a ring reduction is the host executor's.
template <DevProto P>
struct Prims;

template <>
struct Prims<DevProto::kSimple> {
  SimpleRecv rcv;
  SimpleSend snd;
  static constexpr DevProto kProto = DevProto::kSimple;

  __device__ Prims(const DevComm& comm, int c, int recvPeer, int sendPeer) {
    rcv.init(comm.recvFrom(c, recvPeer), comm, c, recvPeer);
    snd.init(comm.sendTo(c, sendPeer), comm, c, sendPeer);
  }
  __device__ size_t stepBytes() const { return snd.slotBytes; }

  /// Thread 0 waits for both connections and fences; the barrier then releases the block (one
  /// poller per block instead of every thread polling). After the data moved, a barrier, and
  /// thread 0 fences and publishes.
  template <class R>
  FERRY_DEVICE_NOINLINE __device__ void op(const R& red, bool doRecv, bool doSend, const void* own, void* out,
                                           size_t bytes, uint32_t divisor) {
    if (threadIdx.x == 0) {
      if (doRecv) rcv.waitFull();
      if (doSend) snd.waitFree();
      peerFence(*snd.link.comm);
    }
    __syncthreads();
    const void* srcs[2] = {nullptr, nullptr};
    void* dsts[2] = {nullptr, nullptr};
    int ns = 0, nd = 0;
    if (doRecv) srcs[ns++] = rcv.slot();
    if (own != nullptr) srcs[ns++] = own;
    if (out != nullptr && (doRecv || out != own)) dsts[nd++] = out;  // a pure copy onto itself is skipped
    if (doSend) dsts[nd++] = snd.slot();
    if (bytes > 0 && nd > 0) red.run(ns, srcs, nd, dsts, bytes, ns == 2 ? divisor : 0);
    __syncthreads();
    if (threadIdx.x == 0) {
      peerFence(*snd.link.comm);
      if (doSend) snd.publish();
      if (doRecv) rcv.publish();
    }
    snd.step += doSend ? 1 : 0;
    rcv.step += doRecv ? 1 : 0;
  }
  __device__ void save() {
    __syncthreads();
    if (threadIdx.x == 0) {
      snd.save();
      rcv.save();
    }
    __syncthreads();
  }
};

template <>
struct Prims<DevProto::kLL> {
  LLRecv rcv;
  LLSend snd;
  static constexpr DevProto kProto = DevProto::kLL;

  __device__ Prims(const DevComm& comm, int c, int recvPeer, int sendPeer) {
    rcv.init(comm.recvFrom(c, recvPeer), comm, c, recvPeer);
    snd.init(comm.sendTo(c, sendPeer), comm, c, sendPeer);
  }
  __device__ size_t stepBytes() const { return snd.slotBytes; }

  template <class R>
  FERRY_DEVICE_NOINLINE __device__ void op(const R& red, bool doRecv, bool doSend, const void* own, void* out,
                                           size_t bytes, uint32_t divisor) {
    if (doSend) {
      if (threadIdx.x == 0) {
        snd.waitFree();
        peerFence(*snd.link.comm);
      }
      __syncthreads();
    }
    uint64_t* sendSlot = doSend ? snd.slot() : nullptr;
    const uint64_t* recvSlot = rcv.slot();
    const uint32_t sendFlag = llFlag(snd.step), recvFlag = llFlag(rcv.step);
    const auto* o = static_cast<const uint8_t*>(own);
    auto* d = static_cast<uint8_t*>(out);
    const size_t packs = (bytes + 7) / 8;
    for (size_t i = threadIdx.x; i < packs; i += blockDim.x) {
      uint64_t v;
      if (doRecv) {
        v = llLoad(rcv, recvSlot, i, recvFlag);
        if (o != nullptr) v = red.pack(v, loadPack(o, i, bytes), divisor);
      } else {
        v = loadPack(o, i, bytes);
      }
      if (d != nullptr && (doRecv || d != o)) storePack(d, i, bytes, v);
      if (doSend) llStore(sendSlot, i, v, sendFlag);
    }
    if (doRecv) {
      __syncthreads();
      if (threadIdx.x == 0) {
        peerFence(*rcv.link.comm);
        rcv.publish();
      }
    }
    snd.step += doSend ? 1 : 0;
    rcv.step += doRecv ? 1 : 0;
  }
  __device__ void save() {
    __syncthreads();
    if (threadIdx.x == 0) {
      snd.save();
      rcv.save();
    }
    __syncthreads();
  }
};

}  // namespace ferry::gpu
