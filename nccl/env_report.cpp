// The one place that looks at which NCCL_* variables the environment holds, and the library's
// logging default (silent unless FERRY_DEBUG / NCCL_DEBUG asks). Their values are read
// through ferry's config registry (knobs.def) only; here only names are compared.
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_init.hpp"
#include "nccl/entry.hpp"

extern char** environ;

namespace ferry::nccl {
namespace {

bool chosen() {
  for (const KnobInfo& k : knobInfos()) {
    if (k.field == "debug") return k.source != "default";
  }
  return true;
}

// At load, before any entry point: a program that did not ask for logs gets none (NCCL's default).
__attribute__((constructor)) void quietDefault() {
  if (!chosen()) log::setLevel(log::Level::kNone);
}

}  // namespace

bool logLevelChosen() {
  static const bool value = chosen();
  return value;
}

void reportEnvironment() {
  static std::once_flag once;
  std::call_once(once, [] {
    FERRY_LOG(log::Level::kVersion, log::kInit, "NCCL version %d.%d.%d (ferry, host memory)", NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH);
    std::set<std::string, std::less<>> honoured;
    for (const KnobInfo& k : knobInfos()) {
      if (!k.alias.empty()) honoured.insert(k.alias);
    }
    std::string ignored;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      std::string_view name = entry.substr(0, entry.find('='));
      if (!name.starts_with("NCCL_") || honoured.count(name) != 0) continue;
      if (!ignored.empty()) ignored += ", ";
      ignored += name;
    }
    if (!ignored.empty()) {
      FERRY_INFO(log::kEnv,
                 "ignoring %s: ferry does not implement these NCCL knobs (docs/NCCL.md lists those it honours)",
                 ignored.c_str());
    }
  });
}

}  // namespace ferry::nccl

// NCCL's header marks the function deprecated; defining it is not a use.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

extern "C" void pncclResetDebugInit(void) {
  // ferry reads its knobs once per process (base/config.hpp); the one thing to redo is the default.
  try {
    if (!ferry::nccl::logLevelChosen()) ferry::log::setLevel(ferry::log::Level::kNone);
  } catch (...) {
  }
}
FERRY_NCCL_ALIAS(ncclResetDebugInit)
