// Shared host allocations (transports/shm/shared_memory.hpp): the owner's registry, and a reader
// mapping through it; and the segments of the shm transport and arena (segment.hpp). The reader
// here is this same process (its own /proc/<pid>/fd), which exercises the same paths as a peer:
// registry lookup, mapping, and noticing frees.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>
#include <string>
#include <vector>

#include "transports/shm/segment.hpp"
#include "transports/shm/shared_memory.hpp"

using namespace ferry;
using namespace ferry::transport::shm;

namespace {
// While set, mremap behaves as an interposer that forwards four of its arguments (UCX's memory
// hooks): MREMAP_FIXED then moves the mapping to an address the caller never named.
std::atomic<bool> lossyMremap{false};
}  // namespace

extern "C" void* mremap(void* old, size_t oldSize, size_t newSize, int flags, ...) {
  void* target = reinterpret_cast<void*>(uintptr_t{0x300000000000});  // free in any test process
  if (!lossyMremap.load()) {
    va_list ap;
    va_start(ap, flags);
    target = (flags & MREMAP_FIXED) != 0 ? va_arg(ap, void*) : nullptr;
    va_end(ap);
  }
  return reinterpret_cast<void*>(syscall(SYS_mremap, old, oldSize, newSize, flags, target));
}

TEST_CASE("shared allocations are zeroed, page aligned and known to isShared", "[shm]") {
  auto a = allocShared(10000);
  REQUIRE(a.isOk());
  auto* p = static_cast<uint8_t*>(*a);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  for (size_t i = 0; i < 10000; ++i) REQUIRE(p[i] == 0);
  CHECK(isShared(p, 10000));
  CHECK(isShared(p + 5000, 5000));
  CHECK_FALSE(isShared(p + 5000, 100000));  // runs past the allocation (12288 bytes)
  int local = 0;
  CHECK_FALSE(isShared(&local, sizeof(local)));
  CHECK(freeShared(p).isOk());
  CHECK_FALSE(isShared(p, 1));
}

TEST_CASE("freeing what allocShared did not return is an argument error", "[shm]") {
  int local = 0;
  Status s = freeShared(&local);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("was not returned by hostAlloc") != std::string::npos);
  auto a = allocShared(0);  // 0 bytes: one page
  REQUIRE(a.isOk());
  CHECK(freeShared(*a).isOk());
  CHECK(freeShared(*a).code() == ErrorCode::kInvalidArgument);  // twice
  CHECK(freeShared(nullptr).isOk());
}

TEST_CASE("a reader maps allocations through the registry and notices frees", "[shm]") {
  PeerMemory reader;
  REQUIRE(registryFd() >= 0);
  REQUIRE(reader.attach(getpid(), registryFd()));
  auto a = allocShared(1 << 20);
  REQUIRE(a.isOk());
  auto* p = static_cast<uint8_t*>(*a);
  for (size_t i = 0; i < (1u << 20); ++i) p[i] = static_cast<uint8_t>(i * 7);
  const auto remote = reinterpret_cast<uint64_t>(p);

  const uint8_t* m = reader.map(remote + 4096, 8192);
  REQUIRE(m != nullptr);
  CHECK(m != p + 4096);  // a mapping of its own, not the owner's address
  CHECK(std::memcmp(m, p + 4096, 8192) == 0);
  p[5000] = 0xAB;  // shared: the owner's stores are the reader's
  CHECK(m[5000 - 4096] == 0xAB);
  CHECK(reader.map(remote + (1 << 20) - 8, 16) == nullptr);  // past the end
  int local = 0;
  CHECK(reader.map(reinterpret_cast<uint64_t>(&local), sizeof(local)) == nullptr);

  // Freed, then a new allocation (possibly at the same address): the reader must map the new one.
  CHECK(freeShared(p).isOk());
  CHECK(reader.map(remote, 16) == nullptr);
  auto b = allocShared(1 << 20);
  REQUIRE(b.isOk());
  auto* q = static_cast<uint8_t*>(*b);
  std::memset(q, 0x5C, 1 << 20);
  const uint8_t* n = reader.map(reinterpret_cast<uint64_t>(q), 1 << 20);
  REQUIRE(n != nullptr);
  CHECK(n[0] == 0x5C);
  CHECK(n[(1 << 20) - 1] == 0x5C);
  CHECK(freeShared(q).isOk());
}

TEST_CASE("adopting ordinary memory shares it in place with the same bytes", "[shm]") {
  PeerMemory reader;
  REQUIRE(reader.attach(getpid(), registryFd()));
  // Heap memory with neighbours on its first and last pages (new[], not page aligned).
  const size_t n = 3 * 4096 + 123;
  std::vector<uint8_t> before(n + 200);
  auto* block = new uint8_t[n + 200];
  for (size_t i = 0; i < n + 200; ++i) block[i] = before[i] = static_cast<uint8_t>(i * 13 + 1);
  uint8_t* buf = block + 100;
  CHECK_FALSE(isShared(buf, n));
  auto h = adoptShared(buf, n);
  REQUIRE(h.isOk());
  CHECK(std::memcmp(block, before.data(), n + 200) == 0);  // the range and its neighbours kept their bytes
  CHECK(isShared(buf, n));
  const uint8_t* m = reader.map(reinterpret_cast<uint64_t>(buf), n);
  REQUIRE(m != nullptr);
  CHECK(m != buf);
  CHECK(std::memcmp(m, buf, n) == 0);
  buf[7] = 0xEE;  // shared: the owner's stores are the reader's
  CHECK(m[7] == 0xEE);

  // A range inside it adds a reference; the first release keeps it shared.
  auto inner = adoptShared(buf + 4096, 100);
  REQUIRE(inner.isOk());
  CHECK(*inner == *h);
  CHECK(releaseAdopted(*inner).isOk());
  CHECK(isShared(buf, n));
  // hostFree refuses it: the memory is the caller's.
  CHECK(freeShared(*h).code() == ErrorCode::kInvalidArgument);

  // Released: private again, same bytes, a store no longer reaches the reader's old mapping.
  CHECK(releaseAdopted(*h).isOk());
  CHECK_FALSE(isShared(buf, n));
  CHECK(buf[7] == 0xEE);
  CHECK(std::memcmp(buf + 8, before.data() + 108, n - 8) == 0);
  buf[9] = 0x11;
  CHECK(reader.map(reinterpret_cast<uint64_t>(buf), n) == nullptr);
  CHECK(releaseAdopted(*h).code() == ErrorCode::kInvalidArgument);
  delete[] block;
}

