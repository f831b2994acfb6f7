// ferry.torch.shared_allocator(): torch's CPU allocator replaced by one that places large tensors
// in shared memory from ferry::hostAlloc, which the other ranks of this host map, so collectives on
// them (DDP's gradient buckets, above all) read peers' tensors in place.
//
// Allocations of at least the threshold bytes come from hostAlloc and are freed with hostFree by
// the tensor's own deleter; smaller ones, and any hostAlloc refuses, come from the allocator that
// was installed before (never a failure that the previous allocator would not have had). Turning
// it off reinstalls the previous allocator; tensors allocated meanwhile keep their deleters.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace ferry::torch_c10d {

/// The threshold when none is given: small tensors gain nothing from shared memory (their calls
/// take the copy paths either way) and would each cost a memfd and a mapping.
constexpr size_t kSharedAllocatorThreshold = size_t{64} << 10;

/// Make the shared allocator torch's CPU allocator with `threshold` bytes (an update when it is
/// already installed). Throws when torch keeps another allocator (one set with a higher priority).
void installSharedAllocator(size_t threshold);
/// Reinstall the allocator that was torch's before installSharedAllocator; nothing when off.
void uninstallSharedAllocator();
/// Whether the shared allocator is torch's CPU allocator now.
bool sharedAllocatorInstalled();
/// The threshold in bytes.
size_t sharedAllocatorThreshold();

/// Define the functions above in `m` (as _c10d.shared_allocator_*) and shared_empty.
void registerSharedAllocator(pybind11::module_& m);

}  // namespace ferry::torch_c10d
