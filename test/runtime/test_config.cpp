// The knob registry and the log-setting parsers: defaults, FERRY_ over NCCL_ names, rejected values.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "base/config.hpp"
#include "base/deadline.hpp"
#include "base/log.hpp"

using namespace ferry;

namespace {
EnvLookup fakeEnv(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("defaults apply when nothing is set", "[config]") {
  std::vector<std::string> errors;
  std::vector<KnobInfo> infos;
  Config c = parseConfig(fakeEnv({}), &errors, &infos);
  CHECK(errors.empty());
  CHECK(c.timeout == 300.0);
  CHECK(c.debug == "WARN");
  CHECK(c.checkMismatch);
  CHECK(c.sliceBytes == 262144);
  REQUIRE(!infos.empty());
  for (const auto& k : infos) {
    CHECK(k.source == "default");
    CHECK(k.value == k.defaultValue);
    CHECK(!k.description.empty());
    CHECK(k.name.rfind("FERRY_", 0) == 0);
  }
}

// knobs.def's FERRY_AUTO rows: each names a knob whose default is -1, and ferry-config prints its
// rule with the constants its resolver reads.
TEST_CASE("automatic knobs say what -1 resolves to", "[config]") {
  std::vector<KnobInfo> infos;
  parseConfig(fakeEnv({}), nullptr, &infos);
  std::map<std::string, KnobInfo> byName;
  for (const auto& k : infos) {
    byName[k.name] = k;
    INFO(k.name << " (default " << k.defaultValue << "): " << k.autoRule);
    // Every -1 default says what it means, and only those.
    CHECK((k.defaultValue == "-1") == !k.autoRule.empty());
    if (k.autoRule.empty()) continue;
    CHECK(k.resolver.rfind("resolve", 0) == 0);
    CHECK(k.autoRule.find('{') == std::string::npos);
  }
  for (const char* name :
       {"FERRY_HIER_CHUNK_BYTES", "FERRY_TUNE_TRIALS", "FERRY_STREAM_MIN_BYTES", "FERRY_SPIN_NS", "FERRY_YIELD_NS"}) {
    INFO(name);
    CHECK(!byName.at(name).autoRule.empty());
  }
  const KnobInfo& spin = byName.at("FERRY_SPIN_NS");
  CHECK(spin.resolver == "resolveSpinNs");
  CHECK(spin.autoRule == std::to_string(knob_auto::spinNs.a) + " when every rank has a core, else " +
                             std::to_string(knob_auto::spinNs.b));
  CHECK(byName.at("FERRY_TUNE_TRIALS").autoRule.find(std::to_string(knob_auto::tuneTrials.b) + " between hosts") !=
        std::string::npos);
  CHECK(byName.at("FERRY_HIER_CHUNK_BYTES").resolver == "resolveHierChunkBytes");
  CHECK(byName.at("FERRY_TIMEOUT").autoRule.empty());
}

TEST_CASE("FERRY_ names win over their NCCL_ aliases", "[config]") {
  std::vector<std::string> errors;
  std::vector<KnobInfo> infos;
  Config c =
      parseConfig(fakeEnv({{"NCCL_DEBUG", "INFO"}, {"NCCL_COMM_ID", "10.0.0.1:1234"}, {"FERRY_ADDR", "127.0.0.1:99"}}),
                  &errors, &infos);
  CHECK(errors.empty());
  CHECK(c.debug == "INFO");
  CHECK(c.addr == "127.0.0.1:99");
  for (const auto& k : infos) {
    if (k.name == "FERRY_DEBUG") CHECK(k.source == "NCCL_DEBUG");
    if (k.name == "FERRY_ADDR") CHECK(k.source == "FERRY_ADDR");
  }
}

TEST_CASE("typed values parse and bad ones are named", "[config]") {
  std::vector<std::string> errors;
  Config c =
      parseConfig(fakeEnv({{"FERRY_TIMEOUT", "2.5"}, {"FERRY_CHECK_MISMATCH", "off"}, {"FERRY_SLICE_BYTES", "0x1000"}}),
                  &errors, nullptr);
  CHECK(errors.empty());
  CHECK(c.timeout == 2.5);
  CHECK_FALSE(c.checkMismatch);
  CHECK(c.sliceBytes == 4096);

  errors.clear();
  c = parseConfig(fakeEnv({{"FERRY_TIMEOUT", "soon"}, {"FERRY_CHECK_MISMATCH", "maybe"}, {"FERRY_SLICE_BYTES", "12k"}}),
                  &errors, nullptr);
  REQUIRE(errors.size() == 3);
  CHECK(errors[0].find("FERRY_TIMEOUT='soon'") != std::string::npos);
  CHECK(errors[0].find("expected a number of seconds") != std::string::npos);
  CHECK(c.timeout == 300.0);  // the default stays
  bool sawBool = false, sawInt = false;
  for (const auto& e : errors) {
    sawBool |= e.find("FERRY_CHECK_MISMATCH='maybe'") != std::string::npos && e.find("true/false") != std::string::npos;
    sawInt |= e.find("FERRY_SLICE_BYTES='12k'") != std::string::npos && e.find("an integer") != std::string::npos;
  }
  CHECK(sawBool);
  CHECK(sawInt);
}

TEST_CASE("FERRY_TIMEOUT takes finite positive seconds or none, nothing else", "[config]") {
  // Each of these was once read as "no deadline": a missing peer then hung the job.
  for (const char* bad :
       {"-1", "0", "nan", "NaN", "inf", "-inf", "1e300", "", "abc", "1e-400", "0.0001", "2e6", "5s", "none2"}) {
    INFO("FERRY_TIMEOUT='" << bad << "'");
    std::vector<std::string> errors;
    std::vector<KnobInfo> infos;
    Config c = parseConfig(fakeEnv({{"FERRY_TIMEOUT", bad}}), &errors, &infos);
    CHECK(errors.size() == 1);
    if (errors.size() != 1) continue;
    CHECK(errors[0].find("FERRY_TIMEOUT='" + std::string(bad) + "'") != std::string::npos);
    CHECK(errors[0].find("'none'") != std::string::npos);  // the expected forms are named
    CHECK(c.timeout == 300.0);
  }
  std::vector<std::string> errors;
  std::vector<KnobInfo> infos;
  for (const char* none : {"none", "NONE"}) {
    Config c = parseConfig(fakeEnv({{"FERRY_TIMEOUT", none}}), &errors, &infos);
    CHECK(errors.empty());
    CHECK(c.timeout == kNoTimeout);
    CHECK_FALSE(Deadline::after(c.timeout).expired());
    CHECK(Deadline::after(c.timeout).at() == Clock::time_point::max());
  }
  bool rendered = false;
  for (const auto& k : infos) {
    if (k.name != "FERRY_TIMEOUT") continue;
    rendered = k.value == "none" && k.kind == "seconds" && k.source == "FERRY_TIMEOUT";
  }
  CHECK(rendered);
  for (auto [text, value] : {std::pair{"0.001", 0.001}, {"1", 1.0}, {"4", 4.0}, {"60.5", 60.5}, {"1e6", 1e6}}) {
    errors.clear();
    Config c = parseConfig(fakeEnv({{"FERRY_TIMEOUT", text}}), &errors, nullptr);
    CHECK(errors.empty());
    CHECK(c.timeout == value);
    Deadline d = Deadline::after(c.timeout);
    CHECK(d.at() != Clock::time_point::max());
    CHECK(d.remainingMs() > 0);
    CHECK(d.remainingMs() <= static_cast<int>(value * 1000) + 1);
  }
}

TEST_CASE("log levels and subsystem lists parse", "[log]") {
  log::Level l = log::Level::kNone;
  CHECK(log::parseLevel("info", &l));
  CHECK(l == log::Level::kInfo);
  CHECK(log::parseLevel("TRACE", &l));
  CHECK(l == log::Level::kTrace);
  CHECK_FALSE(log::parseLevel("LOUD", &l));
  CHECK(log::parseSubsys("INIT,COLL") == (log::kInit | log::kColl));
  CHECK(log::parseSubsys("ALL") == log::kAll);
  CHECK(log::parseSubsys("^NET") == ~static_cast<uint32_t>(log::kNet));
  CHECK(log::parseSubsys("init,bogus") == log::kInit);
}
