// Copies into memory the caller will not read back soon.
#pragma once

#include <cstddef>

namespace ferry::kernels {

/// memcpy(dst, src, bytes) with stores that bypass the caches (non-temporal) where the CPU has
/// them. An ordinary store first reads the destination's cache line from memory
/// (read-for-ownership); for an output much larger than the caches, which will be evicted before
/// anyone reads it, that read is a third of the copy's memory traffic, and streaming stores save
/// it. glibc's memcpy does the same for single copies above a threshold near the cache size, but
/// the pipelined collectives copy in chunks of a few hundred KiB, each below it.
///
/// Ends with a store fence: the copied bytes are visible to other cores before any later store,
/// so a flag posted after it publishes them (streaming stores are weakly ordered otherwise).
/// dst and src must not overlap. Copies of under 4 KiB, and CPUs without streaming stores, use
/// memcpy.
void copyStreaming(void* dst, const void* src, size_t bytes);

}  // namespace ferry::kernels
