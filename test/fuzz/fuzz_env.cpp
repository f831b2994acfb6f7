// Fuzzes what ferry reads from the environment: the launchers' variables (detectLaunch), every
// knob of the configuration registry (parseConfig), FERRY_SOCKET_IFNAME's filter syntax, the log
// level and subsystem lists, and FERRY_ALGO / FERRY_PROTO as the tuner takes them apart.
//
// Input: NAME=VALUE entries separated by NUL bytes (the environment's own shape). Names the input
// does not set stay unset; the values of FERRY_SOCKET_IFNAME, FERRY_ALGO and FERRY_PROTO also go
// straight to their parsers, and every value is tried as an interface name against the filter.
#include <map>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/bootstrap/interfaces.hpp"
#include "runtime/launch_env.hpp"
#include "runtime/tuner.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  std::map<std::string, std::string> env;
  while (!in.empty()) {
    std::string entry = in.until(0);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  EnvLookup lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto value = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };

  auto launch = detectLaunch(lookup);
  if (launch.isOk()) {
    FERRY_FUZZ_CHECK(launch->size >= 1 && launch->rank >= 0 && launch->rank < launch->size);
    FERRY_FUZZ_CHECK(launch->localRank >= 0);
    FERRY_FUZZ_CHECK(launch->localSize == -1 || (launch->localSize >= 1 && launch->localRank < launch->localSize));
  } else {
    FERRY_FUZZ_CHECK(!launch.status().message().empty());
  }

  std::vector<std::string> errors;
  std::vector<KnobInfo> infos;
  (void)parseConfig(lookup, &errors, &infos);
  FERRY_FUZZ_CHECK(!infos.empty());

  auto filter = bootstrap::IfnameFilter::parse(value("FERRY_SOCKET_IFNAME"));
  FERRY_FUZZ_CHECK(!filter.spec().empty());
  for (const auto& [name, v] : env) (void)filter.matches(v);

  log::Level level;
  (void)log::parseLevel(value("FERRY_DEBUG").c_str(), &level);
  (void)log::parseSubsys(value("FERRY_DEBUG_SUBSYS").c_str());

  TunerInputs ti;
  ti.ranks = 4;
  ti.ranksOnHost = 4;
  auto tuner = Tuner::create(ti, value("FERRY_ALGO"), value("FERRY_PROTO"), 0);
  if (!tuner.isOk()) FERRY_FUZZ_CHECK(!tuner.status().message().empty());
  return 0;
}
