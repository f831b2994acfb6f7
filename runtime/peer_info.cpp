#include "runtime/peer_info.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "base/config.hpp"

namespace ferry {
namespace {

std::string readFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

}  // namespace

PeerInfo PeerInfo::local() {
  PeerInfo p;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  p.hostname = host;
  p.bootId = readFirstLine("/proc/sys/kernel/random/boot_id");
  p.hostId = config().hostId.empty() ? p.hostname + "/" + p.bootId : config().hostId;
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) == 0) p.pidNamespace = static_cast<uint64_t>(st.st_ino);
  if (stat("/proc/self/ns/net", &st) == 0) p.netNamespace = static_cast<uint64_t>(st.st_ino);
  p.pid = getpid();
  CPU_ZERO(&p.cpus);
  if (sched_getaffinity(0, sizeof(p.cpus), &p.cpus) != 0) CPU_SET(0, &p.cpus);
  std::random_device rd;
  p.commId = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return p;
}

std::vector<uint8_t> PeerInfo::serialize() const {
  std::vector<uint8_t> out;
  uint32_t n1 = static_cast<uint32_t>(hostname.size()), n2 = static_cast<uint32_t>(hostId.size());
  int64_t pid64 = pid;
  put(out, &n1, 4);
  put(out, hostname.data(), n1);
  put(out, &n2, 4);
  put(out, hostId.data(), n2);
  uint32_t n3 = static_cast<uint32_t>(bootId.size());
  put(out, &n3, 4);
  put(out, bootId.data(), n3);
  put(out, &netNamespace, 8);
  put(out, &pidNamespace, 8);
  put(out, &pid64, 8);
  put(out, &commId, 8);
  put(out, &cpus, sizeof(cpus));
  return out;
}

Result<PeerInfo> PeerInfo::deserialize(const std::vector<uint8_t>& b, int rank) {
  PeerInfo p;
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (at + n > b.size()) return false;
    std::memcpy(dst, b.data() + at, n);
    at += n;
    return true;
  };
  auto takeString = [&](std::string* s) {
    uint32_t n = 0;
    if (!take(&n, 4) || n > 4096 || at + n > b.size()) return false;
    s->assign(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
    return true;
  };
  int64_t pid64 = 0;
  if (!takeString(&p.hostname) || !takeString(&p.hostId) || !takeString(&p.bootId) || !take(&p.netNamespace, 8) ||
      !take(&p.pidNamespace, 8) || !take(&pid64, 8) || !take(&p.commId, 8) || !take(&p.cpus, sizeof(p.cpus)) ||
      at != b.size()) {
    return makeError(ErrorCode::kRemoteError, "rank %d sent a malformed identity record (%zu bytes)", rank, b.size());
  }
  // The watchdog probes this pid (kill(pid, 0), /proc/pid): 0 or a negative value would name a
  // process group or every process, and a truncated one somebody else's process.
  if (pid64 <= 0 || pid64 > std::numeric_limits<pid_t>::max()) {
    return makeError(ErrorCode::kRemoteError, "rank %d sent an identity record with pid %lld (expected 1 to %d)", rank,
                     static_cast<long long>(pid64), std::numeric_limits<pid_t>::max());
  }
  p.pid = static_cast<pid_t>(pid64);
  return p;
}

bool loopbackReachesAll(const std::vector<PeerInfo>& peers) {
  for (const PeerInfo& p : peers) {
    if (p.bootId.empty() || p.bootId != peers[0].bootId || p.netNamespace != peers[0].netNamespace) return false;
  }
  return true;
}

cpu_set_t hostCpus(const std::vector<PeerInfo>& peers, int self) {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (const PeerInfo& p : peers) {
    if (p.hostId != peers[static_cast<size_t>(self)].hostId) continue;
    cpu_set_t mine = p.cpus;
    CPU_OR(&all, &all, &mine);
  }
  return all;
}

bool processGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::string stat = readFirstLine(path);
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size()) {
    char state = stat[paren + 2];
    return state == 'Z' || state == 'X';
  }
  return false;
}

}  // namespace ferry
