// Data parallel, DDP style: every rank holds the whole model, gradients are averaged with
// all-reduce in buckets that start while backward is still running.
//
// Vocabulary:
//   bucket   a contiguous range of the model's flat gradient buffer, at least `bucketBytes` long
//            (the last one may be shorter) and never splitting a parameter. The model lays its
//            gradients out in the order backward finishes them, so bucket 0 fills first.
//   ready    backward has written a parameter's gradient. When every parameter of a bucket is
//            ready, its all-reduce (average, in place) is queued on the communicator's progress
//            thread at once and backward carries on with earlier layers meanwhile.
//   overlap  the share of the all-reduce time that fell inside backward; what was left after
//            backward ended (waiting for the last buckets) is the exposed communication time.
//
// Every rank then runs the same optimizer step on the same averaged gradients, so the replicas
// stay bitwise identical. Cost per step: one ring all-reduce of P floats in total, 2(n-1)·P·4
// bytes over all ranks, independent of the bucket size (buckets change latency and overlap only).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "ferry/comm.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// One all-reduce bucket: parameters [firstParam, endParam) of Mlp::params(), floats [offset, offset+count).
struct Bucket {
  size_t firstParam = 0;
  size_t endParam = 0;
  size_t offset = 0;
  size_t count = 0;
};

/// Group the parameters, in order, into buckets of at least `bucketBytes` bytes.
std::vector<Bucket> planBuckets(const std::vector<ParamSlot>& params, size_t bucketBytes);

/// Train `model` with DDP on `comm`: rank r takes rows [r·G/n, (r+1)·G/n) of each global batch of G
/// rows (G divisible by n). Rank 0's initial parameters are broadcast first. Returns this rank's
/// StepStats per step; the model then holds the trained parameters.
Result<std::vector<StepStats>> trainDdp(Comm& comm, const TrainConfig& config, Mlp& model,
                                        const StepCallback& onStep = nullptr);

/// Elastic DDP: what to do when ranks die.
struct ElasticOptions {
  int maxShrinks = 4;  ///< give up (return the error) after this many
  /// Called on every rank inside backward, when the step's first bucket is ready (its all-reduce
  /// about to start): ferry-train's fault injection kills a rank here.
  std::function<void(int step)> midStep;
  /// Told of each shrink: the step that failed, its error, and the new communicator.
  std::function<void(int step, const Status& why, const Comm& now)> onShrink;
};

/// trainDdp that survives the death of ranks: when a step fails, the survivors shrink `comm`
/// (Comm::shrink, dead ranks found by the leader), agree on the last step every one of them
/// finished, roll back to it where a rank got one step further (each rank keeps its parameters and
/// optimizer from before the last two steps), and go on with the global batch shared among fewer
/// ranks (its size must divide by each rank count met). The replicas stay identical and the
/// result equals one process training on the whole batches. `comm` is replaced by the shrunk one.
Result<std::vector<StepStats>> trainDdpElastic(std::unique_ptr<Comm>& comm, const TrainConfig& config, Mlp& model,
                                               const StepCallback& onStep, const ElasticOptions& elastic);

}  // namespace ferry::train
