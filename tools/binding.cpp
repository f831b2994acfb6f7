#include "tools/binding.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

namespace ferry::tools {
namespace {

// The integer in /sys/devices/system/cpu/cpuN/topology/NAME, or -1.
int topologyValue(int cpu, const char* name) {
  char path[128];
  std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, name);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  int v = -1;
  if (std::fscanf(f, "%d", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

}  // namespace

bool parseBindPolicy(const std::string& text, BindPolicy* out) {
  if (text == "auto") {
    *out = BindPolicy::kAuto;
  } else if (text == "core") {
    *out = BindPolicy::kCore;
  } else if (text == "none") {
    *out = BindPolicy::kNone;
  } else {
    return false;
  }
  return true;
}

std::vector<int> cpusByCore(const cpu_set_t& allowed) {
  // (thread index within its core, package, core, cpu): sorting puts every core's first thread
  // before any core's second, cores in package and core order.
  std::vector<std::tuple<int, int, int, int>> order;
  std::map<std::pair<int, int>, int> threadsOf;  // (package, core) -> threads seen so far
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    int package = topologyValue(cpu, "physical_package_id");
    int core = topologyValue(cpu, "core_id");
    if (package < 0 || core < 0) {
      package = -1;
      core = cpu;  // unknown: a core of its own
    }
    const int thread = threadsOf[{package, core}]++;
    order.emplace_back(thread, package, core, cpu);
  }
  std::sort(order.begin(), order.end());
  std::vector<int> cpus;
  for (auto& t : order) cpus.push_back(std::get<3>(t));
  return cpus;
}

std::vector<int> bindingFor(BindPolicy policy, int ranks, const std::vector<int>& cpus) {
  if (policy == BindPolicy::kNone || cpus.empty() || ranks < 1) return {};
  if (policy == BindPolicy::kAuto && static_cast<size_t>(ranks) > cpus.size()) return {};
  std::vector<int> out;
  for (int r = 0; r < ranks; ++r) out.push_back(cpus[static_cast<size_t>(r) % cpus.size()]);
  return out;
}

}  // namespace ferry::tools
