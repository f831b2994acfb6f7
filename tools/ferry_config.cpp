// ferry-config: print every environment knob ferry reads, with its value in force, where that
// value came from, its default and what it does. Exits 1 when a value set in the environment
// does not parse (and says which).
#include <cstdio>
#include <cstring>

#include "collectives/table.hpp"
#include "base/config.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::printf("usage: ferry-config\nPrints every FERRY_* knob (and its NCCL_* alias) with its value in force.\n");
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "ferry-config: unexpected argument '%s' (it takes none; see --help)\n", argv[1]);
    return 2;
  }
  for (const ferry::KnobInfo& k : ferry::knobInfos()) {
    std::printf("%-22s = %-20s  (%s; %s, default '%s')\n", k.name.c_str(), k.value.c_str(), k.source.c_str(),
                k.kind.c_str(), k.defaultValue.c_str());
    std::printf("    %s%s%s\n", k.description.c_str(), k.alias.empty() ? "" : "  Alias: ", k.alias.c_str());
    if (k.name == "FERRY_ALGO")
      std::printf("    Algorithms (the algorithm table): %s\n", ferry::coll::algorithmList().c_str());
    if (!k.autoRule.empty()) std::printf("    auto: %s (%s)\n", k.autoRule.c_str(), k.resolver.c_str());
  }
  ferry::Status s = ferry::configStatus();
  if (!s.isOk()) {
    std::fprintf(stderr, "ferry-config: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
