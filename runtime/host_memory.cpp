// ferry::hostAlloc / hostFree (include/ferry/memory.hpp) over the shared-memory transport's
// registry of shared allocations.
#include "ferry/memory.hpp"

#include "transports/shm/shared_memory.hpp"

namespace ferry {

Result<void*> hostAlloc(size_t bytes) { return transport::shm::allocShared(bytes); }

Status hostFree(void* ptr) { return transport::shm::freeShared(ptr); }

Result<void*> hostRegister(void* ptr, size_t bytes) { return transport::shm::adoptShared(ptr, bytes); }

Status hostDeregister(void* handle) { return transport::shm::releaseAdopted(handle); }

}  // namespace ferry
