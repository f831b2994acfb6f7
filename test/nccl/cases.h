/*
 * The test cases of the C API test. Each runs on every rank of `comm` (n ranks), returns 0 on
 * success and prints what differed otherwise. Inputs are filled from the rank and the index so
 * every expected value has a closed form.
 */
#ifndef FERRY_TEST_NCCL_CASES_H
#define FERRY_TEST_NCCL_CASES_H

#include "ferry/nccl.h"

/* cases_collectives.c */
int test_allreduce_all_types(ncclComm_t comm, int rank, int n);
int test_allreduce_ops(ncclComm_t comm, int rank, int n);
int test_rooted(ncclComm_t comm, int rank, int n);
int test_gather_scatter(ncclComm_t comm, int rank, int n);
int test_premulsum(ncclComm_t comm, int rank, int n);

/* cases_groups.c */
int test_send_recv(ncclComm_t comm, int rank, int n);
int test_group_any_order(ncclComm_t comm, int rank, int n);
int test_group_nesting_and_errors(ncclComm_t comm, int rank, int n);

/* cases_errors.c */
int test_bad_arguments(ncclComm_t comm, int rank, int n, const ncclUniqueId* id);

/* cases_comms.c */
int test_queries_and_memory(ncclComm_t comm, int rank, int n);
int test_split(ncclComm_t comm, int rank, int n);
int test_nonblocking_init(ncclComm_t comm, int rank, int n);
int test_init_all_and_group_init(int n);
int test_abort_blocked(ncclComm_t comm, int rank, int n);
int test_shrink(ncclComm_t comm, int rank, int n);
int test_abort_during_init(void);

#endif
