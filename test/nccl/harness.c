/*
 * Starting the ranks of a C API test (harness.h). The parent stays single-threaded and never calls
 * the library, so every child starts clean; the id travels child 0 -> parent -> child i by pipes.
 */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

int g_rank = -1;

enum { kMaxRanks = 16 };

static int write_all(int fd, const void* buf, size_t n) {
  const char* p = (const char*)buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void* buf, size_t n) {
  char* p = (char*)buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* What child `rank` does: get the id (make it, or read it from the parent), then run the body. */
static int child(int rank, int nranks, int to_parent, int from_parent, rank_body body) {
  ncclUniqueId id;
  g_rank = rank;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK(write_all(to_parent, &id, sizeof id) == 0, "cannot send the id to the parent");
  } else {
    CHECK(read_all(from_parent, &id, sizeof id) == 0, "cannot read the id from the parent");
  }
  return body(rank, nranks, &id, 1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int run_forked(int nranks, rank_body body, int timeout_s) {
  pid_t pids[kMaxRanks];
  int down[kMaxRanks][2]; /* parent -> child i */
  int up[2];              /* child 0 -> parent */
  if (nranks < 1 || nranks > kMaxRanks || pipe(up) != 0) return 1;
  for (int r = 0; r < nranks; ++r) {
    if (pipe(down[r]) != 0) return 1;
  }
  fflush(NULL);
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) return 1;
    if (pids[r] == 0) {
      int rc = child(r, nranks, up[1], down[r][0], body);
      fflush(NULL);
      _exit(rc == 0 ? 0 : 1);
    }
  }
  close(up[1]);
  ncclUniqueId id;
  int failed = 0;
  if (read_all(up[0], &id, sizeof id) != 0) {
    fprintf(stderr, "harness: rank 0 did not send the unique id\n");
    failed = 1;
  } else {
    for (int r = 1; r < nranks; ++r) failed |= write_all(down[r][1], &id, sizeof id) != 0;
  }
  for (int r = 0; r < nranks; ++r) close(down[r][1]);

  int alive = nranks;
  double deadline = now_s() + timeout_s;
  while (alive > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      --alive;
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] != p) continue;
        pids[r] = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          fprintf(stderr, "harness: rank %d %s %d\n", r, WIFEXITED(status) ? "exited with" : "died of signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
          failed = 1;
        }
      }
      continue;
    }
    if (now_s() > deadline) {
      fprintf(stderr, "harness: timeout after %d s; killing the ranks still running\n", timeout_s);
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] > 0) kill(pids[r], SIGKILL);
      }
      while (waitpid(-1, NULL, 0) > 0) {
      }
      return 1;
    }
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return failed;
}

int run_from_env(rank_body body) {
  const char* rank = getenv("FERRY_RANK");
  const char* size = getenv("FERRY_WORLD_SIZE");
  if (rank == NULL || size == NULL) {
    fprintf(stderr, "--env needs FERRY_RANK and FERRY_WORLD_SIZE (run under ferryrun)\n");
    return 1;
  }
  g_rank = atoi(rank);
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  return body(g_rank, atoi(size), &id, 0);
}
