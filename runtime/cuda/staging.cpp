// StagingPool (see staging.hpp).
#include "runtime/cuda/staging.hpp"

#include <algorithm>

namespace ferry::gpu {

StagingPool::~StagingPool() {
  for (void* p : pinned_) hostFree(p);
}

Result<StagingPool::Pair> StagingPool::get(Stream stream, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Pair& pair = pairs_[stream];
  if (pair.bytes >= bytes && pair.in != nullptr) return pair;
  auto capturing = streamCapturing(stream, where_);
  FERRY_TRY(capturing);
  if (*capturing) {
    return makeError(ErrorCode::kInvalidUsage,
                     "staged collective on rank %d, device %d: the stream is being captured and its staging buffers "
                     "(%zu bytes) must grow to %zu bytes, which capture forbids; run the call once before capturing "
                     "or set FERRY_GPU_STAGING_BYTES=%zu",
                     where_.rank, where_.device, pair.bytes, bytes, bytes);
  }
  // Work already queued may still read the old pair: wait for it, and keep the old pair alive
  // (graphs captured earlier refer to it).
  if (pair.in != nullptr) FERRY_TRY(streamSynchronize(stream, where_));
  size_t grown = std::max({bytes, initialBytes_, pair.bytes * 2, size_t{4096}});
  auto in = hostAlloc(grown, where_);
  FERRY_TRY(in);
  pinned_.push_back(*in);
  auto out = hostAlloc(grown, where_);
  FERRY_TRY(out);
  pinned_.push_back(*out);
  pair = Pair{static_cast<uint8_t*>(*in), static_cast<uint8_t*>(*out), grown};
  return pair;
}

void StagingPool::keep(std::shared_ptr<void> record) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.push_back(std::move(record));
}

}  // namespace ferry::gpu
