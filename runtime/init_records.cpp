#include "runtime/init_records.hpp"

#include <cstring>
#include <limits>

namespace ferry {
namespace {

void put(Bytes& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

// Reads a record front to back; every take fails, rather than reads, past the end.
class Reader {
 public:
  explicit Reader(const Bytes& b) : b_(b) {}
  bool take(void* dst, size_t n) {
    if (n > b_.size() - at_) return false;
    std::memcpy(dst, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  /// A u32 length and that many bytes.
  bool takeSized(Bytes* out) {
    uint32_t n = 0;
    if (!take(&n, 4) || n > b_.size() - at_) return false;
    out->assign(b_.begin() + static_cast<std::ptrdiff_t>(at_), b_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return true;
  }
  Bytes rest() {
    Bytes r(b_.begin() + static_cast<std::ptrdiff_t>(at_), b_.end());
    at_ = b_.size();
    return r;
  }

 private:
  const Bytes& b_;
  size_t at_ = 0;
};

void putSized(Bytes& out, const Bytes& b) {
  const uint32_t n = static_cast<uint32_t>(b.size());
  put(out, &n, 4);
  put(out, b.data(), b.size());
}

}  // namespace

Bytes AddressRecord::serialize() const {
  Bytes out;
  putSized(out, transport);
  putSized(out, shrink.serialize());
  put(out, arena.data(), arena.size());
  return out;
}

Result<AddressRecord> AddressRecord::deserialize(const Bytes& bytes, int rank) {
  AddressRecord a;
  Reader in(bytes);
  Bytes contact;
  if (!in.takeSized(&a.transport) || !in.takeSized(&contact)) {
    return makeError(ErrorCode::kInternalError,
                     "rank %d published a malformed address record (%zu bytes; expected a u32 length and the "
                     "transport address, a u32 length and the shrink contact, then the arena address)",
                     rank, bytes.size());
  }
  auto c = ShrinkContact::deserialize(contact, rank);
  FERRY_TRY(c);
  a.shrink = *c;
  a.arena = in.rest();
  return a;
}

Bytes ReadyRecord::serialize() const {
  Bytes out(1, singleCopyReads ? 1 : 0);
  putSized(out, Bytes(rdmaPorts.begin(), rdmaPorts.end()));
  if (model) {
    Bytes m = model->serialize();
    out.insert(out.end(), m.begin(), m.end());
  }
  return out;
}

Result<ReadyRecord> ReadyRecord::deserialize(const Bytes& bytes, int rank) {
  Reader in(bytes);
  uint8_t reads = 0;
  Bytes ports;
  if (!in.take(&reads, 1) || reads > 1 || !in.takeSized(&ports) || ports.size() > kMaxPortsBytes) {
    return makeError(ErrorCode::kInternalError,
                     "rank %d sent a malformed ready record (%zu bytes; expected a first byte of 0 or 1, then a u32 "
                     "length and at most %u bytes of RDMA ports)",
                     rank, bytes.size(), kMaxPortsBytes);
  }
  ReadyRecord r;
  r.singleCopyReads = reads == 1;
  r.rdmaPorts.assign(ports.begin(), ports.end());
  Bytes rest = in.rest();
  if (!rest.empty()) {
    auto m = HostModel::deserialize(rest);
    if (!m.isOk()) {
      return makeError(ErrorCode::kInternalError, "rank %d sent a ready record with a malformed host model: %s", rank,
                       m.status().message().c_str());
    }
    r.model = *m;
  }
  return r;
}

Bytes LevelRecord::serialize() const {
  const uint64_t head[3] = {static_cast<uint64_t>(ranks), mailboxBytes,
                            (arena ? 1u : 0u) | (singleCopyReads ? 2u : 0u)};
  Bytes out;
  put(out, head, sizeof(head));
  Bytes m = model.serialize();
  out.insert(out.end(), m.begin(), m.end());
  return out;
}

Result<LevelRecord> LevelRecord::deserialize(const Bytes& bytes, int rank) {
  uint64_t head[3] = {};
  Reader in(bytes);
  if (bytes.size() > kMaxBytes || !in.take(head, sizeof(head)) || head[0] < 1 ||
      head[0] > static_cast<uint64_t>(std::numeric_limits<int>::max()) || head[2] > 3) {
    return makeError(ErrorCode::kInternalError,
                     "rank %d sent a malformed intra-host record (%zu bytes; expected 24 to %llu bytes: ranks >= 1, "
                     "mailbox bytes, flags 0 to 3, then a host model)",
                     rank, bytes.size(), static_cast<unsigned long long>(kMaxBytes));
  }
  LevelRecord r;
  r.ranks = static_cast<int>(head[0]);
  r.mailboxBytes = head[1];
  r.arena = (head[2] & 1) != 0;
  r.singleCopyReads = (head[2] & 2) != 0;
  if (r.arena) {
    auto m = HostModel::deserialize(in.rest());
    if (!m.isOk()) {
      return makeError(ErrorCode::kInternalError, "rank %d sent an intra-host record with a malformed host model: %s",
                       rank, m.status().message().c_str());
    }
    r.model = *m;
  }
  return r;
}

}  // namespace ferry
