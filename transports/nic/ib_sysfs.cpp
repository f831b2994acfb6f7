// sysfs reads for NIC discovery. Every failure means "not known", never an error: these facts
// only refine the report and the choice of NIC.
#include "transports/nic/ib_sysfs.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace ferry::transport::nic {
namespace {

// The first line of a small sysfs file without its newline; empty when it cannot be read.
std::string firstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

int readNumaNode(const std::string& root, const std::string& device) {
  const std::string text = firstLine(std::filesystem::path(root) / device / "device" / "numa_node");
  if (text.empty()) return -1;
  char* end = nullptr;
  const long node = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || node < 0 || node > 4096) return -1;
  return static_cast<int>(node);
}

std::string readNetdev(const std::string& root, const std::string& device, int port) {
  const std::filesystem::path dev = std::filesystem::path(root) / device;
  // Kernels since 4.14 name GID 0's interface per port; on InfiniBand the read fails (EINVAL).
  std::string name = firstLine(dev / "ports" / std::to_string(port) / "gid_attrs" / "ndevs" / "0");
  if (!name.empty()) return name;
  // Older kernels: the PCI function's interfaces. Only one is unambiguous (mlx4 has one per port).
  std::error_code ec;
  int count = 0;
  for (std::filesystem::directory_iterator it(dev / "device" / "net", ec), end; !ec && it != end; it.increment(ec)) {
    name = it->path().filename().string();
    ++count;
  }
  if (ec) return {};
  return count == 1 ? name : std::string();
}

}  // namespace ferry::transport::nic
