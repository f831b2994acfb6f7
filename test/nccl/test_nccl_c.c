/*
 * The NCCL-compatible C API, tested from C11 through ferry/nccl.h and libnccl.so.2 alone.
 *
 *   test_nccl_c N        fork N ranks (1..16) and run every case on each
 *   test_nccl_c --env    be one rank of a job started by ferryrun (ids from FERRY_ADDR, as
 *                        NCCL_COMM_ID): every case that needs no second unique id
 *
 * Exit status 0 when every rank passed every case.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "check.h"
#include "harness.h"

static int rank_main(int rank, int n, const ncclUniqueId* id, int forked) {
  ncclComm_t comm = NULL;
  CHECK_NCCL(ncclCommInitRank(&comm, n, *id, rank));
  RUN(test_queries_and_memory, comm, rank, n);
  RUN(test_bad_arguments, comm, rank, n, id);
  RUN(test_allreduce_all_types, comm, rank, n);
  RUN(test_allreduce_ops, comm, rank, n);
  RUN(test_rooted, comm, rank, n);
  RUN(test_gather_scatter, comm, rank, n);
  RUN(test_premulsum, comm, rank, n);
  RUN(test_send_recv, comm, rank, n);
  RUN(test_group_any_order, comm, rank, n);
  RUN(test_group_nesting_and_errors, comm, rank, n);
  RUN(test_split, comm, rank, n);
  if (forked) {
    RUN(test_nonblocking_init, comm, rank, n);
    if (rank == 0) RUN(test_init_all_and_group_init, n);
    RUN(test_abort_during_init);
  }
  if (n >= 2) RUN(test_abort_blocked, comm, rank, n);
  if (n >= 2) RUN(test_shrink, comm, rank, n);
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  printf("[rank %d] all cases passed\n", rank);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "--env") == 0) return run_from_env(rank_main);
  int n = argc == 2 ? atoi(argv[1]) : 0;
  if (n < 1 || n > 16) {
    fprintf(stderr, "usage: %s N (1..16) | --env\n", argv[0]);
    return 2;
  }
  return run_forked(n, rank_main, 100);
}
