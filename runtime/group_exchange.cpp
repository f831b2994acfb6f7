#include "runtime/group_exchange.hpp"

#include <algorithm>
#include <cstring>

#include "ferry/comm.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry {
namespace {

class StoreRendezvous final : public Rendezvous {
 public:
  explicit StoreRendezvous(std::unique_ptr<bootstrap::StoreClient> c) : client_(std::move(c)) {}
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline deadline) override {
    return client_->allGather(mine, deadline);
  }

 private:
  std::unique_ptr<bootstrap::StoreClient> client_;
};

// Two parent all-gathers per round: sizes, then contributions padded to the largest.
class ParentRendezvous final : public Rendezvous {
 public:
  ParentRendezvous(Comm& parent, std::vector<int> members) : parent_(parent), members_(std::move(members)) {}
  Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline) override {
    const int n = parent_.size();
    std::vector<uint64_t> sizes(n);
    uint64_t mySize = mine.size();
    FERRY_TRY(parent_.allGather(&mySize, sizes.data(), 1, DataType::kUint64));
    uint64_t maxSize = *std::max_element(sizes.begin(), sizes.end());
    std::vector<uint8_t> padded(maxSize, 0), all(maxSize * n);
    if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
    FERRY_TRY(parent_.allGather(padded.data(), all.data(), maxSize, DataType::kUint8));
    std::vector<Bytes> out;
    for (int p : members_) {
      const uint8_t* at = all.data() + maxSize * p;
      out.emplace_back(at, at + sizes[p]);
    }
    return out;
  }

 private:
  Comm& parent_;
  std::vector<int> members_;
};

}  // namespace

std::unique_ptr<Rendezvous> storeRendezvous(std::unique_ptr<bootstrap::StoreClient> client) {
  return std::make_unique<StoreRendezvous>(std::move(client));
}

std::unique_ptr<Rendezvous> parentRendezvous(Comm& parent, std::vector<int> members) {
  return std::make_unique<ParentRendezvous>(parent, std::move(members));
}

}  // namespace ferry
