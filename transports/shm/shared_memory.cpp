// Shared host allocations and the registry peers find them in (shared_memory.hpp).
#include "transports/shm/shared_memory.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
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
  if (l.ensureRegistry()) {
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
  l.live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

Status freeShared(void* ptr) {
  if (ptr == nullptr) return Status::ok();
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = std::find_if(l.allocs.begin(), l.allocs.end(), [&](const Local::Alloc& a) { return a.base == ptr; });
  if (it == l.allocs.end()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "hostFree: %p was not returned by hostAlloc in this process (or was freed already)", ptr);
  }
  if (l.reg != nullptr) {
    uint32_t n = l.reg->count.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
      if (l.reg->entries[i].id.load(std::memory_order_relaxed) != it->id) continue;
      l.rewrite([&] {
        Entry& last = l.reg->entries[n - 1];
        Entry& e = l.reg->entries[i];
        e.base.store(last.base.load(std::memory_order_relaxed), std::memory_order_relaxed);
        e.bytes.store(last.bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
        e.id.store(last.id.load(std::memory_order_relaxed), std::memory_order_relaxed);
        e.fd.store(last.fd.load(std::memory_order_relaxed), std::memory_order_relaxed);
        l.reg->count.store(n - 1, std::memory_order_relaxed);
      });
      break;
    }
  }
  munmap(it->base, it->bytes);
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
