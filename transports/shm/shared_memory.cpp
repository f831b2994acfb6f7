// Shared host allocations and the registry peers find them in (shared_memory.hpp).
#include "transports/shm/shared_memory.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "base/log.hpp"
#include "transports/shm/segment.hpp"

namespace ferry::transport::shm {
namespace {

constexpr uint32_t kRegistryMagic = 0x47455246;  // "FREG"
constexpr size_t kRegistryBytes = 16384;
constexpr size_t kPage = 4096;
constexpr uintptr_t kStackGuard = 1 << 20;  // adoptShared refuses ranges this near the stack pointer

// Written by the owner only, read by any peer at any time: every field is atomic, and a reader
// trusts what it read only if the version was even and unchanged around its reads.
struct Entry {
  std::atomic<uint64_t> base;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> id;
  std::atomic<int64_t> fd;
};
constexpr size_t kMaxEntries = (kRegistryBytes - 64) / sizeof(Entry);

struct Registry {
  uint32_t magic;
  std::atomic<uint32_t> count;
  std::atomic<uint64_t> version;
  char pad[48];
  Entry entries[kMaxEntries];
};
static_assert(sizeof(Registry) <= kRegistryBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

std::string memfdName(uint64_t id) { return "ferry-host-" + std::to_string(id); }

// This process's allocations and its registry.
struct Local {
  struct Alloc {
    void* base;
    size_t bytes;
    int fd;
    uint64_t id;
    bool adopted = false;  ///< adoptShared's: the memory is the caller's, hostFree refuses it
    int refs = 0;          ///< adoptShared references
  };
  std::mutex mu;
  int regFd = -1;
  bool regFailed = false;
  Registry* reg = nullptr;
  std::atomic<const Registry*> published{nullptr};  // reg, for isShared's lock-free reads
  std::vector<Alloc> allocs;
  uint64_t nextId = 1;
  std::atomic<size_t> live{0};
  bool warnedFull = false;

  // Under mu.
  bool ensureRegistry() {
    if (reg != nullptr) return true;
    if (regFailed) return false;
    int fd = memfd_create("ferry-registry", MFD_CLOEXEC);
    void* p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, kRegistryBytes) == 0) {
      p = mmap(nullptr, kRegistryBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (p == MAP_FAILED) {
      FERRY_INFO(log::kTransport,
                 "cannot create the shared-allocation registry (%s): peers read ferry::hostAlloc "
                 "memory by cross-memory attach",
                 std::strerror(errno));
      if (fd >= 0) ::close(fd);
      regFailed = true;
      return false;
    }
    reg = static_cast<Registry*>(p);  // zero-filled by ftruncate
    reg->magic = kRegistryMagic;
    regFd = fd;
    published.store(reg, std::memory_order_release);
    return true;
  }

  // Under mu: rewrite the table as a seqlock writer.
  template <typename F>
  void rewrite(F&& f) {
    uint64_t v = reg->version.load(std::memory_order_relaxed);
    reg->version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f();
    reg->version.store(v + 2, std::memory_order_release);
  }
};

Local& local() {
  static Local* l = new Local();  // never destroyed: peers may map the registry until exit
  return *l;
}

// A consistent copy of a registry's entries; false if the owner kept rewriting it.
struct Snapshot {
  uint64_t version;
  uint32_t count;
  struct {
    uint64_t base, bytes, id;
    int64_t fd;
  } e[kMaxEntries];
};
bool snapshot(const Registry* reg, Snapshot& s) {
  for (int attempt = 0; attempt < 10000; ++attempt) {
    uint64_t v1 = reg->version.load(std::memory_order_acquire);
    if ((v1 & 1) != 0) {
      if (attempt > 100) sched_yield();
      continue;
    }
    uint32_t n = std::min<uint32_t>(reg->count.load(std::memory_order_relaxed), kMaxEntries);
    for (uint32_t i = 0; i < n; ++i) {
      s.e[i].base = reg->entries[i].base.load(std::memory_order_relaxed);
      s.e[i].bytes = reg->entries[i].bytes.load(std::memory_order_relaxed);
      s.e[i].id = reg->entries[i].id.load(std::memory_order_relaxed);
      s.e[i].fd = reg->entries[i].fd.load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (reg->version.load(std::memory_order_relaxed) == v1) {
      s.version = v1;
      s.count = n;
      return true;
    }
  }
  return false;
}

// Under l.mu: list an allocation in the registry (peers read it by cross-memory attach when the
// registry is full or cannot be made).
void listAllocation(Local& l, void* p, size_t size, int fd, uint64_t id) {
  if (!l.ensureRegistry()) return;
  uint32_t n = l.reg->count.load(std::memory_order_relaxed);
  if (n < kMaxEntries) {
    l.rewrite([&] {
      Entry& e = l.reg->entries[n];
      e.base.store(reinterpret_cast<uintptr_t>(p), std::memory_order_relaxed);
      e.bytes.store(size, std::memory_order_relaxed);
      e.id.store(id, std::memory_order_relaxed);
      e.fd.store(fd, std::memory_order_relaxed);
      l.reg->count.store(n + 1, std::memory_order_relaxed);
    });
  } else if (!l.warnedFull) {
    l.warnedFull = true;
    FERRY_INFO(log::kTransport,
               "more than %zu live hostAlloc allocations: the others are read by cross-memory "
               "attach",
               kMaxEntries);
  }
}

// Under l.mu: remove allocation `id` from the registry.
void unlistAllocation(Local& l, uint64_t id) {
  if (l.reg == nullptr) return;
  uint32_t n = l.reg->count.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) {
    if (l.reg->entries[i].id.load(std::memory_order_relaxed) != id) continue;
    l.rewrite([&] {
      Entry& last = l.reg->entries[n - 1];
      Entry& e = l.reg->entries[i];
      e.base.store(last.base.load(std::memory_order_relaxed), std::memory_order_relaxed);
      e.bytes.store(last.bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
      e.id.store(last.id.load(std::memory_order_relaxed), std::memory_order_relaxed);
      e.fd.store(last.fd.load(std::memory_order_relaxed), std::memory_order_relaxed);
      l.reg->count.store(n - 1, std::memory_order_relaxed);
    });
    return;
  }
}

// Whether every page of [lo, hi) belongs to private read-write mappings (/proc/self/maps): the
// only memory adoptShared may swap, since a shared mapping's pages belong to its file or object.
bool privateWritable(uintptr_t lo, uintptr_t hi) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uintptr_t covered = lo;
  while (std::getline(maps, line) && covered < hi) {
    unsigned long a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &a, &b, perms) != 3) continue;
    if (b <= covered || a >= hi) continue;
    if (a > covered) return false;  // a hole: unmapped pages
    if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p') return false;
    covered = b;
  }
  return covered >= hi;
}

// Whether [lo, hi) is still mapped from memfd `name` alone: an application that freed a registered
// buffer before deregistering it may have unmapped it, or mapped something else there.
bool mappedFrom(uintptr_t lo, uintptr_t hi, const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uintptr_t covered = lo;
  const std::string path = "/memfd:" + name + " ";
  while (std::getline(maps, line) && covered < hi) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) != 2) continue;
    if (b <= covered || a >= hi) continue;
    if (a > covered || (line + " ").find(path) == std::string::npos) return false;
    covered = b;
  }
  return covered >= hi;
}

