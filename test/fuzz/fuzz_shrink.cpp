// Fuzzes what Comm::shrink reads from outside (runtime/shrink.hpp): the shrink contact each rank
// publishes at init (address and secret, through the init rounds), the greeting a joiner sends the
// leader, and the leader's answer a joiner reads. The two socket protocols are fed through a
// socket pair: the fuzzer's bytes are written, the writing side closed, and the reader must end
// with a value or an error, never read past what arrived, never allocate what a length announces.
//
// Input: one selector byte, then the bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/shrink.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;

namespace {

const bootstrap::Secret kSecret = [] {
  bootstrap::Secret s;
  for (size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<uint8_t>(i * 17);
  return s;
}();
constexpr uint64_t kCommId = 0x0123456789abcdefull;
constexpr int kSize = 8;

void contact(const std::vector<uint8_t>& bytes) {
  auto c = ShrinkContact::deserialize(bytes, 3);
  if (!c.isOk()) {
    FERRY_FUZZ_CHECK(c.status().message().find("rank 3") != std::string::npos);
    return;
  }
  auto again = ShrinkContact::deserialize(c->serialize(), 3);
  FERRY_FUZZ_CHECK(again.isOk() && again->valid == c->valid && again->secret == c->secret);
  if (c->valid) FERRY_FUZZ_CHECK(again->addr.toString() == c->addr.toString());
}

// The bytes arrive on one end of a socket pair whose other end then closes.
template <typename Read>
void throughSocket(const std::vector<uint8_t>& bytes, Read read) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return;
  int sndbuf = 1 << 16;
  (void)::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fds[1], bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::close(fds[1]);
  read(fds[0]);
  ::close(fds[0]);
}

void greeting(const std::vector<uint8_t>& bytes) {
  throughSocket(bytes, [](int fd) {
    auto g = readShrinkGreeting(fd, kSecret, kCommId, kSize, Deadline::after(1.0));
    if (!g.isOk()) return;
    FERRY_FUZZ_CHECK(g->rank >= 0 && g->rank < kSize);
    FERRY_FUZZ_CHECK(g->exclude.size() <= static_cast<size_t>(kSize));
  });
}

void reply(const std::vector<uint8_t>& bytes) {
  throughSocket(bytes, [](int fd) {
    auto r = readShrinkReply(fd, 2, Deadline::after(1.0));
    if (!r.isOk()) {
      FERRY_FUZZ_CHECK(r.status().message().find("rank 2") != std::string::npos);
      return;
    }
    if (!r->status.isOk()) FERRY_FUZZ_CHECK(r->status.message().find("rank 2") != std::string::npos);
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t which = in.u8() % 3;
  std::vector<uint8_t> bytes = in.rest();
  if (which == 0) contact(bytes);
  if (which == 1) greeting(bytes);
  if (which == 2) reply(bytes);
  return 0;
}
