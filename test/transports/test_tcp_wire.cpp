// The TCP transport's split of a message over its streams (transports/tcp/tcp_wire.hpp): both
// sides compute it from the size alone, so it must cover every byte once, in order, with no empty
// piece, never more pieces than streams, and aligned pieces but for the last.
#include <catch2/catch.hpp>

#include <netinet/in.h>

#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/tcp_wire.hpp"

using namespace ferry::transport::tcp;

TEST_CASE("a message splits into contiguous, non-empty, aligned pieces, one per stream at most", "[tcp]") {
  const size_t sizes[] = {0,
                          1,
                          4096,
                          kSplitMinBytes - 1,
                          kSplitMinBytes,
                          kSplitMinBytes + 1,
                          300 * 1024,
                          (1 << 20) - 3,
                          1 << 20,
                          (16 << 20) + 5,
                          size_t{1} << 32};
  for (int streams = 1; streams <= kMaxStreams; ++streams) {
    for (size_t bytes : sizes) {
      INFO(bytes << " B over " << streams << " stream(s)");
      const Split split = splitOf(bytes, streams);
      REQUIRE(split.count >= 1);
      REQUIRE(split.count <= streams);
      if (bytes < kSplitMinBytes || streams == 1) REQUIRE(split.count == 1);
      size_t next = 0;
      for (int i = 0; i < split.count; ++i) {
        const Piece p = pieceOf(bytes, split, i);
        CHECK(p.offset == next);
        if (bytes > 0) CHECK(p.bytes > 0);
        if (split.count > 1 && i + 1 < split.count) CHECK(p.bytes % kPieceAlign == 0);
        next = p.offset + p.bytes;
      }
      CHECK(next == bytes);
    }
  }
}

TEST_CASE("large messages use every stream", "[tcp]") {
  for (int streams = 2; streams <= kMaxStreams; ++streams) {
    const size_t bytes = static_cast<size_t>(streams) * kPieceAlign * 4;
    CHECK(splitOf(bytes, streams).count == streams);
  }
  // 256 KiB over 4 streams: four 64 KiB pieces.
  const Split s = splitOf(256 * 1024, 4);
  CHECK(s.count == 4);
  CHECK(s.each == 64 * 1024);
}

TEST_CASE("options out of range are refused with the knob, the rank and the range", "[tcp]") {
  TcpOptions o;
  o.rank = 3;
  o.size = 4;
  auto* in = reinterpret_cast<sockaddr_in*>(&o.bind);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  o.bindLength = sizeof(sockaddr_in);
  o.streams = 0;
  auto t = createTcpTransport(o);
  REQUIRE_FALSE(t.isOk());
  CHECK(t.status().message() == "FERRY_SOCKET_STREAMS=0 on rank 3 is out of range (expected 1..16)");
  o.streams = 1;
  o.spinUs = -1;
  t = createTcpTransport(o);
  REQUIRE_FALSE(t.isOk());
  CHECK(t.status().message() == "FERRY_SOCKET_SPIN_US=-1 on rank 3 is out of range (expected 0..1000000)");
  o.spinUs = 1000001;
  t = createTcpTransport(o);
  REQUIRE_FALSE(t.isOk());
  CHECK(t.status().message() == "FERRY_SOCKET_SPIN_US=1000001 on rank 3 is out of range (expected 0..1000000)");
  o.spinUs = 200;
  t = createTcpTransport(o);
  CHECK(t.isOk());
}
