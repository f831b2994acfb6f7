// Unique ids, joining a communicator and reading ncclConfig_t (see comm_init.hpp).
#include "nccl/comm_init.hpp"

#include <cstddef>
#include <thread>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"

namespace ferry::nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// Rank 0 of a job whose id came from NCCL_COMM_ID hosts the rendezvous there, as NCCL's does, for
// the world size it was given.
Status startEnvironmentRoot(const UniqueId& id, int size) {
  if (config().addr.empty()) return Status::ok();
  auto env = bootstrap::SocketAddress::parse(config().addr);
  FERRY_TRY(env);
  auto info = bootstrap::decodeUniqueId(id.bytes);
  if (!info.isOk() || info->addr.toString() != env->toString()) return Status::ok();  // an id made elsewhere
  auto server = bootstrap::StoreServer::start(*env, info->secret, size);
  if (!server.isOk()) {
    return makeError(server.status().code(), "rank 0 cannot host the rendezvous at NCCL_COMM_ID/FERRY_ADDR=%s: %s",
                     config().addr.c_str(), server.status().message().c_str());
  }
  FERRY_INFO(log::kBootstrap, "rendezvous root listening on %s (from the environment)", config().addr.c_str());
  bootstrap::StoreServer::detach(std::move(*server));
  return Status::ok();
}

}  // namespace

Result<UniqueId> makeUniqueId() {
  reportEnvironment();
  FERRY_TRY(configStatus());
  if (config().addr.empty()) return UniqueId::create();
  auto addr = bootstrap::SocketAddress::parse(config().addr);
  FERRY_TRY(addr);
  bootstrap::RootInfo info;
  info.addr = *addr;
  if (!config().secret.empty()) info.secret = bootstrap::Secret::fromString(config().secret);
  UniqueId id;
  bootstrap::encodeUniqueId(info, id.bytes);
  return id;
}

Status runInit(const InitRequest& r) {
  reportEnvironment();
  Status root = r.rank == 0 ? startEnvironmentRoot(r.id, r.size) : Status::ok();
  // With a GPU the rank drives its handle's device (ncclCommInitRank: the caller's current device;
  // ncclCommInitAll: devlist); without one it stays on the host.
  const int device = gpu::deviceCount() > 0 ? r.handle->device : -1;
  auto created = root.isOk() ? Comm::create(r.id, r.rank, r.size, device) : Result<std::unique_ptr<Comm>>(root);
  Status st = created.status();
  if (r.handle->finishInit(std::move(created))) delete r.handle;
  return st;
}

void launchInit(const InitRequest& r) {
  std::thread([r] { (void)runInit(r); }).detach();
}

namespace {

// Whether the caller's struct (of `size` bytes: an older header's is shorter) holds `field`.
bool covers(const ncclConfig_t* c, size_t offset, size_t bytes) { return c->size >= offset + bytes; }
#define FERRY_CONFIG_HAS(c, field) covers(c, offsetof(ncclConfig_t, field), sizeof((c)->field))

// An int field that is unset or one of the values 0..last.
Status checkRange(const char* fn, const char* field, int value, int last, const char* meaning) {
  if (value == NCCL_CONFIG_UNDEF_INT || (value >= 0 && value <= last)) return Status::ok();
  return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": config->" + field + " " + std::to_string(value) +
                                                 " is not valid (expected " + meaning + ")");
}

}  // namespace

Result<bool> readBlocking(const char* fn, const ncclConfig_t* c, bool fallback) {
  if (c == nullptr) return fallback;
  if (c->magic != kConfigMagic) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string(fn) + ": config was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  }
  if (!FERRY_CONFIG_HAS(c, blocking)) {
    return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": config->size " + std::to_string(c->size) +
                                                   " is too small to hold the blocking field");
  }
  // Fields past the caller's size belong to a newer layout than its header's: never read them.
  FERRY_TRY(checkRange(fn, "blocking", c->blocking, 1, "0, 1 or NCCL_CONFIG_UNDEF_INT"));
  if (FERRY_CONFIG_HAS(c, splitShare)) {
    FERRY_TRY(checkRange(fn, "splitShare", c->splitShare, 1, "0, 1 or NCCL_CONFIG_UNDEF_INT"));
  }
  if (FERRY_CONFIG_HAS(c, CTAPolicy)) {
    FERRY_TRY(checkRange(fn, "CTAPolicy", c->CTAPolicy, NCCL_CTA_POLICY_ZERO,
                         "NCCL_CTA_POLICY_DEFAULT = 0, _EFFICIENCY = 1, _ZERO = 2 or NCCL_CONFIG_UNDEF_INT"));
  }
  if (FERRY_CONFIG_HAS(c, shrinkShare)) {
    FERRY_TRY(checkRange(fn, "shrinkShare", c->shrinkShare, 1, "0, 1 or NCCL_CONFIG_UNDEF_INT"));
  }
  if (c->blocking == NCCL_CONFIG_UNDEF_INT) return fallback;
  return c->blocking == 1;
}
#undef FERRY_CONFIG_HAS

}  // namespace ferry::nccl
