// Shared segments that vanish with the last process holding them: what the shm transport and the
// shm arena map across the ranks of one host.
//
// A segment is a memfd. It has no name in any file system, so it exists exactly while some process
// holds a descriptor or a mapping of it, and the kernel frees it when the last holder goes, however
// that process ends (SIGKILL included). No process of a job (rank or launcher) can die at an
// instant that leaves a segment behind: nothing is ever put in /dev/shm.
//
// The owner keeps its descriptor open until every peer has mapped the segment (the runtime's init
// barrier: Transport/Arena::sealed()). A peer opens /proc/<owner pid>/fd/<fd>, after checking that
// the descriptor is the memfd of the expected name (the number may have been reused), and maps it.
// Opening another process's /proc/<pid>/fd needs the access reading its memory would
// (PTRACE_MODE_READ: the same user and a dumpable process; Yama's ptrace_scope does not restrict
// it); ferry::hostAlloc's registry (shared_memory.hpp) is opened the same way.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/status.hpp"

namespace ferry::transport::shm {

/// A new close-on-exec memfd called `name`, sized to `bytes` zero bytes. Errors name the segment,
/// the size and the system call that failed.
Result<int> createSegment(const std::string& name, size_t bytes);

/// Process `pid`'s descriptor `fd` opened anew with `flags` (O_RDONLY or O_RDWR; close-on-exec is
/// added) if it is the memfd called `name`; else -1 with errno set (ESTALE: another file).
int openPeerSegment(pid_t pid, int64_t fd, const std::string& name, int flags);

/// Maps `bytes` of process `pid`'s segment `name` (its descriptor `fd`) shared and read-write.
/// Errors say which step failed and why (the peer gone, no access to its /proc/<pid>/fd, a
/// segment smaller than `bytes`).
Result<void*> mapPeerSegment(pid_t pid, int64_t fd, const std::string& name, size_t bytes);

}  // namespace ferry::transport::shm
