#include "collectives/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace ferry::coll {

Pricing::Pricing(const ModelInputs& inputs, size_t chunkBytes, size_t bytes, bool sharedBuffers)
    : in(inputs), B(static_cast<double>(bytes)), n(inputs.ranks), shared(sharedBuffers), arena(inputs.arena),
      cma(inputs.arena && inputs.cma), mailbox(static_cast<double>(inputs.mailboxBytes)),
      over(inputs.ranksOnHost > inputs.model.cores),
      f(over ? static_cast<double>(inputs.ranksOnHost) / inputs.model.cores : 1.0),
      S(over ? inputs.model.syncSleep : inputs.model.syncSpin), c(1.0 / inputs.model.copyBw),
      modelled(inputs.net.measured), L(std::max(1, inputs.ranksPerHost)),
      share(std::ceil(L / std::max(1, inputs.nicsPerHost))), H(inputs.hosts),
      localCopy(inputs.localCopyBw > 0 ? 1.0 / inputs.localCopyBw : 0.0), chunk_(static_cast<double>(chunkBytes)),
      cc_(inputs.model.copyBwCache > 0 ? 1.0 / inputs.model.copyBwCache : c), g_(1.0 / inputs.model.reduceBw),
      gc_(inputs.model.reduceBwCache > 0 ? 1.0 / inputs.model.reduceBwCache : g_), k_(1.0 / inputs.model.cmaBw) {}

double Pricing::pipeSteps(double b) const {
  const size_t perStep = std::min(static_cast<size_t>(chunk_), in.mailboxBytes / (2 * static_cast<size_t>(in.ranks)));
  return std::max(1.0, std::ceil(b / static_cast<double>(perStep)));
}

double Pricing::doublingSteps(double m) {
  double p = 1, steps = 0;
  while (p * 2 <= m) p *= 2, ++steps;
  return steps + (p < m ? 2 : 0);
}

double Pricing::chain(double m, double b) const {
  const double slice = static_cast<double>(std::max<size_t>(in.sliceBytes, 1));
  const double slices = std::max(1.0, std::ceil(b / slice));
  return (m - 2 + slices) * msg(std::min(b, slice), 1);
}

namespace {
double log2Floor(double m) { return std::floor(std::log2(std::max(1.0, m))); }
bool powerOfTwo(double m) { return m >= 1 && std::exp2(log2Floor(m)) == m; }
}  // namespace

double Pricing::hostMsg(double b) const { return in.intra.measured ? in.intra.alpha + b * in.intra.beta : msg(b, 1); }

double Pricing::railsHop(double b) const {
  const double rails = railsFor(in.nicsPerHost, static_cast<int>(L), static_cast<int>(n), b, in.sliceBytes);
  return std::max(msg(b / rails, 1), hostMsg(b * (rails - 1) / rails));
}

double Pricing::exchange(double m, double d, double b) const {
  // Folding renumbers the ranks, and uneven hosts break the numbering: then every step may cross.
  const bool withinHost = in.evenHosts && powerOfTwo(m) && powerOfTwo(L) && d < L;
  return withinHost ? hostMsg(b) : msg(b, share);
}

double Pricing::doubling(double m, double b) const {
  const double p = std::exp2(log2Floor(m));
  // Every exchange is followed by a reduction of the whole vector, as is the fold's hand-over.
  const double reductions = log2Floor(m) + (p < m ? 1 : 0);
  double t = (p < m ? 2 * msg(b, share) : 0.0) + reductions * b * reduceRate();
  for (double d = 1; d < p; d *= 2) t += exchange(m, d, b);
  return t;
}

double Pricing::heapTree(double m, double b) const {
  const double slice = static_cast<double>(std::max<size_t>(in.sliceBytes, 1));
  const double slices = std::max(1.0, std::ceil(b / slice));
  const double depth = std::ceil(std::log2(m + 1)) - 1;
  return (depth - 1 + slices) * msg(std::min(b, slice), 2);
}

double Pricing::doubleTree(double m, double b) const {
  const double slice = static_cast<double>(std::max<size_t>(in.sliceBytes, 1));
  // The first chunk climbs and descends; later ones follow a step behind, their latencies hidden.
  const double fill = 2 * log2Floor(m) * msg(std::min(b / 2, slice), 1);
  const double within = hostMsg(2 * b) - hostMsg(0);  // the bytes alone: the fill has the latencies
  if (H <= 1) return fill + within;
  // A rank sends about 2b, mostly to ranks of its own host where they are numbered host by host;
  // each tree's edges between hosts meet at one rank of a host, which sends and receives up to b
  // through its own link: the two trees' such ranks differ, so two or more NICs carry them apart.
  const double across = b * in.net.beta * (in.nicsPerHost >= 2 ? 1.0 : 2.0);
  return fill + std::max(within, across);
}

double Pricing::rabenseifner(double m, double b) const {
  const double p = std::exp2(log2Floor(m));
  const double fold = p < m ? 2 * msg(b, share) : 0.0;
  // Halving exchanges half of what is left at distance p/2, then p/4, ...; the gather retraces them.
  double t = fold + (p - 1) / p * b * reduceRate();
  for (double d = p / 2, part = b / 2; d >= 1; d /= 2, part /= 2) t += 2 * exchange(m, d, part);
  return t;
}

double Pricing::halvingBlocks(double m, double b, bool reduces) const {
  const double p = std::exp2(log2Floor(m));
  const double fold = p < m ? msg(m * b, 1) + msg(b, 1) : 0.0;
  const double reduce = reduces ? (p - 1) / p * m * b * reduceRate() : 0.0;
  // Halving sends half the m blocks at distance p/2, a quarter at p/4, ...; doubling retraces
  // those steps in reverse order: at distance d, d/p of them either way.
  double t = fold + reduce;
  for (double d = 1; d < p; d *= 2) t += exchange(m, d, m * b * d / p);
  return t;
}

double Pricing::bruckAllToAll(double m, double b) const {
  const double steps = std::ceil(std::log2(m));
  return steps * in.net.alpha + steps * std::ceil(m / 2) * share * b * in.net.beta + 4 * m * b * copyRate();
}

double Pricing::local(CallKind k, double b) const {
  return in.localCost ? in.localCost(k, static_cast<size_t>(b)) : 0.0;
}

double Pricing::crossAllReduce(double b, double share) const {
  return std::min(2 * (H - 1) * msg(b / H, share), doublingSteps(H) * msg(b, share));
}

}  // namespace ferry::coll