// Copy whole pages of a caller's range into fresh shared pages. The pages may hold bytes of the
// caller's neighbouring heap objects, which AddressSanitizer reports as overflows of the caller's
// object: under it the copy is a word loop it does not instrument.
#if defined(__SANITIZE_ADDRESS__)
#define FERRY_SHM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_SHM_ASAN 1
#endif
#endif
#ifdef FERRY_SHM_ASAN
__attribute__((no_sanitize("address"))) void copyPages(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<volatile uint64_t*>(dst);
  const auto* s = static_cast<const volatile uint64_t*>(src);
  for (size_t i = 0; i < bytes / sizeof(uint64_t); ++i) d[i] = s[i];
}
#else
void copyPages(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
#endif

// Put `size` bytes of `from`'s mapping at `at` in place of what is there, atomically (mremap).
// The system call itself, not libc's variadic mremap: libraries that interpose mremap (UCX's
// memory hooks) forward only four arguments, and MREMAP_FIXED then moves the mapping to whatever
// the fifth register held, leaving the caller's pages private. On failure `from` is still mapped.
bool moveMapping(void* from, size_t size, void* at) {
  const long moved = syscall(SYS_mremap, from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, at);
  if (moved == -1) return false;
  if (reinterpret_cast<void*>(moved) == at) return true;
  munmap(reinterpret_cast<void*>(moved), size);  // cannot happen with MREMAP_FIXED; never leave it astray
  errno = EFAULT;
  return false;
}

}  // namespace

