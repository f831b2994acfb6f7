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

Result<bool> readBlocking(const char* fn, const ncclConfig_t* c, bool fallback) {
  if (c == nullptr) return fallback;
  if (c->magic != kConfigMagic) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string(fn) + ": config was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  }
  if (c->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": config->size " + std::to_string(c->size) +
                                                   " is too small to hold the blocking field");
  }
  if (c->blocking == NCCL_CONFIG_UNDEF_INT) return fallback;
  if (c->blocking != 0 && c->blocking != 1) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string(fn) + ": config->blocking " + std::to_string(c->blocking) + " is not 0 or 1");
  }
  return c->blocking == 1;
}

}  // namespace ferry::nccl
