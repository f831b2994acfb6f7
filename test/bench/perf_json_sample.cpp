// Writes a results file through the real Report, with made-up rows, for the JSON schema test:
//   perf_json_sample OUT.json
// Covers what a run can produce: every collective, a checked and an unchecked (N/A) measurement,
// wrong elements on one rank, a skipped type, a memory report and an error.
#include <cstdio>

#include "bench/perf/report.hpp"

using namespace ferry::perf;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: perf_json_sample OUT.json\n");
    return 2;
  }
  auto options = parseOptions({"all", "-b", "8", "-e", "1K", "-f", "4", "-J", argv[1], "-M", "1"});
  if (!options.isOk()) return 1;
  FILE* text = std::fopen("/dev/null", "w");
  Report report(*options, "ferry-perf", "ferry 0.0.0", 2, true, {"ferry-perf", "all", "-J", argv[1]}, text);
  std::vector<RankInfo> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].pid = 100 + r;
    std::snprintf(ranks[r].host, sizeof(ranks[r].host), "host\"quoted\"");
    std::snprintf(ranks[r].device, sizeof(ranks[r].device), "cpu Example\\Model");
  }
  report.header(ranks);
  for (Coll coll : allColls()) {
    report.beginCollective(coll);
    Measurement good{0.000012, 0.5, 0.75, true, 0, {0, 0}, 20, 5};
    Measurement na{0.000011, 0.6, 0.9, false, 0, {}, 20, 5};
    Measurement bad{0.001, 1.0, 1.5, true, 3, {0, 3}, 2, 1};
    report.row({coll, 1024, 256, ferry::DataType::kFloat32, ferry::RedOp::kSum, collInfo(coll).rooted ? 0 : -1, good,
                coll == Coll::kSend ? na : good});
    if (coll == Coll::kAllReduce)
      report.row({coll, 4096, 1024, ferry::DataType::kFloat32, ferry::RedOp::kAvg, -1, bad, good});
    if (coll == Coll::kReduce) report.skipped(coll, ferry::DataType::kFloat16, ferry::RedOp::kSum, "Open MPI 4.1.4");
    report.endCollective();
  }
  report.memory({1 << 20, 2 << 20, 3 << 20});
  report.error("an example error");
  const bool ok = report.finish();
  std::fclose(text);
  return ok ? 0 : 1;
}
