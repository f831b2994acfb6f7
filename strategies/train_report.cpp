// ferry-train's report: summaries, their all-gather, the printed lines and the JSON file.
#include "strategies/train_report.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ferry::train {

namespace {

constexpr size_t kFields = 19;  // RankSummary as doubles, in pack() order

std::vector<double> pack(const RankSummary& s) {
  return {static_cast<double>(s.rank),
          static_cast<double>(s.sent),
          static_cast<double>(s.received),
          static_cast<double>(s.formulaSent),
          s.bytesSteady ? 1.0 : 0.0,
          s.stepMs,
          s.commMs,
          s.exposedMs,
          s.overlap,
          static_cast<double>(s.stateBytes),
          static_cast<double>(s.peakStateBytes),
          static_cast<double>(s.offloadBytes),
          static_cast<double>(s.ddpStateBytes),
          static_cast<double>(s.peakActivationBytes),
          s.bubble,
          s.bubbleTheory,
          static_cast<double>(s.droppedTokens),
          s.difference,
          0.0};
}

RankSummary unpack(const double* d) {
  RankSummary s;
  auto u = [](double v) { return static_cast<uint64_t>(v); };
  s.rank = static_cast<int>(d[0]);
  s.sent = u(d[1]);
  s.received = u(d[2]);
  s.formulaSent = u(d[3]);
  s.bytesSteady = d[4] != 0;
  s.stepMs = d[5];
  s.commMs = d[6];
  s.exposedMs = d[7];
  s.overlap = d[8];
  s.stateBytes = u(d[9]);
  s.peakStateBytes = u(d[10]);
  s.offloadBytes = u(d[11]);
  s.ddpStateBytes = u(d[12]);
  s.peakActivationBytes = u(d[13]);
  s.bubble = d[14];
  s.bubbleTheory = d[15];
  s.droppedTokens = u(d[16]);
  s.difference = d[17];
  return s;
}

// A JSON number; NaN (a rank without a loss) becomes null.
void number(std::FILE* f, double v) {
  if (std::isnan(v)) std::fputs("null", f);
  else std::fprintf(f, "%.9g", v);
}

}  // namespace

std::vector<double> JobSummary::lossCurve() const {
  const size_t steps = losses.empty() ? 0 : losses[0].size();
  std::vector<double> curve(steps, std::numeric_limits<double>::quiet_NaN());
  for (size_t k = 0; k < steps; ++k) {
    double sum = 0;
    int count = 0;
    for (const auto& l : losses)
      if (!std::isnan(l[k])) {
        sum += l[k];
        ++count;
      }
    if (count > 0) curve[k] = sum / count;
  }
  return curve;
}

RankSummary summarizeRank(const std::vector<StepStats>& steps, uint64_t formulaSent, double difference,
                          uint64_t ddpStateBytes, double bubbleTheory, bool lastStepOnly) {
  RankSummary s;
  s.formulaSent = formulaSent;
  s.difference = difference;
  s.ddpStateBytes = ddpStateBytes;
  s.bubbleTheory = bubbleTheory;
  if (steps.empty()) return s;
  const StepStats& last = steps.back();
  s.sent = last.bytesSent;
  s.received = last.bytesReceived;
  s.droppedTokens = last.droppedTokens;
  s.offloadBytes = last.offloadBytes;
  s.stateBytes = last.stateBytes;
  size_t first = steps.size() > 1 ? 1 : 0, count = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepStats& st = steps[i];
    if (!lastStepOnly && st.bytesSent != last.bytesSent) s.bytesSteady = false;
    s.peakStateBytes = std::max<uint64_t>(s.peakStateBytes, st.peakStateBytes);
    s.peakActivationBytes = std::max<uint64_t>(s.peakActivationBytes, st.peakActivationBytes);
    if (i < first) continue;
    s.stepMs += st.stepSeconds * 1e3;
    s.commMs += st.commSeconds * 1e3;
    s.exposedMs += st.exposedSeconds * 1e3;
    s.overlap += st.overlapFraction;
    s.bubble += st.bubbleFraction;
    ++count;
  }
  const double k = count ? static_cast<double>(count) : 1.0;
  s.stepMs /= k;
  s.commMs /= k;
  s.exposedMs /= k;
  s.overlap /= k;
  s.bubble /= k;
  return s;
}

Result<JobSummary> gatherSummaries(Comm& comm, const RankSummary& mine, const std::vector<StepStats>& steps) {
  const size_t n = static_cast<size_t>(comm.size());
  RankSummary me = mine;
  me.rank = comm.rank();
  std::vector<double> packed = pack(me), all(kFields * n);
  FERRY_TRY(comm.allGather(packed.data(), all.data(), kFields, DataType::kFloat64));
  std::vector<float> losses;
  for (const StepStats& st : steps) losses.push_back(st.loss);
  std::vector<float> allLosses(losses.size() * n);
  FERRY_TRY(comm.allGather(losses.data(), allLosses.data(), losses.size(), DataType::kFloat32));
  JobSummary job;
  for (size_t r = 0; r < n; ++r) {
    job.ranks.push_back(unpack(all.data() + r * kFields));
    job.losses.emplace_back(allLosses.begin() + static_cast<long>(r * losses.size()),
                            allLosses.begin() + static_cast<long>((r + 1) * losses.size()));
    job.totalSent += job.ranks.back().sent;
  }
  return job;
}

