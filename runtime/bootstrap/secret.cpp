// The job secret: where its bits come from and how two secrets are compared.
//
// A random secret goes into every unique id; a job started from the environment alone derives it
// from FERRY_SECRET instead, so every rank computes the same value without talking first. The
// comparison runs in constant time so that a client guessing secrets learns nothing from how fast
// the root refuses it.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap {
namespace {

// Fills `out` from getrandom(), falling back to /dev/urandom on kernels without the call.
bool systemRandom(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      break;
    }
  }
  if (got == n) return true;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (got < n) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fd);
  return got == n;
}

// The splitmix64 finalizer: spreads every input bit over the whole word.
uint64_t finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// One 64-bit half of the string hash: FNV-1a over the bytes from a seeded start, then finalized
// together with the length so that strings differing only in trailing zero bytes still differ.
uint64_t hashHalf(const std::string& text, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ finalize(seed);
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return finalize(h ^ finalize(text.size() + seed));
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Secret Secret::random() {
  Secret s;
  if (!systemRandom(s.bytes.data(), s.bytes.size())) {
    // Nothing better is available: still unique per process and instant, just not unguessable.
    FERRY_WARN(log::kBootstrap,
               "neither getrandom() nor /dev/urandom worked (%s); the job secret is derived "
               "from the clock and pid and is guessable",
               std::strerror(errno));
    auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    uint64_t a = finalize(now ^ (uint64_t(getpid()) << 32));
    uint64_t b = finalize(a ^ reinterpret_cast<uintptr_t>(&s));
    std::memcpy(s.bytes.data(), &a, 8);
    std::memcpy(s.bytes.data() + 8, &b, 8);
  }
  return s;
}

// 32 hex digits are the secret itself (what a launcher that generated one would export). Anything
// else goes through a 128-bit hash made of two differently seeded 64-bit hashes. This is NOT a key
// derivation function: it does not slow down guessing, so a low-entropy FERRY_SECRET stays
// guessable. Its only job is to map any string to 16 bytes identically on every rank.
Secret Secret::fromString(const std::string& text) {
  Secret s;
  bool hex = text.size() == 2 * s.bytes.size();
  for (size_t i = 0; hex && i < s.bytes.size(); ++i) {
    int hi = hexValue(text[2 * i]);
    int lo = hexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      hex = false;
    } else {
      s.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
  }
  if (hex) return s;
  uint64_t a = hashHalf(text, 0x6665727279736563ull);  // "ferrysec"
  uint64_t b = hashHalf(text, 0x726f6f746b657931ull);  // "rootkey1"
  for (int i = 0; i < 8; ++i) {
    s.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(a >> (56 - 8 * i));
    s.bytes[static_cast<size_t>(8 + i)] = static_cast<uint8_t>(b >> (56 - 8 * i));
  }
  return s;
}

bool Secret::operator==(const Secret& o) const {
  // Touch every byte whatever the first difference; volatile keeps the compiler from exiting early.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < bytes.size(); ++i) diff = static_cast<uint8_t>(diff | (bytes[i] ^ o.bytes[i]));
  return diff == 0;
}

}  // namespace ferry::bootstrap
