// Launch environments: where a rank learns its rank, world size and local rank.
//
// Every launcher announces the same facts under its own names: ferryrun and hand-written scripts
// export FERRY_*, torchrun RANK/WORLD_SIZE, Open MPI OMPI_COMM_WORLD_*, MPICH's Hydra and Intel MPI
// PMI_*, Slurm's srun SLURM_*. detectLaunch() tries them in that order and reads only the first
// launcher whose rank or size variable is set: mpirun started inside a Slurm allocation makes an
// Open MPI job, and the SLURM_* variables it leaves behind are neither read nor errors.
//
// All access goes through the caller's lookup, so tests describe an environment as a map and the
// process environment is read in one place (readEnv in config.cpp). Each value is validated when it
// is read, and an error names the variable, its value and the range it must lie in, so a broken
// launch script fails at once with a message that says what to fix. A variable set to the empty
// string counts as set and fails validation: an empty FERRY_RANK is a script bug, not an absence.
#include "runtime/launch_env.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/log.hpp"

namespace ferry {
namespace {

// The variables one launcher sets. Local rank and size may come under either of two names (the
// first one set wins); nullptr marks a name the launcher does not have.
struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* localRank[2];
  const char* localSize[2];
};

// In order of precedence: explicit FERRY_* first, then the launchers from the most specific (they
// may run inside an allocation of a more general one) to the most general.
constexpr Launcher kLaunchers[] = {
    {"ferry", "FERRY_RANK", "FERRY_WORLD_SIZE", {"FERRY_LOCAL_RANK", nullptr}, {"FERRY_LOCAL_SIZE", nullptr}},
    {"torchrun", "RANK", "WORLD_SIZE", {"LOCAL_RANK", nullptr}, {"LOCAL_WORLD_SIZE", nullptr}},
    {"openmpi",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE",
     {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
     {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr}},
    {"pmi", "PMI_RANK", "PMI_SIZE", {"PMI_LOCAL_RANK", "MPI_LOCALRANKID"}, {"MPI_LOCALNRANKS", nullptr}},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", {"SLURM_LOCALID", nullptr}, {nullptr, nullptr}},
};

// A variable's name and value, value nullptr when unset.
struct Var {
  const char* name = nullptr;
  const char* value = nullptr;
  bool isSet() const { return value != nullptr; }
};

Var lookupVar(const EnvLookup& lookup, const char* name) { return Var{name, name != nullptr ? lookup(name) : nullptr}; }

// The first of two alternative names that is set, or the first name (unset) when neither is.
Var lookupEither(const EnvLookup& lookup, const char* const (&names)[2]) {
  Var first = lookupVar(lookup, names[0]);
  if (first.isSet() || names[1] == nullptr) return first;
  Var second = lookupVar(lookup, names[1]);
  return second.isSet() ? second : first;
}

// Parses the whole value as a decimal integer in [lo, hi]. `expected` describes the range for the
// message ("0 <= rank < FERRY_WORLD_SIZE=4").
Result<int> parseInt(const Var& var, long lo, long hi, const std::string& expected) {
  const char* end = var.value + std::strlen(var.value);
  long v = 0;
  auto [ptr, ec] = std::from_chars(var.value, end, v);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return makeError(ErrorCode::kInvalidArgument, "%s=%s is out of range: expected %s", var.name, var.value,
                     expected.c_str());
  }
  if (ec != std::errc() || ptr != end || var.value == end) {
    return makeError(ErrorCode::kInvalidArgument, "%s='%s' is not valid: expected an integer %s", var.name, var.value,
                     expected.c_str());
  }
  if (v < lo || v > hi) {
    return makeError(ErrorCode::kInvalidArgument, "%s=%s is out of range: expected %s", var.name, var.value,
                     expected.c_str());
  }
  return static_cast<int>(v);
}

// "X=1 is set but Y is not": one half of a pair that only makes sense together.
Status missingPartner(const Var& present, const char* missing) {
  return makeError(ErrorCode::kInvalidArgument, "%s=%s is set but %s is not: expected both or neither", present.name,
                   present.value, missing);
}

// "NAME=value" for use inside a range description.
std::string shown(const Var& var) { return std::string(var.name) + "=" + var.value; }

// Reads and validates one launcher's variables. At least one of rank and size is set.
Result<LaunchInfo> readLauncher(const EnvLookup& lookup, const Launcher& launcher) {
  Var rankVar = lookupVar(lookup, launcher.rank);
  Var sizeVar = lookupVar(lookup, launcher.size);
  if (!rankVar.isSet()) return missingPartner(sizeVar, launcher.rank);
  if (!sizeVar.isSet()) return missingPartner(rankVar, launcher.size);

  LaunchInfo info;
  info.source = launcher.source;
  auto size = parseInt(sizeVar, 1, INT32_MAX, "size >= 1");
  FERRY_TRY(size);
  info.size = *size;
  auto rank = parseInt(rankVar, 0, info.size - 1, "0 <= rank < " + shown(sizeVar));
  FERRY_TRY(rank);
  info.rank = *rank;

  Var localRankVar = lookupEither(lookup, launcher.localRank);
  Var localSizeVar = lookupEither(lookup, launcher.localSize);
  if (localSizeVar.isSet()) {
    if (!localRankVar.isSet()) return missingPartner(localSizeVar, localRankVar.name);
    auto localSize = parseInt(localSizeVar, 1, info.size, "1 <= local size <= " + shown(sizeVar));
    FERRY_TRY(localSize);
    info.localSize = *localSize;
  }
  if (localRankVar.isSet()) {
    // Without a local size the world size is the only bound there is.
    const Var& bound = localSizeVar.isSet() ? localSizeVar : sizeVar;
    int limit = localSizeVar.isSet() ? info.localSize : info.size;
    auto localRank = parseInt(localRankVar, 0, limit - 1, "0 <= local rank < " + shown(bound));
    FERRY_TRY(localRank);
    info.localRank = *localRank;
  }
  return info;
}

// Checks "host:port" or "[v6]:port" with a port from 1 to 65535. Names are not resolved here: the
// bootstrap does that when it connects, and reports failures with the name it could not resolve.
Status checkHostPort(const Var& var) {
  std::string text = var.value;
  size_t colon = text.rfind(':');
  bool ok = colon != std::string::npos && colon > 0;
  if (ok) {
    std::string host = text.substr(0, colon);
    bool bracketed = host.front() == '[';
    ok = bracketed ? (host.size() > 2 && host.back() == ']') : host.find_first_of(":[]") == std::string::npos;
    Var port{var.name, var.value + colon + 1};
    ok = ok && parseInt(port, 1, 65535, "").isOk();
  }
  if (ok) return Status::ok();
  return makeError(ErrorCode::kInvalidArgument,
                   "%s='%s' is not valid: expected host:port or [ipv6]:port with a port from 1 to "
                   "65535",
                   var.name, var.value);
}

// The rendezvous root: FERRY_ADDR, NCCL_COMM_ID, or torchrun's MASTER_ADDR and MASTER_PORT.
Result<std::string> readRootAddr(const EnvLookup& lookup) {
  for (const char* name : {"FERRY_ADDR", "NCCL_COMM_ID"}) {
    Var var = lookupVar(lookup, name);
    if (var.isSet()) {
      FERRY_TRY(checkHostPort(var));
      return std::string(var.value);
    }
  }
  Var addr = lookupVar(lookup, "MASTER_ADDR");
  Var port = lookupVar(lookup, "MASTER_PORT");
  if (!addr.isSet() && !port.isSet()) return std::string();
  if (!port.isSet()) return missingPartner(addr, port.name);
  if (!addr.isSet()) return missingPartner(port, addr.name);
  if (addr.value[0] == '\0') {
    return makeError(ErrorCode::kInvalidArgument, "MASTER_ADDR='' is not valid: expected a host name or address");
  }
  FERRY_TRY(parseInt(port, 1, 65535, "1 <= port <= 65535"));
  std::string host = addr.value;
  // A bare IPv6 address gets brackets so that the last ':' still separates the port.
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return host + ":" + port.value;
}

}  // namespace

Result<LaunchInfo> detectLaunch(const EnvLookup& lookup) {
  LaunchInfo info;
  info.source = "none";
  info.localSize = 1;  // no launcher: a single process, alone on its host
  for (const Launcher& launcher : kLaunchers) {
    if (lookup(launcher.rank) != nullptr || lookup(launcher.size) != nullptr) {
      auto found = readLauncher(lookup, launcher);
      FERRY_TRY(found);
      info = std::move(*found);
      break;
    }
  }
  auto root = readRootAddr(lookup);
  FERRY_TRY(root);
  info.rootAddr = std::move(*root);
  FERRY_INFO(log::kEnv, "launch: rank %d of %d (local %d of %d) from %s, root %s", info.rank, info.size, info.localRank,
             info.localSize, info.source.c_str(), info.rootAddr.empty() ? "(none)" : info.rootAddr.c_str());
  return info;
}

}  // namespace ferry
