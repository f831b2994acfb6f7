#include "python/c10d/shared_allocator.hpp"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/utils/pybind.h>

#include <sys/resource.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/memory.hpp"

namespace ferry::torch_c10d {
namespace py = pybind11;
namespace {

// Tensors in shared memory now. Each holds a file descriptor (its memfd) while it lives.
std::atomic<size_t> liveShared{0};

// Every tensor's memory from hostAlloc goes back through here; a deleter cannot fail, and
// hostFree refuses only pointers hostAlloc did not return.
void freeShared(void* ptr) {
  if (hostFree(ptr).isOk()) liveShared.fetch_sub(1, std::memory_order_relaxed);
}

// How many tensors may be in shared memory at once: half the soft limit on open files, so that
// the rest of the program (sockets, files, data loaders) still gets descriptors when a model has
// many large tensors.
size_t liveLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return size_t{1} << 16;
  return static_cast<size_t>(limit.rlim_cur / 2);
}

class SharedCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) const override {
    c10::Allocator* previous = previous_.load(std::memory_order_acquire);
    if (bytes > 0 && bytes >= threshold_.load(std::memory_order_relaxed) && reserveLive()) {
      auto ptr = hostAlloc(bytes);
      if (ptr.isOk()) return {ptr.value(), ptr.value(), &freeShared, c10::Device(c10::DeviceType::CPU)};
      // Out of memfds or mappings: the tensor is still made, in ordinary memory.
      liveShared.fetch_sub(1, std::memory_order_relaxed);
    }
    return previous->allocate(bytes);
  }

  // Count one more live tensor in shared memory, unless that would pass the limit.
  bool reserveLive() const {
    size_t limit = liveLimit_.load(std::memory_order_relaxed);
    size_t live = liveShared.load(std::memory_order_relaxed);
    while (live < limit) {
      if (liveShared.compare_exchange_weak(live, live + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }

  // The pointers come with two kinds of deleters (hostFree, the previous allocator's), so there is
  // no one raw deleter: raw_allocate on this allocator is refused by torch's own check.
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  // Called with the install lock held.
  void setPrevious(c10::Allocator* previous) { previous_.store(previous, std::memory_order_release); }
  c10::Allocator* previous() const { return previous_.load(std::memory_order_acquire); }
  void setThreshold(size_t bytes) { threshold_.store(bytes, std::memory_order_relaxed); }
  void setLiveLimit(size_t count) { liveLimit_.store(count, std::memory_order_relaxed); }
  size_t threshold() const { return threshold_.load(std::memory_order_relaxed); }

 private:
  // Kept after uninstalling: a thread that fetched this allocator just before may still call it.
  std::atomic<c10::Allocator*> previous_{nullptr};
  std::atomic<size_t> threshold_{kSharedAllocatorThreshold};
  std::atomic<size_t> liveLimit_{0};
};

// torch keeps a raw pointer to its allocators for the life of the process: this one is never freed.
SharedCpuAllocator& sharedAllocator() {
  static auto* allocator = new SharedCpuAllocator();
  return *allocator;
}

std::mutex& installMutex() {
  static std::mutex mu;
  return mu;
}

// torch takes an allocator only at a priority at least the current one's; 0 is what torch's
// default CPU allocator has, so an allocator someone installed above it is left alone.
constexpr uint8_t kPriority = 0;

}  // namespace

void installSharedAllocator(size_t threshold) {
  std::lock_guard<std::mutex> lock(installMutex());
  SharedCpuAllocator& shared = sharedAllocator();
  shared.setThreshold(threshold);
  shared.setLiveLimit(liveLimit());
  c10::Allocator* current = c10::GetCPUAllocator();
  if (current == &shared) return;
  shared.setPrevious(current);
  c10::SetCPUAllocator(&shared, kPriority);
  if (c10::GetCPUAllocator() != &shared) {
    throw std::runtime_error(
        "ferry.torch.shared_allocator: torch kept its CPU allocator (one was installed with a priority above 0); "
        "expected torch to take ferry's");
  }
}

void uninstallSharedAllocator() {
  std::lock_guard<std::mutex> lock(installMutex());
  SharedCpuAllocator& shared = sharedAllocator();
  if (c10::GetCPUAllocator() != &shared) return;
  c10::SetCPUAllocator(shared.previous(), kPriority);
}

bool sharedAllocatorInstalled() { return c10::GetCPUAllocator() == &sharedAllocator(); }

size_t sharedAllocatorThreshold() { return sharedAllocator().threshold(); }

void registerSharedAllocator(py::module_& m) {
  m.def("shared_allocator_install", &installSharedAllocator, py::arg("threshold"),
        "Make ferry's shared-memory allocator torch's CPU allocator (tensors of >= threshold bytes).");
  m.def("shared_allocator_uninstall", &uninstallSharedAllocator,
        "Reinstall the CPU allocator torch had before; tensors keep their memory and deleters.");
  m.def("shared_allocator_installed", &sharedAllocatorInstalled, "Whether ferry's allocator is installed.");
  m.def("shared_allocator_threshold", &sharedAllocatorThreshold, "Its threshold in bytes.");
  m.attr("SHARED_ALLOCATOR_THRESHOLD") = kSharedAllocatorThreshold;
  m.def(
      "shared_bytes",
      [](int64_t bytes) {
        if (bytes < 0) throw py::value_error("ferry.torch.empty: " + std::to_string(bytes) + " bytes; expected >= 0");
        auto ptr = hostAlloc(static_cast<size_t>(bytes));
        if (!ptr.isOk()) throw std::runtime_error("ferry.torch.empty: " + ptr.status().message());
        return at::from_blob(
            ptr.value(), {bytes}, [](void* p) { (void)hostFree(p); }, at::TensorOptions().dtype(at::kByte));
      },
      py::arg("bytes"), "A uint8 CPU tensor of `bytes` in hostAlloc memory, whatever its size (freed with hostFree).");
}

}  // namespace ferry::torch_c10d
