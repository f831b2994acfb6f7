// The environment ferryrun hands its ranks: see rank_env.hpp.
#include "tools/rank_env.hpp"

#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ferry::tools {

Result<std::string> freeLoopbackAddr() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return makeError(ErrorCode::kSystemError, "cannot create a socket to find a free port: %s", std::strerror(errno));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int err = errno;
  close(fd);
  if (!ok) {
    return makeError(ErrorCode::kSystemError, "cannot bind a free port on 127.0.0.1: %s", std::strerror(err));
  }
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

Result<std::string> randomSecret() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    return makeError(ErrorCode::kSystemError, "getrandom failed: %s", std::strerror(errno));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

Status requireSharedRendezvous(const EnvLookup& lookup) {
  const char* addr = lookup("FERRY_ADDR");
  if (addr == nullptr || addr[0] == '\0') {
    return makeError(ErrorCode::kInvalidUsage,
                     "--world-size needs FERRY_ADDR=host:port in the environment: where rank 0 listens for the "
                     "rendezvous, the same for every host's ferryrun of the job");
  }
  const char* secret = lookup("FERRY_SECRET");
  if (secret == nullptr || secret[0] == '\0') {
    return makeError(ErrorCode::kInvalidUsage,
                     "--world-size needs FERRY_SECRET in the environment: any string, the same for every "
                     "host's ferryrun of the job (it keeps other processes out of the rendezvous)");
  }
  return Status();
}

Result<std::vector<std::string>> sharedRankEnv(char* const* environ, const RankRange& range, const EnvLookup& lookup) {
  // torchrun's four rank variables are replaced as ferry's are: an inherited value would give every
  // rank the same number.
  static const char* const kOurs[] = {
      "FERRY_RANK=", "FERRY_WORLD_SIZE=", "FERRY_LOCAL_RANK=", "FERRY_LOCAL_SIZE=", "FERRY_ADDR=", "FERRY_SECRET=",
      "RANK=",       "WORLD_SIZE=",       "LOCAL_RANK=",       "LOCAL_WORLD_SIZE="};
  if (range.sharedRendezvous) FERRY_TRY(requireSharedRendezvous(lookup));
  std::vector<std::string> env;
  for (char* const* e = environ; *e != nullptr; ++e) {
    bool ours = false;
    for (const char* prefix : kOurs) ours = ours || std::strncmp(*e, prefix, std::strlen(prefix)) == 0;
    if (!ours) env.emplace_back(*e);
  }
  env.push_back("FERRY_WORLD_SIZE=" + std::to_string(range.worldSize));
  env.push_back("FERRY_LOCAL_SIZE=" + std::to_string(range.localSize));
  env.push_back("WORLD_SIZE=" + std::to_string(range.worldSize));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(range.localSize));

  // The caller's address and secret win, so a script can pin the port or share the secret with a
  // process started by other means. An empty value counts as unset, as it does for the knobs.
  const char* addr = lookup("FERRY_ADDR");
  if (addr != nullptr && addr[0] != '\0') {
    env.push_back(std::string("FERRY_ADDR=") + addr);
  } else {
    auto fresh = freeLoopbackAddr();
    FERRY_TRY(fresh);
    env.push_back("FERRY_ADDR=" + *fresh);
  }
  FERRY_TRY(addTorchRendezvous(env, range, lookup));
  const char* secret = lookup("FERRY_SECRET");
  if (secret != nullptr && secret[0] != '\0') {
    env.push_back(std::string("FERRY_SECRET=") + secret);
  } else {
    auto fresh = randomSecret();
    FERRY_TRY(fresh);
    env.push_back("FERRY_SECRET=" + *fresh);
  }
  return env;
}

Status addTorchRendezvous(std::vector<std::string>& env, const RankRange& range, const EnvLookup& lookup) {
  const char* addr = lookup("MASTER_ADDR");
  const char* port = lookup("MASTER_PORT");
  const bool haveAddr = addr != nullptr && addr[0] != '\0';
  const bool havePort = port != nullptr && port[0] != '\0';
  // Set ones stay in `env` (inherited); a job spread over hosts must be given them, like FERRY_ADDR.
  if (range.sharedRendezvous || (haveAddr && havePort)) return Status();
  if (!haveAddr) env.push_back("MASTER_ADDR=127.0.0.1");
  if (havePort) return Status();
  // Rank 0's TCPStore listens there, ferry's rendezvous on FERRY_ADDR's port: keep the two apart.
  std::string ferryPort;
  for (const std::string& e : env) {
    if (e.rfind("FERRY_ADDR=", 0) == 0) ferryPort = e.substr(e.rfind(':') + 1);
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto fresh = freeLoopbackAddr();
    FERRY_TRY(fresh);
    const std::string freePort = fresh->substr(fresh->rfind(':') + 1);
    if (freePort == ferryPort) continue;
    env.push_back("MASTER_PORT=" + freePort);
    return Status();
  }
  return makeError(ErrorCode::kSystemError, "cannot find a free port for MASTER_PORT apart from FERRY_ADDR's %s",
                   ferryPort.c_str());
}

std::vector<std::string> ownRankEnv(const RankRange& range, int localRank) {
  const std::string rank = std::to_string(range.firstRank + localRank);
  const std::string local = std::to_string(localRank);
  return {"FERRY_RANK=" + rank, "FERRY_LOCAL_RANK=" + local, "RANK=" + rank, "LOCAL_RANK=" + local};
}

}  // namespace ferry::tools
