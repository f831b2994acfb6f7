// What the algorithms' cost formulas see (collectives/table.hpp): the host's measured constants,
// the network's, the communicator's shape, and per call a Pricing with the terms every formula
// shares (copies, reductions, cross-memory reads, messages, hand-offs).
//
// The model is alpha-beta-gamma: a call costs its synchronisations times the flag hand-off latency,
// plus the bytes each rank copies, reads across processes and reduces, divided by the measured
// rates, with a penalty per cross-memory call; when ranks outnumber cores the per-rank work is
// multiplied by ranks/cores and hand-offs cost a kernel wake-up. Where the ranks' buffers are
// shared memory (ferry::hostAlloc), reading a peer's buffer costs a copy at the memory rate and
// reducing from it nothing extra. docs/ARCHITECTURE.md ("The tuner") says how the constants are
// measured and where the model was found wrong.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

struct HostModel {
  double syncSpin = 0;       ///< seconds for a flag store to be seen by a spinning peer on another core
  double syncSleep = 0;      ///< seconds for a flag store to wake a peer sleeping in the kernel
  double copyBw = 0;         ///< memcpy, bytes per second, buffers larger than the caches
  double copyBwCache = 0;    ///< memcpy, bytes per second, buffers of one chunk (l2Bytes / 8) that stay in the L2
  double reduceBw = 0;       ///< float32 sum of two inputs into an output, output bytes per second
  double reduceBwCache = 0;  ///< the same on buffers of one chunk that stay in the L2
  double cmaBw = 0;          ///< cross-memory attach reads, bytes per second
  double cmaCall = 0;        ///< seconds per cross-memory attach call, beyond its bytes (a 64-byte read)
  int64_t l2Bytes = 0;       ///< per-core cache the read-and-reduce chunks should fit
  int cores = 0;             ///< cores this process may run on

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

namespace coll {

struct ModelInputs {
  int ranks = 1;
  bool arena = false;                        ///< every rank on this host, shared memory attached
  bool cma = false;                          ///< single-copy reads work between every pair
  size_t mailboxBytes = 0;                   ///< bytes of one mailbox
  size_t sharedMinBytes = size_t{32} << 20;  ///< FERRY_SHARED_MIN_BYTES (coll::Context::sharedMinBytes)
  int ranksOnHost = 1;
  HostModel model;
  int trials = 0;              ///< FERRY_TUNE_TRIALS: measured calls per candidate; 0: the model alone
  size_t measureMaxBytes = 0;  ///< FERRY_TUNE_MEASURE_BYTES: largest call (bytes moved) select() measures
  /// FERRY_TUNE_MODEL_HOSTS: a communicator spanning more hosts runs no trials (the model alone).
  int modelHosts = std::numeric_limits<int>::max();
  // Communicators over the network (no arena).
  NetLevel net;          ///< measured between hosts; unmeasured: the transport algorithms are not modelled
  int ranksPerHost = 1;  ///< ranks on a host (the most on any host), numbered host by host
  /// Links from a host to the network, rank r of a host on link r mod nicsPerHost (rail-optimised
  /// hosts give each GPU its own NIC): ceil(ranksPerHost / nicsPerHost) streams share one link.
  int nicsPerHost = 1;
  /// Messages between two ranks of one host; unmeasured: priced as the network's (`net`).
  NetLevel intra;
  size_t sliceBytes = 256 * 1024;  ///< FERRY_SLICE_BYTES: the pipelined chains' slices
  // Communicators spanning hosts with the two levels of runtime/hierarchy.hpp built.
  bool hierarchy = false;
  int hosts = 1;
  bool evenHosts = false;  ///< every host has as many ranks
  /// Predicted seconds of one call of (kind, bytes) on this rank's intra-host communicator.
  std::function<double(CallKind, size_t)> localCost;
  double localCopyBw = 0;  ///< memcpy bytes per second on this host (blocks permuted between levels)
};

/// The rails ring's rails (algorithms.hpp, railsAllReduce) for a call on `ranks` ranks whose
/// segments (one step's bytes per rank) are `segment` bytes: one per NIC, up to the ranks of a
/// host, and no more than leave each rail a quarter of a slice: smaller parts add messages and their
/// latencies without moving the bytes faster. One on a single host, or on hosts of unequal size
/// (`ranks` not a multiple of `hostRanks`). The same on every rank: it depends on the call alone.
inline int railsFor(int nics, int hostRanks, int ranks, double segment, size_t sliceBytes) {
  if (hostRanks < 2 || ranks <= hostRanks || ranks % hostRanks != 0) return 1;
  const double most = std::max(1, std::min(nics, hostRanks));
  const double fit = std::floor(segment / std::max(1.0, static_cast<double>(sliceBytes) / 4));
  return static_cast<int>(std::clamp(fit, 1.0, most));
}

/// A row that does not apply to the call.
inline constexpr double kInapplicable = std::numeric_limits<double>::infinity();
/// A row the model does not price: taken only where nothing priced applies, or FERRY_ALGO asks.
/// The transport algorithms on one host are such rows: the arena ones move fewer bytes there with
/// fewer hand-offs.
inline constexpr double kUnmodelled = 1e9;

/// One call as the cost formulas see it, with the terms they share. `bytes`: the vector for
/// all-reduce, broadcast and reduce; one rank's block for the others.
class Pricing {
 public:
  Pricing(const ModelInputs& in, size_t chunkBytes, size_t bytes, bool shared);

  const ModelInputs& in;
  double B;        ///< the call's bytes
  double n;        ///< ranks
  bool shared;     ///< every rank's buffers are shared memory the peers map
  bool arena;      ///< single host: the arena's algorithms run
  bool cma;        ///< single-copy reads work between every pair
  double mailbox;  ///< bytes of one mailbox

