// The 128-byte unique id (ncclUniqueId's size): everything a rank needs to join a job.
//
// The id travels through user code (MPI_Bcast, a file, a torch store) between processes that may
// run different builds, so the layout is explicit, big-endian and versioned rather than a memcpy of
// sockaddr_storage, whose layout and AF_* values differ between platforms:
//   [0,4)   magic "FRID"            [4,6)   layout version (1)
//   [6,8)   family: 4 or 6          [8,10)  port
//   [10,12) zero                    [12,28) address (IPv4 uses the first 4 bytes)
//   [28,32) IPv6 scope id           [32,48) secret              [48,128) zero
#include <netinet/in.h>

#include <cstring>

#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap {
namespace {

constexpr uint32_t kIdMagic = 0x46524944;  // "FRID"
constexpr uint16_t kIdVersion = 1;

void put(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
}

uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void encodeUniqueId(const RootInfo& info, uint8_t out[kUniqueIdBytes]) {
  std::memset(out, 0, kUniqueIdBytes);
  put(out, kIdMagic, 4);
  put(out + 4, kIdVersion, 2);
  put(out + 8, info.addr.port(), 2);
  if (info.addr.storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&info.addr.storage);
    put(out + 6, 6, 2);
    std::memcpy(out + 12, &in6->sin6_addr, 16);
    put(out + 28, in6->sin6_scope_id, 4);
  } else {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&info.addr.storage);
    put(out + 6, 4, 2);
    std::memcpy(out + 12, &in->sin_addr, 4);
  }
  std::memcpy(out + 32, info.secret.bytes.data(), info.secret.bytes.size());
}

Result<RootInfo> decodeUniqueId(const uint8_t in[kUniqueIdBytes]) {
  auto magic = static_cast<uint32_t>(get(in, 4));
  if (magic != kIdMagic) {
    return makeError(ErrorCode::kInvalidArgument,
                     "unique id starts with 0x%08x, expected the magic 0x%08x: it was not made by "
                     "ferryGetUniqueId or was corrupted in transit",
                     magic, kIdMagic);
  }
  auto version = static_cast<unsigned>(get(in + 4, 2));
  if (version != kIdVersion) {
    return makeError(ErrorCode::kInvalidArgument,
                     "unique id has layout version %u, expected %u: all ranks must run the same ferry version", version,
                     unsigned{kIdVersion});
  }
  auto family = static_cast<unsigned>(get(in + 6, 2));
  auto port = static_cast<uint16_t>(get(in + 8, 2));
  RootInfo info;
  if (family == 4) {
    info.addr = SocketAddress::loopback(port);
    std::memcpy(&reinterpret_cast<sockaddr_in*>(&info.addr.storage)->sin_addr, in + 12, 4);
  } else if (family == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&info.addr.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, in + 12, 16);
    in6->sin6_scope_id = static_cast<uint32_t>(get(in + 28, 4));
    info.addr.length = sizeof(sockaddr_in6);
  } else {
    return makeError(ErrorCode::kInvalidArgument,
                     "unique id names address family %u, expected 4 (IPv4) or 6 (IPv6): it was corrupted", family);
  }
  std::memcpy(info.secret.bytes.data(), in + 32, info.secret.bytes.size());
  return info;
}

}  // namespace ferry::bootstrap