Result<void*> allocShared(size_t bytes) {
  const size_t size = std::max<size_t>((bytes + kPage - 1) / kPage * kPage, kPage);
  if (size < bytes) return makeError(ErrorCode::kInvalidArgument, "hostAlloc: %zu bytes is too large", bytes);
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  const uint64_t id = l.nextId++;
  int fd = memfd_create(memfdName(id).c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return makeError(ErrorCode::kSystemError, "hostAlloc(%zu bytes): memfd_create failed: %s", bytes,
                     std::strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "hostAlloc(%zu bytes): cannot size the shared memory: %s", bytes,
                     std::strerror(e));
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "hostAlloc(%zu bytes): mmap failed: %s", bytes, std::strerror(e));
  }
  l.allocs.push_back({p, size, fd, id});
  listAllocation(l, p, size, fd, id);
  l.live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

Status freeShared(void* ptr) {
  if (ptr == nullptr) return Status::ok();
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = std::find_if(l.allocs.begin(), l.allocs.end(),
                         [&](const Local::Alloc& a) { return a.base == ptr && !a.adopted; });
  if (it == l.allocs.end()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "hostFree: %p was not returned by hostAlloc in this process (or was freed already)", ptr);
  }
  unlistAllocation(l, it->id);
  munmap(it->base, it->bytes);
  ::close(it->fd);
  l.allocs.erase(it);
  l.live.fetch_sub(1, std::memory_order_relaxed);
  return Status::ok();
}

Result<void*> adoptShared(void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "registering host memory: buffer %p of %zu bytes (expected a "
                     "non-null buffer of at least 1 byte)",
                     ptr, bytes);
  }
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (p + bytes < p || p + bytes > UINTPTR_MAX - kPage) {
    return makeError(ErrorCode::kInvalidArgument, "registering host memory: %zu bytes at %p wrap the address space",
                     bytes, ptr);
  }
  const uintptr_t lo = p / kPage * kPage, hi = (p + bytes + kPage - 1) / kPage * kPage;
  const size_t size = hi - lo;
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  for (Local::Alloc& a : l.allocs) {
    const auto b = reinterpret_cast<uintptr_t>(a.base), e = b + a.bytes;
    if (lo >= b && hi <= e) {
      ++a.refs;
      return a.base;
    }
    if (lo < e && hi > b) {
      return makeError(ErrorCode::kInvalidArgument,
                       "registering host memory: [%p, +%zu) partly overlaps the registered or hostAlloc range "
                       "[%p, +%zu) (expected a range inside it or apart from it)",
                       ptr, bytes, a.base, a.bytes);
    }
  }
  // This thread's stack: the swap's own frames would sit in the pages it copies.
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (lo < sp + kStackGuard && hi + kStackGuard > sp) {
    return makeError(ErrorCode::kInvalidArgument,
                     "registering host memory: [%p, +%zu) is on the calling thread's stack (expected heap or "
                     "mapped memory)",
                     ptr, bytes);
  }
  if (!privateWritable(lo, hi)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "registering host memory: [%p, +%zu) is not all private read-write memory (expected heap, "
                     "stack or anonymous pages; shared or read-only mappings stay as they are)",
                     ptr, bytes);
  }
  const uint64_t id = l.nextId++;
  int fd = memfd_create(memfdName(id).c_str(), MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    return makeError(ErrorCode::kSystemError, "registering %zu bytes of host memory: shared memory: %s", bytes,
                     std::strerror(e));
  }
  // Populated at once: the copy below writes every page, and one call maps them all for less than
  // a fault per page (docs/PERFORMANCE.md, "Registering plain buffers").
  void* fresh = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (fresh == MAP_FAILED) {
    int e = errno;
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "registering %zu bytes of host memory: mmap: %s", bytes,
                     std::strerror(e));
  }
  copyPages(fresh, reinterpret_cast<void*>(lo), size);
  if (!moveMapping(fresh, size, reinterpret_cast<void*>(lo))) {
    int e = errno;
    munmap(fresh, size);
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "registering %zu bytes of host memory: mremap: %s", bytes,
                     std::strerror(e));
  }
  // What peers will map must be what the caller's addresses show: check, do not trust the swap.
  if (!mappedFrom(lo, hi, memfdName(id))) {
    ::close(fd);
    return makeError(ErrorCode::kSystemError,
                     "registering %zu bytes of host memory at %p: the shared pages did not land at that address "
                     "(something interposes mremap); the buffer stays private",
                     bytes, ptr);
  }
  void* base = reinterpret_cast<void*>(lo);
  l.allocs.push_back({base, size, fd, id, true, 1});
  listAllocation(l, base, size, fd, id);
  l.live.fetch_add(1, std::memory_order_relaxed);
  return base;
}

