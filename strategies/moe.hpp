// Mixture of experts with expert parallelism: a model of one MoE layer between an embedding and a
// head,
//
//   h = x·E + e;   p = softmax(h·Wg);   z = h + Σ_{e ∈ topk(p), kept} p_e · FFN_e(h);   y = z·H + c
//
// with FFN_e(h) = GELU(h·W1e + b1e)·W2e + b2e. The embedding, the gate Wg and the head are
// replicated; the E experts are split over the n ranks, E/n each.
//
// Vocabulary:
//   group     the tokens (rows) one rank brings: 1/n of the global batch. Routing and capacity are
//             per group, as in GShard, so the single-process reference routes in the same n groups.
//   capacity  an expert takes at most C = ⌈factor · T · k / E⌉ of a group's T tokens; choices are
//             served first choices first, in token order; the rest are dropped (counted), and a
//             dropped token only passes the residual.
//   dispatch  each rank sends every expert's rows to the expert's rank. The row counts are uneven,
//             so they are exchanged first (one all-to-all of E/n counts per peer), then the rows go
//             in one sendRecv batch of uneven sizes; the owner runs each expert on the rows of all
//             groups, in group order.
//   combine   the outputs go back the same way (the reverse sendRecv batch); backward repeats both
//             exchanges with the output gradients and the input gradients.
//   aux loss  the load-balancing loss α·E·Σ_e f_e·P_e (f_e: share of the group's first choices on
//             e, P_e: mean gate probability of e), added per group; its gradient reaches the gate.
//
// Each rank's loss is the mean over its group; the loss gradient is scaled by 1/n so the replicated
// gradients, summed over the ranks by one all-reduce, and the expert gradients, summed over the
// groups' rows, are both gradients of the mean over the global batch.
//
// Cost per step and rank: the counts, (n-1)·E/n·8 bytes each way, plus every row this rank sends
// to or receives from another rank, four times (dispatch, combine, and their gradients): with
// S_out rows sent and S_in received, 2·(S_out + S_in)·h·4 bytes sent; plus the ring all-reduce of
// the R replicated gradient floats. Uniform routing without drops gives S_out = S_in = k·T·(n-1)/n.
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/comm.hpp"
#include "strategies/data.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// The parameters one rank holds: the replicated ones and experts [firstExpert, firstExpert + localExperts).
class MoeModel {
 public:
  /// Draws the full model from `seed`; keeps the experts of `rank` of `ranks`.
  MoeModel(const TrainConfig& config, int rank, int ranks);

  size_t hidden() const { return hidden_; }
  size_t ffn() const { return ffn_; }
  size_t experts() const { return experts_; }
  size_t firstExpert() const { return first_; }
  size_t localExperts() const { return local_; }
  /// Floats per expert.
  size_t expertSize() const { return 2 * hidden_ * ffn_ + ffn_ + hidden_; }
  std::vector<float>& shared() { return shared_; }
  std::vector<float>& sharedGrad() { return sharedGrad_; }
  std::vector<float>& expertParams() { return expertParams_; }
  std::vector<float>& expertGrads() { return expertGrads_; }
  size_t in() const { return in_; }
  size_t out() const { return out_; }
  /// Replicated parameters then this rank's experts, for comparisons.
  std::vector<float> flat() const;
  /// The same of a full (single-process) model's flat(): its shared part and this rank's experts.
  std::vector<float> extract(const std::vector<float>& fullFlat) const;

 private:
  size_t in_, hidden_, ffn_, out_, experts_, first_, local_;
  std::vector<float> shared_, sharedGrad_, expertParams_, expertGrads_;
};

/// Rows each group sent to each expert in one step: counts[g·E + e].
struct MoeRouting {
  std::vector<uint64_t> counts;
  uint64_t dropped = 0;
};

/// Train with expert parallelism on `comm` (model built with this rank). `routing` receives the
/// last step's counts of this rank's group (E entries) and the dropped total over all ranks.
Result<std::vector<StepStats>> trainMoe(Comm& comm, const TrainConfig& config, MoeModel& model,
                                        const StepCallback& onStep = nullptr, MoeRouting* routing = nullptr);

/// One process, the whole model (built with rank 0 of 1): the mean over `groups` groups of each
/// group's loss (cross-entropy or MSE, plus the load-balancing loss) on `global`, whose gradients
/// land in sharedGrad() and expertGrads(). Returns the loss.
float moeGradients(const TrainConfig& config, MoeModel& model, Batch& global, int groups,
                   MoeRouting* routing = nullptr);

/// The single-process reference: all experts, the global batch routed in `groups` groups. Returns
/// MoeModel::flat() of the trained model; `routing` gets the last step's counts of every group.
std::vector<float> trainMoeSingle(const TrainConfig& config, int groups, MoeRouting* routing = nullptr,
                                  std::vector<float>* losses = nullptr);

/// Bytes rank `rank` sends (or, with `received`, receives) per step, from every group's counts
/// (MoeRouting::counts of all groups) and the replicated parameter count.
uint64_t moeBytes(const std::vector<uint64_t>& counts, size_t experts, size_t hidden, size_t sharedCount, int n,
                  int rank, bool received);

}  // namespace ferry::train
