// ferry-train's end-of-run report: each rank's summary of its steps, gathered on every rank,
// printed, and written as JSON by rank 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/comm.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// One rank's run in numbers (means over the steps after the first, which pays for warm-up).
struct RankSummary {
  int rank = 0;
  uint64_t sent = 0, received = 0;  ///< bytes of the last step
  uint64_t formulaSent = 0;
  bool bytesSteady = true;  ///< every step sent exactly `sent` bytes (or the check looks at the last only)
  double stepMs = 0, commMs = 0, exposedMs = 0, overlap = 0;
  uint64_t stateBytes = 0, peakStateBytes = 0, offloadBytes = 0, ddpStateBytes = 0;
  uint64_t peakActivationBytes = 0;
  double bubble = 0, bubbleTheory = -1;  ///< pipeline only (theory -1 elsewhere)
  uint64_t droppedTokens = 0;            ///< MoE, last step, all ranks
  double difference = -1;                ///< from one process (--check), else -1
};

/// Every rank's summary and loss curve.
struct JobSummary {
  std::vector<RankSummary> ranks;
  std::vector<std::vector<float>> losses;  ///< per rank, per step (NaN where a rank computes none)
  uint64_t totalSent = 0;
  /// Per step, the mean of the ranks' losses (each a mean over equal shares of the global batch).
  std::vector<double> lossCurve() const;
};

RankSummary summarizeRank(const std::vector<StepStats>& steps, uint64_t formulaSent, double difference,
                          uint64_t ddpStateBytes, double bubbleTheory, bool lastStepOnly);

/// All-gather every rank's summary and losses (a collective: every rank calls it).
Result<JobSummary> gatherSummaries(Comm& comm, const RankSummary& mine, const std::vector<StepStats>& steps);

/// This rank's summary line; rank 0 adds the loss curve and the job's totals.
void printSummary(const std::string& strategy, const RankSummary& mine, const JobSummary& job, uint64_t formulaTotal);

/// The whole job as JSON at `path`; `extra`, when not empty, is added as more members of the top
/// object (text such as `"timeline": [...]`).
Status writeJson(const std::string& path, const std::string& strategy, const TrainConfig& config, int ranks,
                 const JobSummary& job, uint64_t formulaTotal, const std::string& extra = "");

}  // namespace ferry::train
