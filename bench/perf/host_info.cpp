// Host facts from the system. See host_info.hpp.
#include "bench/perf/host_info.hpp"

#include <unistd.h>

#include <fstream>

namespace ferry::perf {
namespace {

// The value of "Key:   1234 kB" in /proc/self/status, in bytes.
int64_t statusBytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  std::string name = buf;
  return name.substr(0, name.find('.'));
}

std::string cpuDescription() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "cpu" : "cpu " + line.substr(start);
  }
  return "cpu";
}

int64_t residentBytes() { return statusBytes("VmRSS"); }
int64_t peakResidentBytes() { return statusBytes("VmHWM"); }

}  // namespace ferry::perf
