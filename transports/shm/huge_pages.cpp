#include "transports/shm/huge_pages.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/log.hpp"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older headers lack the name
#endif

namespace ferry::transport::shm {

HugeBacking::HugeBacking(size_t regionBytes, Collapse collapse, size_t maxRegions)
    : regionBytes_(regionBytes), collapse_(std::move(collapse)), maxRegions_(std::max<size_t>(maxRegions, 1)) {}

void HugeBacking::offer(const void* addr, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (bytes < regionBytes_ || a > UINTPTR_MAX - bytes) return;
  const uintptr_t mask = ~static_cast<uintptr_t>(regionBytes_ - 1);
  const uintptr_t first = (a + regionBytes_ - 1) & mask, end = (a + bytes) & mask;
  if (first >= end) return;
  std::vector<std::pair<uintptr_t, size_t>> runs;  // due regions, contiguous runs of them
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t span = (end - first) / regionBytes_;
    if (regions_.size() + span > maxRegions_) {
      size_t known = 0;
      for (uintptr_t r = first; r < end; r += regionBytes_) known += regions_.count(r);
      if (regions_.size() + span - known > maxRegions_) regions_.clear();
    }
    for (uintptr_t r = first; r < end; r += regionBytes_) {
      auto [it, fresh] = regions_.try_emplace(r);
      Region& g = it->second;
      bool due = false;
      if (!fresh && g.state == State::kSeen) {
        due = true;
      } else if (!fresh && g.state != State::kPending) {
        if (g.wait > 0) --g.wait;
        due = g.wait == 0;
      }
      if (!due) continue;
      g.state = State::kPending;
      if (!runs.empty() && runs.back().first + runs.back().second * regionBytes_ == r) {
        ++runs.back().second;
      } else {
        runs.emplace_back(r, 1);
      }
    }
    counts_.calls += runs.size();
  }
  for (const auto& [at, count] : runs) {
    const auto start = std::chrono::steady_clock::now();
    const int err = collapse_(reinterpret_cast<void*>(at), count * regionBytes_);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (err == 0) {
      FERRY_TRACE(log::kTransport, "%zu KiB at %p that peers read moved onto huge pages in %.2f ms",
                  count * regionBytes_ >> 10, reinterpret_cast<void*>(at), ms);
    } else if (!toldRefusal_.exchange(true)) {
      // Once per process at INFO: why reads from such buffers stay at the small pages' rate.
      FERRY_INFO(log::kTransport,
                 "the kernel would not move %zu KiB at %p that peers read onto huge pages (%s, %.2f ms); "
                 "such buffers are retried rarely and read at the small pages' rate",
                 count * regionBytes_ >> 10, reinterpret_cast<void*>(at), std::strerror(err), ms);
    } else {
      FERRY_TRACE(log::kTransport, "the kernel would not move %zu KiB at %p onto huge pages (%s, %.2f ms)",
                  count * regionBytes_ >> 10, reinterpret_cast<void*>(at), std::strerror(err), ms);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    settle(at, count, err);
  }
}

void HugeBacking::settle(uintptr_t first, size_t count, int err) {
  for (size_t i = 0; i < count; ++i) {
    auto it = regions_.find(first + i * regionBytes_);
    if (it == regions_.end()) continue;  // forgotten meanwhile (the table started afresh)
    Region& g = it->second;
    if (err == 0) {
      g = {State::kHuge, kRecheckOffers, 0};
      ++counts_.collapsed;
    } else {
      const uint32_t backoff = g.backoff > 0 ? std::min(2 * g.backoff, kMaxBackoff) : kFirstBackoff;
      g = {State::kRefused, backoff, backoff};
      ++counts_.refused;
    }
  }
}

HugeBacking::Counts HugeBacking::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

namespace {

std::string firstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

HugeBacking* processHugeBacking() {
  // Never destroyed: threads of the application may offer buffers while statics are torn down.
  static HugeBacking* const backing = []() -> HugeBacking* {
    const std::string enabled = firstLine("/sys/kernel/mm/transparent_hugepage/enabled");
    const size_t pmd =
        std::strtoull(firstLine("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").c_str(), nullptr, 10);
    if (enabled.empty() || enabled.find("[never]") != std::string::npos) return nullptr;
    if (pmd < 4096 || (pmd & (pmd - 1)) != 0) return nullptr;
    return new HugeBacking(pmd, [](void* addr, size_t bytes) {
      return madvise(addr, bytes, MADV_COLLAPSE) == 0 ? 0 : errno;
    });
  }();
  return backing;
}

}  // namespace ferry::transport::shm
