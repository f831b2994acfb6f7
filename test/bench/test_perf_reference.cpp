// --reference-run's digest file (bench/perf/reference_run.hpp): a recording run, then comparing
// runs that name the first differing element (small outputs) or chunk (large ones).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/perf/options.hpp"
#include "bench/perf/reference_run.hpp"

using namespace ferry::perf;

namespace {

std::string tempPath() {
  static int n = 0;
  return (std::filesystem::temp_directory_path() /
          ("ferry_ref_" + std::to_string(::getpid()) + "_" + std::to_string(n++)))
      .string();
}

}  // namespace

TEST_CASE("reference run: record, then equal outputs pass and the first differing element is named") {
  const std::string path = tempPath();
  std::vector<uint32_t> small(1000), large(20 * ReferenceRun::kChunkElems + 5);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint32_t>(i * 2654435761u);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint32_t>(i * 40503u);
  {
    auto rec = ReferenceRun::open(path, 3, false);
    REQUIRE(rec.isOk());
    CHECK(rec->recording());
    std::string msg;
    CHECK(rec->check("small", small.data(), small.size(), 4, msg) == 0);
    CHECK(rec->check("large", large.data(), large.size(), 4, msg) == 0);
    REQUIRE(rec->finish().isOk());
  }
  REQUIRE(std::filesystem::exists(path + ".rank3"));
  auto cmp = ReferenceRun::open(path, 3, false);
  REQUIRE(cmp.isOk());
  CHECK_FALSE(cmp->recording());
  std::string msg;
  CHECK(cmp->check("small", small.data(), small.size(), 4, msg) == 0);
  CHECK(cmp->check("large", large.data(), large.size(), 4, msg) == 0);
  // One bit of element 517 and of element 900: the file kept the bytes, so the element is named.
  const uint32_t want517 = small[517];
  small[517] ^= 1;
  small[900] ^= 1;
  CHECK(cmp->check("small", small.data(), small.size(), 4, msg) == 2);
  char expect[160];
  std::snprintf(expect, sizeof(expect), "small: element 517 of 1000 differs first (expected 0x%08x, got 0x%08x); 2",
                want517, want517 ^ 1);
  CHECK(msg.rfind(expect, 0) == 0);
  // A large output keeps hashes only: the first differing chunk and its element range.
  large[2 * ReferenceRun::kChunkElems + 7] += 1;
  CHECK(cmp->check("large", large.data(), large.size(), 4, msg) == 1);
  CHECK(msg.find("chunk 2 (elements 8192-12287 of 81925) differs first") != std::string::npos);
  // Another length, and a key the recording run never saw.
  CHECK(cmp->check("small", small.data(), 999, 4, msg) == 1);
  CHECK(msg.find("999 elements where") != std::string::npos);
  CHECK(cmp->check("other", small.data(), small.size(), 4, msg) == 1);
  CHECK(msg.find("not in") != std::string::npos);
  std::filesystem::remove(path + ".rank3");
}

TEST_CASE("reference run: a failed recording leaves no file; --reference-run-full keeps large outputs") {
  const std::string path = tempPath();
  std::vector<uint16_t> v(2 * ReferenceRun::kChunkElems * 20);
  {
    auto rec = ReferenceRun::open(path, 0, false);
    REQUIRE(rec.isOk());
    std::string msg;
    rec->check("v", v.data(), v.size(), 2, msg);
  }  // no finish(): the run failed
  CHECK_FALSE(std::filesystem::exists(path + ".rank0"));
  CHECK_FALSE(std::filesystem::exists(path + ".rank0.tmp"));
  {
    auto rec = ReferenceRun::open(path, 0, true);
    REQUIRE(rec.isOk());
    std::string msg;
    rec->check("v", v.data(), v.size(), 2, msg);
    REQUIRE(rec->finish().isOk());
  }
  auto cmp = ReferenceRun::open(path, 0, false);
  REQUIRE(cmp.isOk());
  v[100000] = 0xBEEF;
  std::string msg;
  CHECK(cmp->check("v", v.data(), v.size(), 2, msg) == 1);
  CHECK(msg.find("element 100000 of 163840 differs first (expected 0x0000, got 0xbeef)") != std::string::npos);
  std::filesystem::remove(path + ".rank0");
}

TEST_CASE("reference run options: a file name, -c, and the flags that need it") {
  auto o = parseOptions({"all_reduce", "--reference-run", "f", "--reference-run-full", "--reference-inputs", "spread"});
  REQUIRE(o.isOk());
  CHECK(o->referenceRun == "f");
  CHECK(o->referenceRunFull);
  CHECK(o->spreadInputs);
  CHECK_FALSE(parseOptions({"all_reduce", "--reference-run", "f", "-c", "0"}).isOk());
  CHECK_FALSE(parseOptions({"all_reduce", "--reference-inputs", "spread"}).isOk());
  CHECK_FALSE(parseOptions({"all_reduce", "--reference-run", "f", "--reference-inputs", "random"}).isOk());
}

TEST_CASE("spread inputs: a sum of them depends on the order of the ranks") {
  std::vector<float> a(4096), b(4096), c(4096);
  fillSpreadInput(ferry::DataType::kFloat32, 0, 1, a.data(), a.size());
  fillSpreadInput(ferry::DataType::kFloat32, 1, 1, b.data(), b.size());
  fillSpreadInput(ferry::DataType::kFloat32, 2, 1, c.data(), c.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += (a[i] + b[i]) + c[i] != a[i] + (b[i] + c[i]);
  CHECK(differ > a.size() / 20);
}
