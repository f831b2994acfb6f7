// The one place that looks at which NCCL_* variables the environment holds. Their values are read
// through ferry's config registry (knobs.def) only; here only names are compared.
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_init.hpp"

extern char** environ;

namespace ferry::nccl {

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