void printSummary(const std::string& strategy, const RankSummary& s, const JobSummary& job, uint64_t formulaTotal) {
  std::printf("summary: mean step %.3f ms, comm %.3f ms, exposed %.3f ms", s.stepMs, s.commMs, s.exposedMs);
  if (strategy == "ddp" || strategy == "fsdp") std::printf(", overlap %.1f%%", s.overlap * 100);
  if (s.bubbleTheory >= 0)
    std::printf(", bubble %.1f%% (theory (p-1)/(m+p-1) = %.1f%%), peak activations %" PRIu64 " B", s.bubble * 100,
                s.bubbleTheory * 100, s.peakActivationBytes);
  if (strategy == "fsdp")
    std::printf(", model state %" PRIu64 " B, peak %" PRIu64 " B, offloaded %" PRIu64 " B (DDP: %" PRIu64 " B)",
                s.stateBytes, s.peakStateBytes, s.offloadBytes, s.ddpStateBytes);
  else if (s.stateBytes > 0) std::printf(", model state %" PRIu64 " B", s.stateBytes);
  if (strategy == "moe") std::printf(", dropped tokens %" PRIu64, s.droppedTokens);
  std::printf("; bytes sent per step: this rank %" PRIu64 " (formula %" PRIu64 "), all ranks %" PRIu64
              " (formula %" PRIu64 ")\n",
              s.sent, s.formulaSent, job.totalSent, formulaTotal);
  if (s.rank == 0) {
    std::printf("loss curve:");
    for (double l : job.lossCurve()) std::printf(" %.5f", l);
    std::printf("\n");
  }
  std::fflush(stdout);
}

Status writeJson(const std::string& path, const std::string& strategy, const TrainConfig& c, int ranks,
                 const JobSummary& job, uint64_t formulaTotal, const std::string& extra) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return makeError(ErrorCode::kSystemError, "cannot write %s", path.c_str());
  std::fprintf(f,
               "{\n  \"strategy\": \"%s\",\n  \"ranks\": %d,\n  \"config\": {\"in\": %zu, \"hidden\": %zu, \"out\": "
               "%zu, \"blocks\": %zu, \"ffn\": %zu, \"batch\": %zu, \"steps\": %d, \"optimizer\": \"%s\", \"lr\": %g, "
               "\"bucket_bytes\": %zu, \"micro_batches\": %zu, \"experts\": %zu, \"top_k\": %zu, "
               "\"capacity_factor\": %g, \"offload\": %s, \"prefetch\": %s},\n",
               strategy.c_str(), ranks, c.shape.in, c.shape.hidden, c.shape.out, c.shape.blocks, c.ffn, c.globalBatch,
               c.steps, c.optimizer.c_str(), static_cast<double>(c.lr), c.bucketBytes, c.microBatches, c.experts,
               c.topK, static_cast<double>(c.capacityFactor), c.offload ? "true" : "false",
               c.prefetch ? "true" : "false");
  std::fprintf(f, "  \"loss\": [");
  const std::vector<double> curve = job.lossCurve();
  for (size_t k = 0; k < curve.size(); ++k) {
    if (k) std::fputs(", ", f);
    number(f, curve[k]);
  }
  std::fprintf(f,
               "],\n  \"bytes_sent_per_step\": %" PRIu64 ",\n  \"bytes_sent_per_step_formula\": %" PRIu64
               ",\n  \"per_rank\": [\n",
               job.totalSent, formulaTotal);
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    const RankSummary& s = job.ranks[r];
    std::fprintf(f,
                 "    {\"rank\": %d, \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64
                 ", \"bytes_sent_formula\": %" PRIu64
                 ", \"step_ms\": %.4f, \"comm_ms\": %.4f, \"exposed_ms\": %.4f, "
                 "\"overlap\": %.4f, \"state_bytes\": %" PRIu64 ", \"peak_state_bytes\": %" PRIu64
                 ", \"offload_bytes\": %" PRIu64 ", \"ddp_state_bytes\": %" PRIu64
                 ", \"peak_activation_bytes\": %" PRIu64
                 ", \"bubble\": %.4f, \"bubble_theory\": %.4f, \"dropped_tokens\": %" PRIu64 ", \"difference\": ",
                 s.rank, s.sent, s.received, s.formulaSent, s.stepMs, s.commMs, s.exposedMs, s.overlap, s.stateBytes,
                 s.peakStateBytes, s.offloadBytes, s.ddpStateBytes, s.peakActivationBytes, s.bubble, s.bubbleTheory,
                 s.droppedTokens);
    number(f, s.difference < 0 ? std::nan("") : s.difference);
    std::fprintf(f, ", \"loss\": [");
    for (size_t k = 0; k < job.losses[r].size(); ++k) {
      if (k) std::fputs(", ", f);
      number(f, job.losses[r][k]);
    }
    std::fprintf(f, "]}%s\n", r + 1 < job.ranks.size() ? "," : "");
  }
  std::fprintf(f, "  ]%s%s\n}\n", extra.empty() ? "" : ",\n  ", extra.c_str());
  return std::fclose(f) == 0 ? Status() : makeError(ErrorCode::kSystemError, "cannot write %s", path.c_str());
}

}  // namespace ferry::train
