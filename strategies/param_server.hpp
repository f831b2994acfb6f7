// Data parallel with a parameter server (synchronous).
//
// Rank 0 is the server: it holds the parameters and the optimizer state and trains on no data.
// Ranks 1..n-1 are workers; each step the global batch is split evenly between them. A step:
//
//   server                                   worker w
//   send P params to every worker   ──pull──▶ receive P params
//                                             forward + backward on its rows
//   receive P grads from every worker ◀─push── send P grads
//   average the w gradients, optimizer step
//
// Both halves are one sendRecv batch on the server (all workers at once). After the last step the
// workers pull once more so every rank ends with the trained parameters. The server's link
// carries 2·w·P floats per step while each worker's carries 2·P: with more workers the server is
// the bottleneck, which is why DDP replaced this design.
#pragma once

#include <vector>

#include "ferry/comm.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// Train `model` (same initial parameters on every rank) with a parameter server on `comm`
/// (at least 2 ranks; config.globalBatch divisible by the n-1 workers). Returns one StepStats per
/// step for this rank; the model then holds the trained parameters on every rank.
Result<std::vector<StepStats>> trainParameterServer(Comm& comm, const TrainConfig& config, Mlp& model,
                                                    const StepCallback& onStep = nullptr);

}  // namespace ferry::train
