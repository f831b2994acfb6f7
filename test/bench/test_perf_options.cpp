// ferry-perf's command line, nccl-tests' formulas and number format.
#include <catch2/catch.hpp>

#include "bench/perf/collectives.hpp"
#include "bench/perf/options.hpp"
#include "bench/perf/report.hpp"

namespace {

using ferry::DataType;
using ferry::RedOp;
using namespace ferry::perf;

Options parseOk(std::vector<std::string> args) {
  auto r = parseOptions(args);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return *r;
}

// The error message for `args`, which must not parse.
std::string parseError(std::vector<std::string> args) {
  auto r = parseOptions(args);
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == ferry::ErrorCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("defaults are nccl-tests'") {
  const Options o = parseOk({"all_reduce"});
  CHECK(o.colls == std::vector<Coll>{Coll::kAllReduce});
  CHECK(o.minBytes == 32u << 20);
  CHECK(o.maxBytes == 32u << 20);
  CHECK(o.iters == 20);
  CHECK(o.warmupIters == 5);
  CHECK(o.check == 1);
  CHECK(o.average == 1);
  CHECK(o.op == RedOp::kSum);
  CHECK(o.type == DataType::kFloat32);
  CHECK(o.root == 0);
}

TEST_CASE("short, attached, long and --name=value forms") {
  const Options o = parseOk({"reduce",
                             "-b",
                             "8",
                             "-e64M",
                             "--stepfactor",
                             "4",
                             "--iters=3",
                             "-w",
                             "0",
                             "-m",
                             "2",
                             "-c",
                             "2",
                             "-o",
                             "max",
                             "-d",
                             "bfloat16",
                             "-r",
                             "1",
                             "-z",
                             "1",
                             "-T",
                             "30",
                             "-a",
                             "3",
                             "-J",
                             "out.json",
                             "-M",
                             "1",
                             "-N",
                             "2",
                             "--iter_budget",
                             "1G",
                             "-t",
                             "1",
                             "-g",
                             "1"});
  CHECK(o.colls == std::vector<Coll>{Coll::kReduce});
  CHECK(o.minBytes == 8);
  CHECK(o.maxBytes == 64u << 20);
  CHECK(o.stepFactor == 4);
  CHECK(o.iters == 3);
  CHECK(o.warmupIters == 0);
  CHECK(o.aggIters == 2);
  CHECK(o.check == 2);
  CHECK(o.op == RedOp::kMax);
  CHECK(o.type == DataType::kBfloat16);
  CHECK(o.root == 1);
  CHECK(o.blocking == 1);
  CHECK(o.timeoutSeconds == 30);
  CHECK(o.average == 3);
  CHECK(o.jsonPath == "out.json");
  CHECK(o.memoryReport);
  CHECK(o.runCycles == 2);
  CHECK(o.iterBudget == size_t{1} << 30);
}

TEST_CASE("-o takes the bitwise ops by name") {
  CHECK(parseOk({"all_reduce", "-o", "band", "-d", "uint64"}).op == RedOp::kBand);
  // The default type is float: a bitwise op needs -d.
  CHECK_THAT(parseError({"all_reduce", "-o", "band"}), Catch::Contains("got -d float32"));
  CHECK(parseOk({"all_reduce", "-o", "bor", "-d", "int8"}).op == RedOp::kBor);
  CHECK(parseOk({"reduce", "--op", "bxor", "-d", "all"}).op == RedOp::kBxor);
}

TEST_CASE("all, and nccl-tests' names for types, ops, roots and collectives") {
  const Options o = parseOk({"all", "-d", "all", "-o", "all", "-r", "all"});
  CHECK(o.colls.size() == kNumColls);
  CHECK_FALSE(o.type.has_value());
  CHECK_FALSE(o.op.has_value());
  CHECK(o.root == -1);
  CHECK(parseOk({"all_reduce_perf"}).colls[0] == Coll::kAllReduce);
  CHECK(parseOk({"alltoall"}).colls[0] == Coll::kAllToAll);
  CHECK(parseOk({"sendrecv", "-d", "half"}).type == DataType::kFloat16);
  CHECK(parseOk({"sendrecv", "-d", "float64"}).type == DataType::kFloat64);
  CHECK(parseOk({"sendrecv", "-d", "double"}).type == DataType::kFloat64);
  CHECK(parseOk({"reduce", "-r", "-1"}).root == -1);
  CHECK(parseOk({"-h"}).help);
}

TEST_CASE("bad flags are usage errors naming the flag and the value") {
  CHECK_THAT(parseError({"all_reduce", "-q", "1"}), Catch::Contains("unknown flag '-q'"));
  CHECK_THAT(parseError({"all_reduce", "--bogus=1"}), Catch::Contains("unknown flag '--bogus=1'"));
  CHECK_THAT(parseError({"all_reduce", "-b", "12Q"}), Catch::Contains("-b '12Q' is not a size"));
  CHECK_THAT(parseError({"all_reduce", "--maxbytes=-1"}), Catch::Contains("--maxbytes '-1' is not a size"));
  CHECK_THAT(parseError({"all_reduce", "-n", "0"}), Catch::Contains("-n '0' is not valid"));
  CHECK_THAT(parseError({"all_reduce", "-n", "2x"}), Catch::Contains("-n '2x'"));
  CHECK_THAT(parseError({"all_reduce", "-a", "4"}), Catch::Contains("-a '4'"));
  CHECK_THAT(parseError({"all_reduce", "-o", "mean"}), Catch::Contains("-o 'mean' is not an op"));
  CHECK_THAT(parseError({"all_reduce", "-o", "mulsum"}), Catch::Contains("not supported"));
  CHECK_THAT(parseError({"all_reduce", "-o", "mean"}),
             Catch::Contains("expected sum, prod, max, min, avg, band, bor, bxor or all"));
  CHECK_THAT(parseError({"all_reduce", "-o", "bxor", "-d", "float"}),
             Catch::Contains("-o bxor needs an integer type (int8, uint8, int32, uint32, int64, uint64), got -d "
                             "float32"));
  CHECK_THAT(parseError({"all_reduce", "--datatype", "float8"}), Catch::Contains("--datatype 'float8' is not a type"));
  CHECK_THAT(parseError({"all_reduce", "-e"}), Catch::Contains("-e needs a value"));
  CHECK_THAT(parseError({"all_reduce", "-g", "8"}), Catch::Contains("-g 8"));
  CHECK_THAT(parseError({"all_reduce", "-b", "1M", "-e", "1K"}), Catch::Contains("-b 1048576 is larger than -e 1024"));
  CHECK_THAT(parseError({"allreduc"}), Catch::Contains("'allreduc' is not a collective"));
  CHECK_THAT(parseError({"-b", "8"}), Catch::Contains("no collective"));
}

TEST_CASE("GPU mode flags: --gpu-ranks, --device, --graph") {
  const Options cpu = parseOk({"all_reduce"});
  CHECK(cpu.gpuRanks == 0);
  CHECK(cpu.device == 0);
  CHECK_FALSE(cpu.graph);
  const Options o = parseOk({"all_reduce", "alltoall", "--gpu-ranks", "4", "--device=1", "--graph", "-b", "8"});
  CHECK(o.colls == std::vector<Coll>{Coll::kAllReduce, Coll::kAllToAll});
  CHECK(o.gpuRanks == 4);
  CHECK(o.device == 1);
  CHECK(o.graph);
  CHECK(o.minBytes == 8);
  CHECK(parseOk({"all_reduce", "--gpu-ranks=2", "--iter_budget", "1G"}).iterBudget == size_t{1} << 30);
  CHECK_THAT(parseError({"all_reduce", "--gpu-ranks", "0"}), Catch::Contains("--gpu-ranks '0'"));
  CHECK_THAT(parseError({"all_reduce", "--gpu-ranks", "two"}), Catch::Contains("--gpu-ranks 'two'"));
  CHECK_THAT(parseError({"all_reduce", "--device", "-1"}), Catch::Contains("--device '-1'"));
  CHECK_THAT(parseError({"all_reduce", "--graph"}), Catch::Contains("--graph needs --gpu-ranks"));
  CHECK(parseOk({"all_reduce", "--gpu-ranks", "2", "--rank-threads"}).rankThreads);
  CHECK_THAT(parseError({"all_reduce", "--rank-threads"}), Catch::Contains("--rank-threads needs --gpu-ranks"));
  CHECK_THAT(parseError({"all_reduce", "--gpu-ranks", "2", "--rank-threads", "--graph"}),
             Catch::Contains("do not combine"));
  CHECK_THAT(parseError({"all_reduce", "--gpu-ranks", "2", "-z", "1"}), Catch::Contains("-z 1"));
  CHECK_THAT(parseError({"all_reduce", "--gpu-ranks", "2", "-T", "5"}), Catch::Contains("-T"));
}

TEST_CASE("sizes step by factor or by bytes, inclusive of -e") {
  CHECK(parseOk({"all_reduce", "-b", "8", "-e", "64M", "-f", "4"}).sizes().size() == 12);  // 8 ... 32M
  CHECK(parseOk({"all_reduce", "-b", "1K", "-e", "4K", "-f", "2"}).sizes() == std::vector<size_t>{1024, 2048, 4096});
  CHECK(parseOk({"all_reduce", "-b", "1K", "-e", "3K", "-i", "1K"}).sizes() == std::vector<size_t>{1024, 2048, 3072});
  CHECK(parseOk({"all_reduce", "-b", "0", "-e", "4", "-f", "2"}).sizes() == std::vector<size_t>{0, 1, 2, 4});
  CHECK(parseOk({"all_reduce", "-b", "1.5K", "-e", "1.5K"}).sizes() == std::vector<size_t>{1536});
}

TEST_CASE("the iteration budget caps iterations at large sizes only") {
  const Options o = parseOk({"all_reduce", "-n", "20", "-w", "5", "--iter_budget", "64M"});
  CHECK(o.itersFor(1 << 20) == 20);
  CHECK(o.itersFor(16 << 20) == 4);
  CHECK(o.itersFor(256 << 20) == 1);
  CHECK(o.warmupFor(1 << 20) == 5);
  CHECK(o.warmupFor(32 << 20) == 2);
  CHECK(o.warmupFor(256 << 20) == 1);
  CHECK(parseOk({"all_reduce", "-w", "0", "--iter_budget", "1M"}).warmupFor(64 << 20) == 0);
  CHECK(parseOk({"all_reduce"}).itersFor(size_t{1} << 30) == 20);
}

TEST_CASE("counts per collective are nccl-tests'") {
  // 1 MiB of floats over 4 ranks: 262144 elements.
  const size_t count = 262144;
  CollCounts c = collCounts(Coll::kAllReduce, count, 4, 4);
  CHECK(c.sendCount == count);
  CHECK(c.recvCount == count);
  CHECK(c.paramCount == count);
  c = collCounts(Coll::kReduceScatter, count, 4, 4);
  CHECK(c.sendCount == count);
  CHECK(c.recvCount == count / 4);
  CHECK(c.paramCount == count / 4);
  CHECK(c.recvInplaceOffset == count / 4);
  c = collCounts(Coll::kAllGather, count, 4, 4);
  CHECK(c.sendCount == count / 4);
  CHECK(c.recvCount == count);
  CHECK(c.sendInplaceOffset == count / 4);
  CHECK(c.bytes(4) == 1u << 20);
  c = collCounts(Coll::kAllToAll, count, 4, 4);
  CHECK(c.paramCount == count / 4);
  CHECK(c.sendCount == count);
  // Per-rank shares round down to 16 bytes: 100 floats over 3 ranks = 33 -> 32 each.
  c = collCounts(Coll::kAllGather, 100, 4, 3);
  CHECK(c.paramCount == 32);
  CHECK(c.bytes(4) == 32 * 3 * 4);
  CHECK(collCounts(Coll::kReduceScatter, 2, 4, 4).bytes(4) == 0);
  CHECK(collCounts(Coll::kAllToAll, 64, 1, 2).paramCount == 32);
  CHECK(collCounts(Coll::kAllToAll, 40, 1, 2).paramCount == 16);
  CHECK(collCounts(Coll::kBroadcast, 7, 8, 5).paramCount == 7);
}

TEST_CASE("bus bandwidth factors and algorithm bandwidth are nccl-tests'") {
  CHECK(busFactor(Coll::kAllReduce, 4) == Approx(1.5));
  CHECK(busFactor(Coll::kAllReduce, 2) == Approx(1.0));
  CHECK(busFactor(Coll::kReduceScatter, 4) == Approx(0.75));
  CHECK(busFactor(Coll::kAllGather, 3) == Approx(2.0 / 3));
  CHECK(busFactor(Coll::kAllToAll, 8) == Approx(0.875));
  CHECK(busFactor(Coll::kBroadcast, 4) == 1.0);
  CHECK(busFactor(Coll::kReduce, 4) == 1.0);
  CHECK(busFactor(Coll::kSend, 4) == 1.0);
  CHECK(busFactor(Coll::kAllReduce, 1) == 0.0);
  // 1e9 bytes in one second is 1 GB/s; gather-like collectives count the whole array.
  CHECK(algBandwidth(Coll::kAllReduce, 250000000, 4, 1.0, 4) == Approx(1.0));
  CHECK(algBandwidth(Coll::kAllGather, 62500000, 4, 1.0, 4) == Approx(1.0));
  CHECK(algBandwidth(Coll::kReduceScatter, 62500000, 4, 0.5, 4) == Approx(2.0));
  CHECK(algBandwidth(Coll::kAllToAll, 62500000, 4, 1.0, 4) == Approx(1.0));
  CHECK(algBandwidth(Coll::kSend, 1000, 1, 1e-6, 2) == Approx(1.0));
}

TEST_CASE("numbers are formatted as nccl-tests' columns") {
  CHECK(formatNumber(19.98, 7) == "  19.98");
  CHECK(formatNumber(2559.49, 7) == "2559.49");
  CHECK(formatNumber(24836.84, 7) == "24836.8");
  CHECK(formatNumber(804134.9, 7) == " 804135");
  CHECK(formatNumber(12345678.0, 7) == "1.2e+07");
  CHECK(formatNumber(0.0, 6) == "  0.00");
  CHECK(formatNumber(1.5, 6) == "  1.50");
  CHECK(formatNumber(123.456, 6) == "123.46");
  CHECK(formatNumber(1234.5, 6) == "1234.5");
  CHECK(formatNumber(123456.0, 6) == "123456");
}

TEST_CASE("formatBytes names sizes for people") {
  CHECK(formatBytes(8) == "8 B");
  CHECK(formatBytes(64 << 10) == "64 KiB");
  CHECK(formatBytes(256u << 20) == "256 MiB");
  CHECK(formatBytes(1536) == "1.5 KiB");
}
