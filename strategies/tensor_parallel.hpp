// Tensor parallel (Megatron) and sequence parallel training of the FFN model.
//
// Tensor parallel: the n ranks share every block. W1 is split by columns and W2 by rows, so
// rank t computes u_t = a·W1[:, t] and z_t = GELU(u_t)·W2[t, :], a partial sum of the block's
// output; one all-reduce (sum) of z per block forward makes it whole. In backward the gradient
// of a (the LayerNorm output, which every rank fed into its columns) is again a sum of partials,
// one all-reduce per block. Every rank sees the whole batch; embedding, LayerNorm, biases b2 and
// the head are replicated and computed redundantly, and their gradients agree without communication.
//
// Sequence parallel: the regions outside W1..W2 (embedding, LayerNorm, residual, head, loss) run
// on 1/n of the rows (the tokens of the flattened batch × sequence) instead of redundantly. Before
// W1 an all-gather collects all rows of a; after W2 a reduce-scatter sums the partials and leaves
// each rank its rows: an all-reduce is exactly a reduce-scatter followed by an all-gather, so the
// bytes are the same as tensor parallel while activations outside the split region take 1/n of
// the memory. Backward mirrors it (all-gather of the output gradient, reduce-scatter of a's).
// The replicated parameters now see only their rows, so their gradients are summed over the ranks
// once per step (one all-reduce of R floats), and the loss gradient is scaled by 1/n so the sum
// is the gradient of the mean over the whole batch.
//
// Cost per step and rank (B rows, hidden h, L blocks): tensor parallel 2L ring all-reduces of B·h
// floats; sequence parallel 2L (all-gather + reduce-scatter) of B·h/n floats per rank, plus the
// all-reduce of the R replicated gradient floats.
#pragma once

#include <vector>

#include "ferry/comm.hpp"
#include "strategies/ffn.hpp"

namespace ferry::train {

/// Train `model` (built with FfnPart{rank, n}) with tensor parallelism on `comm`, sequence
/// parallel when `sequence`. Returns this rank's StepStats per step.
Result<std::vector<StepStats>> trainTensorParallel(Comm& comm, const TrainConfig& config, bool sequence,
                                                   FfnModel& model, const StepCallback& onStep = nullptr);

/// Floats of the parameters every tensor-parallel rank holds whole (summed once per step under sequence parallel).
size_t replicatedCount(const FfnModel& model);

/// Bytes rank `rank` of `n` sends per step under tensor (sequence = false) or sequence parallelism.
uint64_t tensorParallelBytesSent(const FfnModel& model, size_t globalBatch, bool sequence, int n, int rank);

}  // namespace ferry::train
