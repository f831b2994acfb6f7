// Fully sharded data parallel (FSDP, ZeRO stage 3): every rank trains on 1/n of the global batch
// like DDP, but holds only 1/n of the parameters, of the gradients and of the optimizer state.
//
// Vocabulary:
//   unit     what is gathered at once: one block of the MLP (γ, β, weight, bias) or the head. A unit
//            is a contiguous range of the model's flat layout, padded with zeros to a multiple of n.
//   shard    rank r's 1/n of a padded unit: floats [r·s, (r+1)·s) with s = ⌈count/n⌉. A rank's
//            parameters, gradients and optimizer state are its shards of every unit, back to back.
//   gather   an all-gather of a unit's shards into a full, temporary copy of the unit; the copy is
//            freed as soon as the layer has run. Forward gathers each unit in forward order and
//            backward gathers it again, in backward order.
//   prefetch while a unit computes, the all-gather of the next unit (in that pass's order) already
//            runs on the communicator's progress thread (Comm::enqueue, what allGatherAsync is built
//            on; enqueue lets the strategy time the collective where it runs, as DDP does).
//   overlap  the share of the collectives' busy time that fell inside a unit's computation.
//
// Backward writes a unit's full gradient into a temporary buffer and starts its reduce-scatter
// (average) at once (queued the same way); rank r keeps the average of its shard. The optimizer then
// steps on the shard alone: SGD and Adam are elementwise, so the sharded update equals the whole
// one. With `offload` the optimizer state lives in a separate page-locked host arena (mmap + mlock,
// best effort) instead of next to the parameters, as ZeRO-Offload keeps it in CPU memory.
//
// Cost per step and rank: two all-gathers and one reduce-scatter of every padded unit, each
// (n-1)·s floats sent: 3(n-1)·Σs·4 bytes, 1.5 times DDP's all-reduce, for n times less memory.
#pragma once

#include <vector>

#include "ferry/comm.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// One FSDP unit: floats [offset, offset + count) of the flat layout, params [firstParam, endParam).
struct FsdpUnit {
  size_t firstParam = 0;
  size_t endParam = 0;
  size_t offset = 0;
  size_t count = 0;
};

/// The units of `model` in flat-layout order: the head, then the blocks from the last.
std::vector<FsdpUnit> planFsdpUnits(const Mlp& model);

/// Train `model` with FSDP on `comm` (same initial parameters on every rank, config.globalBatch
/// divisible by n). Returns this rank's StepStats per step, with its memory; the model then holds
/// the trained parameters (gathered once at the end).
Result<std::vector<StepStats>> trainFsdp(Comm& comm, const TrainConfig& config, Mlp& model,
                                         const StepCallback& onStep = nullptr);

/// What DDP holds for the same model and optimizer: P floats of parameters, P of gradients and the
/// optimizer state, every one for the whole step.
uint64_t ddpStateBytes(size_t params, size_t optimizerBytesPerParam);

}  // namespace ferry::train
