// The records ranks exchange at init after round 1 (runtime/init_records.hpp), as another rank sends
// them: a record that round-trips, and truncated or malformed ones refused with the sender's rank.
// Then the knobs whose -1 means automatic (runtime/knob_resolvers.hpp), against knobs.def's constants.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "base/config.hpp"
#include "runtime/init_records.hpp"
#include "runtime/knob_resolvers.hpp"

namespace ferry {
namespace {

HostModel someModel() {
  HostModel m;
  m.syncSpin = 2e-7;
  m.syncSleep = 8e-6;
  m.copyBw = 1.5e10;
  m.copyBwCache = 3e10;
  m.reduceBw = 1.2e10;
  m.reduceBwCache = 2.5e10;
  m.cmaBw = 9e9;
  m.cmaCall = 1e-6;
  m.l2Bytes = 2 << 20;
  m.cores = 4;
  return m;
}

AddressRecord someAddresses() {
  AddressRecord a;
  a.transport = {1, 2, 3, 4, 5};
  auto addr = bootstrap::SocketAddress::parse("127.0.0.1:4711");
  REQUIRE(addr.isOk());
  a.shrink.addr = *addr;
  a.shrink.valid = true;
  for (size_t i = 0; i < a.shrink.secret.bytes.size(); ++i) a.shrink.secret.bytes[i] = static_cast<uint8_t>(i + 1);
  a.arena = {9, 8, 7};
  return a;
}

// The error names the sending rank and the record.
void checkRefused(const Status& st, int rank, const char* record) {
  INFO(st.message());
  CHECK(!st.isOk());
  CHECK(st.message().find("rank " + std::to_string(rank) + " ") != std::string::npos);
  CHECK(st.message().find(record) != std::string::npos);
}

TEST_CASE("an address record round-trips", "[init_records]") {
  const AddressRecord a = someAddresses();
  const Bytes wire = a.serialize();
  auto b = AddressRecord::deserialize(wire, 3);
  REQUIRE(b.isOk());
  CHECK(b->transport == a.transport);
  CHECK(b->arena == a.arena);
  CHECK(b->shrink.valid);
  CHECK(b->shrink.addr.toString() == "127.0.0.1:4711");
  CHECK(b->shrink.secret == a.shrink.secret);
  CHECK(b->serialize() == wire);
  // No arena and no shrink listener: both come back empty.
  AddressRecord bare;
  bare.transport = {42};
  auto c = AddressRecord::deserialize(bare.serialize(), 0);
  REQUIRE(c.isOk());
  CHECK(c->transport == Bytes{42});
  CHECK(!c->shrink.valid);
  CHECK(c->arena.empty());
}

TEST_CASE("a truncated or malformed address record names its rank", "[init_records]") {
  const Bytes wire = someAddresses().serialize();
  // Every cut inside the two length-prefixed fields is refused (beyond them the arena address is free-form).
  const size_t fixed = wire.size() - someAddresses().arena.size();
  for (size_t n = 0; n < fixed; ++n) {
    INFO("first " << n << " of " << wire.size() << " bytes");
    checkRefused(AddressRecord::deserialize(Bytes(wire.begin(), wire.begin() + static_cast<long>(n)), 5).status(), 5,
                 "address record");
  }
  // A transport address length past the end.
  Bytes huge = wire;
  const uint32_t big = 0xfffffff0u;
  std::memcpy(huge.data(), &big, 4);
  checkRefused(AddressRecord::deserialize(huge, 2).status(), 2, "address record");
  // A shrink address that is not numeric.
  AddressRecord named = someAddresses();
  Bytes contact = named.shrink.serialize();
  const std::string name = "localhost:4711";
  Bytes bad;
  const uint32_t tl = static_cast<uint32_t>(named.transport.size());
  bad.insert(bad.end(), reinterpret_cast<const uint8_t*>(&tl), reinterpret_cast<const uint8_t*>(&tl) + 4);
  bad.insert(bad.end(), named.transport.begin(), named.transport.end());
  Bytes badContact{1};
  const uint16_t nl = static_cast<uint16_t>(name.size());
  badContact.insert(badContact.end(), reinterpret_cast<const uint8_t*>(&nl), reinterpret_cast<const uint8_t*>(&nl) + 2);
  badContact.insert(badContact.end(), name.begin(), name.end());
  badContact.insert(badContact.end(), contact.end() - 16, contact.end());
  const uint32_t cl = static_cast<uint32_t>(badContact.size());
  bad.insert(bad.end(), reinterpret_cast<const uint8_t*>(&cl), reinterpret_cast<const uint8_t*>(&cl) + 4);
  bad.insert(bad.end(), badContact.begin(), badContact.end());
  checkRefused(AddressRecord::deserialize(bad, 7).status(), 7, "shrink address");
}

TEST_CASE("a ready record round-trips, with rank 0's host model or without", "[init_records]") {
  ReadyRecord r;
  r.singleCopyReads = true;
  r.rdmaPorts = "mlx5_3:1";
  r.model = someModel();
  auto back = ReadyRecord::deserialize(r.serialize(), 0);
  REQUIRE(back.isOk());
  CHECK(back->singleCopyReads);
  CHECK(back->rdmaPorts == "mlx5_3:1");
  REQUIRE(back->model.has_value());
  CHECK(back->model->copyBw == someModel().copyBw);
  CHECK(back->model->cores == 4);
  CHECK(back->serialize() == r.serialize());
  auto plain = ReadyRecord::deserialize(ReadyRecord{}.serialize(), 1);
  REQUIRE(plain.isOk());
  CHECK(!plain->singleCopyReads);
  CHECK(plain->rdmaPorts.empty());
  CHECK(!plain->model.has_value());
  // The ports without a model: a rank other than 0 between hosts.
  ReadyRecord ports;
  ports.rdmaPorts = "mlx5_0:1,mlx5_1:1";
  auto portsBack = ReadyRecord::deserialize(ports.serialize(), 2);
  REQUIRE(portsBack.isOk());
  CHECK(portsBack->rdmaPorts == ports.rdmaPorts);
  CHECK(!portsBack->model.has_value());
}

TEST_CASE("a malformed ready record names its rank", "[init_records]") {
  checkRefused(ReadyRecord::deserialize({}, 4).status(), 4, "ready record");
  checkRefused(ReadyRecord::deserialize({2}, 6).status(), 6, "ready record");
  // The first byte without the ports' length, and a length past the end or over the limit.
  checkRefused(ReadyRecord::deserialize({1}, 5).status(), 5, "ready record");
  checkRefused(ReadyRecord::deserialize({0, 9, 0, 0, 0, 'm'}, 3).status(), 3, "ready record");
  ReadyRecord huge;
  huge.rdmaPorts.assign(ReadyRecord::kMaxPortsBytes + 1, 'x');
  checkRefused(ReadyRecord::deserialize(huge.serialize(), 2).status(), 2, "ready record");
  ReadyRecord r;
  r.model = someModel();
  Bytes wire = r.serialize();
  wire.resize(wire.size() / 2);
  checkRefused(ReadyRecord::deserialize(wire, 0).status(), 0, "host model");
}

TEST_CASE("an intra-host record round-trips and refuses what no rank writes", "[init_records]") {
  LevelRecord l;
  l.ranks = 3;
  l.mailboxBytes = 4 << 20;
  l.arena = true;
  l.singleCopyReads = true;
  l.model = someModel();
  const Bytes wire = l.serialize();
  auto back = LevelRecord::deserialize(wire, 0);
  REQUIRE(back.isOk());
  CHECK(back->ranks == 3);
  CHECK(back->mailboxBytes == l.mailboxBytes);
  CHECK(back->arena);
  CHECK(back->singleCopyReads);
  CHECK(back->model.reduceBw == someModel().reduceBw);
  CHECK(back->serialize() == wire);
  for (size_t n : {size_t{0}, size_t{8}, size_t{23}}) {
    checkRefused(LevelRecord::deserialize(Bytes(wire.begin(), wire.begin() + static_cast<long>(n)), 0).status(), 0,
                 "intra-host record");
  }
  Bytes noRanks = wire;
  std::memset(noRanks.data(), 0, 8);
  checkRefused(LevelRecord::deserialize(noRanks, 0).status(), 0, "intra-host record");
  Bytes badFlags = wire;
  badFlags[16] = 4;
  checkRefused(LevelRecord::deserialize(badFlags, 0).status(), 0, "intra-host record");
  checkRefused(LevelRecord::deserialize(Bytes(wire.begin(), wire.begin() + 30), 0).status(), 0, "host model");
  checkRefused(LevelRecord::deserialize(Bytes(LevelRecord::kMaxBytes + 1, 0), 0).status(), 0, "intra-host record");
}

// The resolvers read the environment's knobs: each case checks the automatic value where the knob
// is unset (-1), the knob's own value otherwise.
TEST_CASE("automatic knobs resolve by knobs.def's constants", "[knobs]") {
  if (config().spinNs < 0) {
    CHECK(resolveSpinNs(2, 4) == knob_auto::spinNs.a);
    CHECK(resolveSpinNs(4, 4) == knob_auto::spinNs.a);
    CHECK(resolveSpinNs(5, 4) == knob_auto::spinNs.b);
  } else {
    CHECK(resolveSpinNs(5, 4) == config().spinNs);
  }
  if (config().yieldNs < 0) {
    CHECK(resolveYieldNs(1, 1) == knob_auto::yieldNs.a);
    CHECK(resolveYieldNs(3, 2) == knob_auto::yieldNs.b);
  } else {
    CHECK(resolveYieldNs(3, 2) == config().yieldNs);
  }
  if (config().tuneTrials < 0) {
    CHECK(resolveTuneTrials(true) == knob_auto::tuneTrials.a);
    CHECK(resolveTuneTrials(false) == knob_auto::tuneTrials.b);
  }
  if (config().hierChunkBytes == -1) {
    const double copyBw = 1e10;
    NetLevel slow{1e-5, static_cast<double>(knob_auto::hierChunkBytes.b) / copyBw * 2, true};
    NetLevel fast{1e-5, 1.0 / copyBw, true};
    auto chunk = resolveHierChunkBytes(0, slow, copyBw);
    REQUIRE(chunk.isOk());
    CHECK(*chunk == static_cast<size_t>(knob_auto::hierChunkBytes.a));
    CHECK(*resolveHierChunkBytes(0, fast, copyBw) == 0);
    CHECK(*resolveHierChunkBytes(0, NetLevel{}, copyBw) == 0);
  }
  if (config().streamMinBytes < 0) CHECK(resolveStreamMinBytes() > 0);
}

}  // namespace
}  // namespace ferry