Status releaseAdopted(void* handle) {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = std::find_if(l.allocs.begin(), l.allocs.end(),
                         [&](const Local::Alloc& a) { return a.base == handle && a.refs > 0; });
  if (it == l.allocs.end()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "deregistering host memory: handle %p was not returned by a registration in this process (or "
                     "was deregistered already)",
                     handle);
  }
  if (--it->refs > 0 || !it->adopted) return Status::ok();
  const auto lo = reinterpret_cast<uintptr_t>(it->base);
  if (!mappedFrom(lo, lo + it->bytes, memfdName(it->id))) {
    // Freed (and unmapped) before deregistration: nothing of ours is left to give back.
    unlistAllocation(l, it->id);
    ::close(it->fd);
    l.allocs.erase(it);
    l.live.fetch_sub(1, std::memory_order_relaxed);
    return Status::ok();
  }
  // Private pages again, with the same bytes: the range is the caller's memory, which outlives us.
  void* fresh = mmap(nullptr, it->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (fresh == MAP_FAILED) {
    ++it->refs;
    return makeError(ErrorCode::kSystemError, "deregistering %zu bytes of host memory: mmap: %s", it->bytes,
                     std::strerror(errno));
  }
  copyPages(fresh, it->base, it->bytes);
  if (!moveMapping(fresh, it->bytes, it->base)) {
    int e = errno;
    munmap(fresh, it->bytes);
    ++it->refs;
    return makeError(ErrorCode::kSystemError, "deregistering %zu bytes of host memory: mremap: %s", it->bytes,
                     std::strerror(e));
  }
  unlistAllocation(l, it->id);
  ::close(it->fd);
  l.allocs.erase(it);
  l.live.fetch_sub(1, std::memory_order_relaxed);
  return Status::ok();
}