  // On one host.
  bool over;  ///< ranks outnumber cores
  double f;   ///< per-rank work multiplier from sharing cores
  double S;   ///< one hand-off: spinning, or a kernel wake-up when oversubscribed
  double c;   ///< seconds per byte copied through memory
  /// Copying b bytes this rank wrote or will read again itself: up to one chunk at the L2 rate.
  double copy(double b) const { return b * (b <= chunk_ ? cc_ : c); }
  /// Reducing b bytes: up to one chunk the operands and result are cache lines.
  double red(double b) const { return b * (b <= chunk_ ? gc_ : g_); }
  /// Cross-memory reads of b bytes, in chunks.
  double cmaRead(double b) const { return b * k_ + std::ceil(b / chunk_) * in.model.cmaCall; }
  /// Reading b bytes of a peer's announced buffer into our own.
  double peerRead(double b) const { return shared ? b * c : cmaRead(b); }
  /// Reading b bytes of a peer's buffer as an operand of a reduction (free where it is mapped).
  double peerOperand(double b) const { return shared ? 0.0 : cmaRead(b); }
  /// Chunk steps of an algorithm pipelined through the mailboxes, b bytes per segment.
  double pipeSteps(double b) const;
  double chunk() const { return chunk_; }

  // Over the network between hosts: a message of b bytes over one stream costs alpha + b * beta;
  // `share` streams through one host's link divide its rate.
  bool modelled;  ///< the network was measured
  double L;       ///< ranks per host
  /// Streams through one host link when every rank of a host sends across at once: ceil(L / NICs).
  double share;
  double msg(double b, double share) const { return in.net.alpha + b * in.net.beta * share; }
  /// One message of b bytes between two ranks of one host.
  double hostMsg(double b) const;
  /// One hop of a ring step, b bytes: within the host where the ring stays on one, else the step
  /// waits for its hops between hosts, one stream per host link.
  double ringHop(double b) const { return H <= 1 ? hostMsg(b) : msg(b, 1); }
  /// One step of the rails ring, b bytes a rank: min(NICs, ranks per host) rings at once, each
  /// with its part of b; a rail's hop between hosts has a NIC of its own, and a rank's hops within
  /// its host carry the other rails' parts.
  double railsHop(double b) const;
  /// One exchange of b bytes at distance d of recursive doubling or halving on m ranks, every rank
  /// exchanging at once: within a host where the ranks are numbered host by host (m and L powers of
  /// two, d < L), else across hosts, `share` streams per host link.
  double exchange(double m, double d, double b) const;
  /// Recursive doubling all-reduce of b bytes on m ranks: log2(p) whole-vector exchanges, two more
  /// to fold and unfold the rest (p: the largest power of two <= m), and a whole-vector reduction
  /// after each exchange and after the fold.
  double doubling(double m, double b) const;
  /// A measured network's figure, or 0 where it was not measured (one transport algorithm each).
  double flat(double seconds) const { return modelled ? seconds : 0.0; }
  /// Recursive doubling on m ranks: log2(p) exchanges, two more to fold and unfold the rest.
  static double doublingSteps(double m);
  /// A pipelined chain of m ranks: m - 1 hops for the first slice, then one per further slice.
  double chain(double m, double b) const;
  /// A pipelined binary (heap) tree broadcast or reduce of b bytes on m ranks: depth hops for the
  /// first slice, one per further slice, each interior rank sending every slice twice.
  double heapTree(double m, double b) const;
  /// Double binary tree all-reduce of b bytes on m ranks: each half climbs and descends a tree of
  /// depth floor(log2 m) in slices, one level a step; a rank sends about 2b, and across hosts a
  /// host's link carries up to b for each tree.
  double doubleTree(double m, double b) const;
  /// Rabenseifner all-reduce of b bytes on m ranks: 2 log2(p) exchanges moving 2 (p-1)/p b, and
  /// two whole-vector hand-overs where m is not a power of two (p: largest power of two <= m).
  /// Its reductions of (p-1)/p b wait for whole halves, where the ring's overlap its transfers:
  /// from a few hundred KiB the ring wins.
  double rabenseifner(double m, double b) const;
  /// Reduce-scatter by recursive halving (`reduces`: with its reductions, not overlapped) or
  /// all-gather by recursive doubling, blocks of b bytes on m ranks: log2(p) exchanges moving
  /// (p-1)/p m b, d/p of it at distance d (within a host or across, as `exchange` prices them),
  /// plus the fold's m b and b.
  double halvingBlocks(double m, double b, bool reduces) const;
  /// Bruck all-to-all, blocks of b bytes on m ranks: ceil(log2 m) exchanges of about m/2 blocks
  /// through the host's link, and four copies of the m blocks.
  double bruckAllToAll(double m, double b) const;
  /// Seconds per byte of a memcpy on this host (the model's, else the intra-host level's).
  double copyRate() const { return in.model.copyBw > 0 ? 1.0 / in.model.copyBw : localCopy; }
  /// Seconds per output byte of a reduction on this host (the model's, else a copy's).
  double reduceRate() const { return in.model.reduceBw > 0 ? 1.0 / in.model.reduceBw : copyRate(); }

  // Two levels (hosts x ranks per host).
  double H;          ///< hosts
  double localCopy;  ///< seconds per byte of a memcpy on one host (blocks permuted between levels)
  /// A call of (kind, b bytes) on this rank's intra-host communicator.
  double local(CallKind k, double b) const;
  /// An all-reduce of b bytes per rank over the hosts, `share` of them at once per host.
  double crossAllReduce(double b, double share) const;

 private:
  double chunk_, cc_, g_, gc_, k_;
};

}  // namespace coll
}  // namespace ferry
