// Tests of detectLaunch(): every launcher, their precedence, the root address and every error.
//
// The environment is a map handed to detectLaunch() as its lookup, so no test touches the process
// environment and each case states exactly the variables it means. Errors are compared as whole
// messages: the message is the user interface of a broken launch script.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "runtime/launch_env.hpp"

namespace {

using Env = std::map<std::string, std::string>;

ferry::Result<ferry::LaunchInfo> detect(const Env& env) {
  return ferry::detectLaunch([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The message of the error detectLaunch() returns for `env`; fails the test when it succeeds.
std::string errorOf(const Env& env) {
  auto result = detect(env);
  REQUIRE_FALSE(result.isOk());
  CHECK(result.status().code() == ferry::ErrorCode::kInvalidArgument);
  return result.status().message();
}

void checkInfo(const ferry::LaunchInfo& info, int rank, int size, int localRank, int localSize,
               const std::string& source) {
  CHECK(info.rank == rank);
  CHECK(info.size == size);
  CHECK(info.localRank == localRank);
  CHECK(info.localSize == localSize);
  CHECK(info.source == source);
}

}  // namespace

TEST_CASE("no launcher: a single process", "[launch_env]") {
  auto info = detect({});
  REQUIRE(info.isOk());
  checkInfo(*info, 0, 1, 0, 1, "none");
  CHECK(info->rootAddr.empty());
}

TEST_CASE("each launcher is read under its own names", "[launch_env]") {
  SECTION("ferry") {
    auto info =
        detect({{"FERRY_RANK", "3"}, {"FERRY_WORLD_SIZE", "8"}, {"FERRY_LOCAL_RANK", "1"}, {"FERRY_LOCAL_SIZE", "2"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 3, 8, 1, 2, "ferry");
  }
  SECTION("ferry without local variables") {
    auto info = detect({{"FERRY_RANK", "0"}, {"FERRY_WORLD_SIZE", "1"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 0, 1, 0, -1, "ferry");
  }
  SECTION("torchrun") {
    auto info = detect({{"RANK", "5"}, {"WORLD_SIZE", "6"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "3"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 5, 6, 2, 3, "torchrun");
  }
  SECTION("openmpi") {
    auto info = detect({{"OMPI_COMM_WORLD_RANK", "7"},
                        {"OMPI_COMM_WORLD_SIZE", "16"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 7, 16, 3, 4, "openmpi");
  }
  SECTION("pmi with PMI_LOCAL_RANK") {
    auto info = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"PMI_LOCAL_RANK", "0"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 2, 4, 0, -1, "pmi");
  }
  SECTION("pmi with Hydra's MPI_LOCALRANKID and MPI_LOCALNRANKS") {
    auto info = detect({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 3, 4, 1, 2, "pmi");
  }
  SECTION("pmi: PMI_LOCAL_RANK wins over MPI_LOCALRANKID") {
    auto info = detect({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"PMI_LOCAL_RANK", "0"}, {"MPI_LOCALRANKID", "1"}});
    REQUIRE(info.isOk());
    CHECK(info->localRank == 0);
  }
  SECTION("pmi without local rank") {
    auto info = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 1, 2, 0, -1, "pmi");
  }
  SECTION("slurm") {
    auto info = detect({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "12"}, {"SLURM_LOCALID", "1"}});
    REQUIRE(info.isOk());
    checkInfo(*info, 9, 12, 1, -1, "slurm");
  }
}

TEST_CASE("the first launcher found wins and the others are not read", "[launch_env]") {
  Env env = {{"FERRY_RANK", "1"},           {"FERRY_WORLD_SIZE", "2"},     {"RANK", "2"},     {"WORLD_SIZE", "4"},
             {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"PMI_RANK", "4"}, {"PMI_SIZE", "16"},
             {"SLURM_PROCID", "5"},         {"SLURM_NTASKS", "32"}};
  const char* order[][3] = {{"FERRY_RANK", "FERRY_WORLD_SIZE", "ferry"},
                            {"RANK", "WORLD_SIZE", "torchrun"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "openmpi"},
                            {"PMI_RANK", "PMI_SIZE", "pmi"},
                            {"SLURM_PROCID", "SLURM_NTASKS", "slurm"}};
  for (int i = 0; i < 5; ++i) {
    auto info = detect(env);
    REQUIRE(info.isOk());
    CHECK(info->source == order[i][2]);
    CHECK(info->rank == i + 1);
    CHECK(info->size == 2 << i);
    env.erase(order[i][0]);
    env.erase(order[i][1]);
  }
  CHECK(detect(env)->source == "none");
}

TEST_CASE("a broken lower launcher does not matter once a higher one is found", "[launch_env]") {
  auto info = detect(
      {{"FERRY_RANK", "0"}, {"FERRY_WORLD_SIZE", "2"}, {"RANK", "banana"}, {"SLURM_NTASKS", "0"}, {"LOCAL_RANK", "7"}});
  REQUIRE(info.isOk());
  checkInfo(*info, 0, 2, 0, -1, "ferry");
}

TEST_CASE("a local variable alone does not select a launcher", "[launch_env]") {
  auto info = detect({{"LOCAL_RANK", "3"}, {"SLURM_LOCALID", "1"}});
  REQUIRE(info.isOk());
  CHECK(info->source == "none");
}

TEST_CASE("root address", "[launch_env]") {
  CHECK(detect({{"FERRY_ADDR", "node1:4000"}})->rootAddr == "node1:4000");
  CHECK(detect({{"NCCL_COMM_ID", "10.0.0.1:5000"}})->rootAddr == "10.0.0.1:5000");
  CHECK(detect({{"FERRY_ADDR", "[fe80::1]:4000"}})->rootAddr == "[fe80::1]:4000");
  CHECK(detect({{"MASTER_ADDR", "node2"}, {"MASTER_PORT", "29500"}})->rootAddr == "node2:29500");
  CHECK(detect({{"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29500"}})->rootAddr == "[::1]:29500");
  SECTION("FERRY_ADDR wins over NCCL_COMM_ID, which wins over MASTER_ADDR") {
    Env env = {{"FERRY_ADDR", "a:1"}, {"NCCL_COMM_ID", "b:2"}, {"MASTER_ADDR", "c"}, {"MASTER_PORT", "3"}};
    CHECK(detect(env)->rootAddr == "a:1");
    env.erase("FERRY_ADDR");
    CHECK(detect(env)->rootAddr == "b:2");
    env.erase("NCCL_COMM_ID");
    CHECK(detect(env)->rootAddr == "c:3");
  }
  SECTION("MASTER_* are not read when FERRY_ADDR is set") {
    CHECK(detect({{"FERRY_ADDR", "a:1"}, {"MASTER_ADDR", "c"}})->rootAddr == "a:1");
  }
  SECTION("the address is independent of the launcher") {
    auto info = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"FERRY_ADDR", "h:9"}});
    REQUIRE(info.isOk());
    CHECK(info->source == "torchrun");
    CHECK(info->rootAddr == "h:9");
  }
}

TEST_CASE("errors name the variable, its value and the expected range", "[launch_env]") {
  CHECK(errorOf({{"FERRY_RANK", "5"}, {"FERRY_WORLD_SIZE", "4"}}) ==
        "FERRY_RANK=5 is out of range: expected 0 <= rank < FERRY_WORLD_SIZE=4");
  CHECK(errorOf({{"RANK", "-1"}, {"WORLD_SIZE", "4"}}) == "RANK=-1 is out of range: expected 0 <= rank < WORLD_SIZE=4");
  CHECK(errorOf({{"FERRY_RANK", "0"}, {"FERRY_WORLD_SIZE", "0"}}) ==
        "FERRY_WORLD_SIZE=0 is out of range: expected size >= 1");
  CHECK(errorOf({{"PMI_RANK", "0"}, {"PMI_SIZE", "two"}}) ==
        "PMI_SIZE='two' is not valid: expected an integer size >= 1");
  CHECK(errorOf({{"SLURM_PROCID", "1x"}, {"SLURM_NTASKS", "4"}}) ==
        "SLURM_PROCID='1x' is not valid: expected an integer 0 <= rank < SLURM_NTASKS=4");
  CHECK(errorOf({{"FERRY_RANK", ""}, {"FERRY_WORLD_SIZE", "4"}}) ==
        "FERRY_RANK='' is not valid: expected an integer 0 <= rank < FERRY_WORLD_SIZE=4");
  CHECK(errorOf({{"FERRY_RANK", " 1"}, {"FERRY_WORLD_SIZE", "4"}}) ==
        "FERRY_RANK=' 1' is not valid: expected an integer 0 <= rank < FERRY_WORLD_SIZE=4");
  CHECK(errorOf({{"FERRY_RANK", "0"}, {"FERRY_WORLD_SIZE", "99999999999999999999"}}) ==
        "FERRY_WORLD_SIZE=99999999999999999999 is out of range: expected size >= 1");
  CHECK(errorOf({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4294967296"}}) ==
        "OMPI_COMM_WORLD_SIZE=4294967296 is out of range: expected size >= 1");
}

TEST_CASE("local rank and size errors", "[launch_env]") {
  Env base = {{"FERRY_RANK", "1"}, {"FERRY_WORLD_SIZE", "4"}};
  auto with = [&base](Env extra) {
    extra.insert(base.begin(), base.end());
    return extra;
  };
  CHECK(errorOf(with({{"FERRY_LOCAL_RANK", "2"}, {"FERRY_LOCAL_SIZE", "2"}})) ==
        "FERRY_LOCAL_RANK=2 is out of range: expected 0 <= local rank < FERRY_LOCAL_SIZE=2");
  CHECK(errorOf(with({{"FERRY_LOCAL_RANK", "4"}})) ==
        "FERRY_LOCAL_RANK=4 is out of range: expected 0 <= local rank < FERRY_WORLD_SIZE=4");
  CHECK(errorOf(with({{"FERRY_LOCAL_RANK", "0"}, {"FERRY_LOCAL_SIZE", "8"}})) ==
        "FERRY_LOCAL_SIZE=8 is out of range: expected 1 <= local size <= FERRY_WORLD_SIZE=4");
  CHECK(errorOf(with({{"FERRY_LOCAL_RANK", "0"}, {"FERRY_LOCAL_SIZE", "0"}})) ==
        "FERRY_LOCAL_SIZE=0 is out of range: expected 1 <= local size <= FERRY_WORLD_SIZE=4");
  CHECK(errorOf(with({{"FERRY_LOCAL_RANK", "first"}})) ==
        "FERRY_LOCAL_RANK='first' is not valid: expected an integer 0 <= local rank < "
        "FERRY_WORLD_SIZE=4");
  CHECK(errorOf(with({{"FERRY_LOCAL_SIZE", "2"}})) ==
        "FERRY_LOCAL_SIZE=2 is set but FERRY_LOCAL_RANK is not: expected both or neither");
  CHECK(errorOf({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "2"}}) ==
        "MPI_LOCALNRANKS=2 is set but PMI_LOCAL_RANK is not: expected both or neither");
  CHECK(errorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "2"}}) ==
        "SLURM_LOCALID=2 is out of range: expected 0 <= local rank < SLURM_NTASKS=2");
}

TEST_CASE("half a rank/size pair names the missing half", "[launch_env]") {
  CHECK(errorOf({{"FERRY_RANK", "1"}}) == "FERRY_RANK=1 is set but FERRY_WORLD_SIZE is not: expected both or neither");
  CHECK(errorOf({{"FERRY_WORLD_SIZE", "4"}}) ==
        "FERRY_WORLD_SIZE=4 is set but FERRY_RANK is not: expected both or neither");
  CHECK(errorOf({{"RANK", "0"}}) == "RANK=0 is set but WORLD_SIZE is not: expected both or neither");
  CHECK(errorOf({{"OMPI_COMM_WORLD_SIZE", "2"}}) ==
        "OMPI_COMM_WORLD_SIZE=2 is set but OMPI_COMM_WORLD_RANK is not: expected both or neither");
  CHECK(errorOf({{"PMI_RANK", "0"}}) == "PMI_RANK=0 is set but PMI_SIZE is not: expected both or neither");
  CHECK(errorOf({{"SLURM_NTASKS", "3"}}) == "SLURM_NTASKS=3 is set but SLURM_PROCID is not: expected both or neither");
}

TEST_CASE("root address errors", "[launch_env]") {
  const char* kHostPort = "is not valid: expected host:port or [ipv6]:port with a port from 1 to 65535";
  for (const char* bad : {"", "node1", "node1:", ":4000", "node1:0", "node1:65536", "node1:http", "fe80::1:4000",
                          "[fe80::1:4000", "[]:4000"}) {
    CAPTURE(bad);
    CHECK(errorOf({{"FERRY_ADDR", bad}}) == "FERRY_ADDR='" + std::string(bad) + "' " + kHostPort);
  }
  CHECK(errorOf({{"NCCL_COMM_ID", "x"}}) == "NCCL_COMM_ID='x' " + std::string(kHostPort));
  CHECK(errorOf({{"MASTER_ADDR", "node1"}}) ==
        "MASTER_ADDR=node1 is set but MASTER_PORT is not: expected both or neither");
  CHECK(errorOf({{"MASTER_PORT", "29500"}}) ==
        "MASTER_PORT=29500 is set but MASTER_ADDR is not: expected both or neither");
  CHECK(errorOf({{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "0"}}) ==
        "MASTER_PORT=0 is out of range: expected 1 <= port <= 65535");
  CHECK(errorOf({{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "http"}}) ==
        "MASTER_PORT='http' is not valid: expected an integer 1 <= port <= 65535");
  CHECK(errorOf({{"MASTER_ADDR", ""}, {"MASTER_PORT", "1"}}) ==
        "MASTER_ADDR='' is not valid: expected a host name or address");
}