bool isShared(const void* ptr, size_t bytes) {
  // Called for every buffer of every single-host collective: no lock. What peers can map is what
  // the registry lists, read here as any peer reads it (a seqlock snapshot of the entries).
  Local& l = local();
  if (l.live.load(std::memory_order_relaxed) == 0 || ptr == nullptr) return false;
  const Registry* reg = l.published.load(std::memory_order_acquire);
  if (reg == nullptr) return false;
  const auto p = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  for (int attempt = 0;; ++attempt) {
    uint64_t v1 = reg->version.load(std::memory_order_acquire);
    if ((v1 & 1) != 0) {
      if (attempt > 100) sched_yield();
      continue;
    }
    bool found = false;
    uint32_t n = std::min<uint32_t>(reg->count.load(std::memory_order_relaxed), kMaxEntries);
    for (uint32_t i = 0; i < n && !found; ++i) {
      uint64_t b = reg->entries[i].base.load(std::memory_order_relaxed);
      uint64_t size = reg->entries[i].bytes.load(std::memory_order_relaxed);
      found = p >= b && p - b <= size && bytes <= size - (p - b);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (reg->version.load(std::memory_order_relaxed) == v1) return found;
  }
}

int registryFd() {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.ensureRegistry() ? l.regFd : -1;
}

void touchPages(void* p, size_t bytes, bool write) {
  auto* base = static_cast<volatile uint8_t*>(p);
  for (size_t off = 0; off < bytes; off += kPage) {
    if (write) {
      base[off] = base[off];
    } else {
      (void)base[off];
    }
  }
}

PeerMemory::~PeerMemory() {
  for (const Mapping& m : maps_) munmap(m.local, m.bytes);
  if (registry_ != nullptr) munmap(const_cast<void*>(registry_), kRegistryBytes);
}

bool PeerMemory::attach(pid_t pid, int fd) {
  if (fd < 0) return false;
  int f = openPeerSegment(pid, fd, "ferry-registry", O_RDONLY);
  if (f < 0) return false;
  struct stat st {};
  void* p = MAP_FAILED;
  if (fstat(f, &st) == 0 && static_cast<size_t>(st.st_size) == kRegistryBytes) {
    p = mmap(nullptr, kRegistryBytes, PROT_READ, MAP_SHARED, f, 0);
  }
  ::close(f);
  if (p == MAP_FAILED) return false;
  if (static_cast<const Registry*>(p)->magic != kRegistryMagic) {
    munmap(p, kRegistryBytes);
    return false;
  }
  pid_ = pid;
  registry_ = p;
  return true;
}

const uint8_t* PeerMemory::map(uint64_t remote, size_t bytes) {
  if (registry_ == nullptr) return nullptr;
  const auto* reg = static_cast<const Registry*>(registry_);
  // What we know of the table is good while the owner has not rewritten it since we looked.
  if (reg->version.load(std::memory_order_acquire) != version_ && !refresh()) return nullptr;
  auto holds = [&](uint64_t base, uint64_t len) {
    return remote >= base && remote - base <= len && bytes <= len - (remote - base);
  };
  if (last_ < maps_.size() && holds(maps_[last_].base, maps_[last_].bytes)) {
    return static_cast<const uint8_t*>(maps_[last_].local) + (remote - maps_[last_].base);
  }
  for (size_t i = 0; i < maps_.size(); ++i) {
    if (holds(maps_[i].base, maps_[i].bytes)) {
      last_ = i;
      return static_cast<const uint8_t*>(maps_[i].local) + (remote - maps_[i].base);
    }
  }
  for (const Known& e : known_) {
    if (!holds(e.base, e.bytes)) continue;
    int f = openPeerSegment(pid_, e.fd, memfdName(e.id), O_RDONLY);
    if (f < 0) return nullptr;
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(f, &st) == 0 && static_cast<uint64_t>(st.st_size) >= e.bytes) {
      // Not MAP_POPULATE: see touchPages().
      p = mmap(nullptr, e.bytes, PROT_READ, MAP_SHARED, f, 0);
    }
    ::close(f);
    if (p == MAP_FAILED) return nullptr;
    // Touched now (touchPages): a collective walking through the buffer would otherwise take a
    // fault per page on first access, in every reader (1 MiB: 256, more than the copy). Once per
    // allocation and peer, instead of inside the first collectives that use it.
    touchPages(p, e.bytes, false);
    FERRY_INFO(log::kTransport, "mapped pid %d's shared allocation #%llu (%llu bytes at 0x%llx)",
               static_cast<int>(pid_), static_cast<unsigned long long>(e.id), static_cast<unsigned long long>(e.bytes),
               static_cast<unsigned long long>(e.base));
    maps_.push_back({e.id, e.base, e.bytes, p});
    last_ = maps_.size() - 1;
    return static_cast<const uint8_t*>(p) + (remote - e.base);
  }
  return nullptr;
}

bool PeerMemory::refresh() {
  auto s = std::make_unique<Snapshot>();
  if (!snapshot(static_cast<const Registry*>(registry_), *s)) return false;
  known_.clear();
  for (uint32_t i = 0; i < s->count; ++i) known_.push_back({s->e[i].id, s->e[i].base, s->e[i].bytes, s->e[i].fd});
  // Unmap allocations the owner freed since.
  for (size_t i = 0; i < maps_.size();) {
    auto alive = std::find_if(known_.begin(), known_.end(), [&](const Known& k) { return k.id == maps_[i].id; });
    if (alive == known_.end()) {
      munmap(maps_[i].local, maps_[i].bytes);
      maps_[i] = maps_.back();
      maps_.pop_back();
    } else {
      ++i;
    }
  }
  last_ = 0;
  version_ = s->version;
  return true;
}

}  // namespace ferry::transport::shm
