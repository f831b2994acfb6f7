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
      modelled(inputs.net.measured), L(std::max(1, inputs.ranksPerHost)), H(inputs.hosts),
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
}  // namespace

double Pricing::heapTree(double m, double b) const {
  const double slice = static_cast<double>(std::max<size_t>(in.sliceBytes, 1));
  const double slices = std::max(1.0, std::ceil(b / slice));
  const double depth = std::ceil(std::log2(m + 1)) - 1;
  return (depth - 1 + slices) * msg(std::min(b, slice), 2);
}

double Pricing::doubleTree(double m, double b) const {
  const double slice = static_cast<double>(std::max<size_t>(in.sliceBytes, 1));
  const double chunks = std::max(1.0, std::ceil(b / 2 / slice));
  return 2 * log2Floor(m) * msg(std::min(b / 2, slice), 1) + 2 * chunks * in.net.alpha + 2 * b * in.net.beta * L;
}

double Pricing::rabenseifner(double m, double b) const {
  const double p = std::exp2(log2Floor(m));
  const double fold = p < m ? 2 * msg(b, 1) : 0.0;
  return 2 * log2Floor(m) * in.net.alpha + 2 * (p - 1) / p * b * in.net.beta + (p - 1) / p * b * reduceRate() + fold;
}

double Pricing::halvingBlocks(double m, double b, bool reduces) const {
  const double p = std::exp2(log2Floor(m));
  const double fold = p < m ? msg(m * b, 1) + msg(b, 1) : 0.0;
  const double reduce = reduces ? (p - 1) / p * m * b * reduceRate() : 0.0;
  return log2Floor(m) * in.net.alpha + (p - 1) / p * m * b * in.net.beta + reduce + fold;
}

double Pricing::bruckAllToAll(double m, double b) const {
  const double steps = std::ceil(std::log2(m));
  return steps * in.net.alpha + steps * std::ceil(m / 2) * L * b * in.net.beta + 4 * m * b * copyRate();
}

double Pricing::local(CallKind k, double b) const {
  return in.localCost ? in.localCost(k, static_cast<size_t>(b)) : 0.0;
}

double Pricing::crossAllReduce(double b, double share) const {
  return std::min(2 * (H - 1) * msg(b / H, share), doublingSteps(H) * msg(b, share));
}

}  // namespace ferry::coll