TEST_CASE("adopting shares the caller's own pages even where mremap is interposed", "[shm]") {
  PeerMemory reader;
  REQUIRE(reader.attach(getpid(), registryFd()));
  const size_t n = 4 * 4096;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* buf = static_cast<uint8_t*>(p);
  std::memset(buf, 0x5A, n);
  lossyMremap = true;
  auto h = adoptShared(buf, n);
  lossyMremap = false;
  REQUIRE(h.isOk());
  buf[100] = 0x77;  // a store after registration is what peers read
  const uint8_t* m = reader.map(reinterpret_cast<uint64_t>(buf), n);
  REQUIRE(m != nullptr);
  CHECK(m[0] == 0x5A);
  CHECK(m[100] == 0x77);
  lossyMremap = true;
  CHECK(releaseAdopted(*h).isOk());
  lossyMremap = false;
  CHECK_FALSE(isShared(buf, n));
  buf[200] = 0x12;  // private again: the reader's mapping no longer follows
  CHECK(m[200] != 0x12);
  CHECK(buf[100] == 0x77);
  munmap(p, n);
}

TEST_CASE("adopting refuses what cannot be shared in place, naming it", "[shm]") {
  CHECK(adoptShared(nullptr, 10).status().message().find("non-null buffer") != std::string::npos);
  std::vector<uint8_t> heap(64);
  CHECK(adoptShared(heap.data(), 0).status().code() == ErrorCode::kInvalidArgument);
  int onStack[16] = {};
  Status s = adoptShared(onStack, sizeof(onStack)).status();
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("stack") != std::string::npos);
  // A shared mapping's pages belong to their object: refused, left as they are.
  void* shared = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  s = adoptShared(shared, 8192).status();
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("not all private read-write") != std::string::npos);
  munmap(shared, 8192);
  // A partial overlap with an adopted range.
  void* priv = mmap(nullptr, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(priv != MAP_FAILED);
  auto* b = static_cast<uint8_t*>(priv);
  auto h = adoptShared(b, 2 * 4096);
  REQUIRE(h.isOk());
  s = adoptShared(b + 4096, 2 * 4096).status();
  CHECK(s.message().find("partly overlaps") != std::string::npos);
  // Unmapped before it was released (an application that freed first): released without a crash.
  munmap(priv, 4 * 4096);
  CHECK(releaseAdopted(*h).isOk());
  CHECK_FALSE(isShared(b, 1));
}

TEST_CASE("attaching to something that is not a registry fails cleanly", "[shm]") {
  PeerMemory reader;
  CHECK_FALSE(reader.attach(getpid(), -1));
  CHECK_FALSE(reader.attach(getpid(), 0));  // stdin: not the registry memfd
  CHECK(reader.map(0x1000, 16) == nullptr);
}

TEST_CASE("a segment is mapped through its owner's descriptor, and only while the owner holds it", "[shm]") {
  const std::string name = "ferry-test-segment-" + std::to_string(getpid());
  auto fd = createSegment(name, 3 * 4096);
  REQUIRE(fd.isOk());
  void* own = mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  REQUIRE(own != MAP_FAILED);
  CHECK(static_cast<uint8_t*>(own)[3 * 4096 - 1] == 0);

  auto peer = mapPeerSegment(getpid(), *fd, name, 3 * 4096);
  REQUIRE(peer.isOk());
  CHECK(*peer != own);
  static_cast<uint8_t*>(own)[5000] = 0x6D;  // one memory, two mappings
  CHECK(static_cast<uint8_t*>(*peer)[5000] == 0x6D);
  munmap(*peer, 3 * 4096);

  // Another name (a descriptor number reused for another segment), or more bytes than it holds.
  auto other = mapPeerSegment(getpid(), *fd, name + "-other", 3 * 4096);
  REQUIRE_FALSE(other.isOk());
  CHECK(other.status().message().find("another file") != std::string::npos);
  auto larger = mapPeerSegment(getpid(), *fd, name, 4 * 4096);
  REQUIRE_FALSE(larger.isOk());
  CHECK(larger.status().message().find("expected 16384") != std::string::npos);

  // The owner closed it (sealed()): the owner's mapping lives on, a new peer cannot map it.
  close(*fd);
  auto late = mapPeerSegment(getpid(), *fd, name, 3 * 4096);
  REQUIRE_FALSE(late.isOk());
  CHECK(static_cast<uint8_t*>(own)[5000] == 0x6D);
  munmap(own, 3 * 4096);
}
