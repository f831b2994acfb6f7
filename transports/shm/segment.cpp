// Shared segments as memfds, opened by peers through /proc (segment.hpp).
#include "transports/shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ferry::transport::shm {
namespace {

std::string fdPath(pid_t pid, int64_t fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%lld", static_cast<int>(pid), static_cast<long long>(fd));
  return path;
}

}  // namespace

Result<int> createSegment(const std::string& name, size_t bytes) {
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return makeError(ErrorCode::kSystemError, "cannot create shared segment %s: memfd_create failed: %s", name.c_str(),
                     std::strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "cannot size shared segment %s to %zu bytes: %s", name.c_str(), bytes,
                     std::strerror(e));
  }
  return fd;
}

int openPeerSegment(pid_t pid, int64_t fd, const std::string& name, int flags) {
  if (fd < 0) {
    errno = EBADF;
    return -1;
  }
  const std::string path = fdPath(pid, fd);
  char target[256];
  ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return -1;
  target[n] = '\0';
  // A memfd reads "/memfd:NAME (deleted)".
  const std::string want = "/memfd:" + name;
  if (std::strncmp(target, want.c_str(), want.size()) != 0 ||
      (target[want.size()] != ' ' && target[want.size()] != '\0')) {
    errno = ESTALE;
    return -1;
  }
  return open(path.c_str(), flags | O_CLOEXEC);
}

Result<void*> mapPeerSegment(pid_t pid, int64_t fd, const std::string& name, size_t bytes) {
  int f = openPeerSegment(pid, fd, name, O_RDWR);
  if (f < 0) {
    const int e = errno;
    const char* why = e == ESTALE   ? "the descriptor is another file now (the owner closed it)"
                      : e == ENOENT ? "no such descriptor (the owner exited or closed it)"
                      : e == EACCES || e == EPERM
                          ? "permission denied (ranks must be able to open each other's /proc/PID/fd: same user, "
                            "dumpable processes)"
                          : std::strerror(e);
    return makeError(ErrorCode::kSystemError, "cannot open %s, pid %d's shared segment %s: %s", fdPath(pid, fd).c_str(),
                     static_cast<int>(pid), name.c_str(), why);
  }
  struct stat st {};
  if (fstat(f, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    ::close(f);
    return makeError(ErrorCode::kInternalError, "pid %d's shared segment %s holds %lld bytes, expected %zu",
                     static_cast<int>(pid), name.c_str(), static_cast<long long>(st.st_size), bytes);
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  const int e = errno;
  ::close(f);
  if (m == MAP_FAILED) {
    return makeError(ErrorCode::kSystemError, "cannot map pid %d's shared segment %s (%zu bytes): %s",
                     static_cast<int>(pid), name.c_str(), bytes, std::strerror(e));
  }
  return m;
}

}  // namespace ferry::transport::shm
