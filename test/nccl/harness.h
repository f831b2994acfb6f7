/*
 * Starting the ranks of a C API test: forked from this single-threaded parent, or started by a
 * launcher (ferryrun) that sets FERRY_RANK / FERRY_WORLD_SIZE / FERRY_ADDR.
 */
#ifndef FERRY_TEST_NCCL_HARNESS_H
#define FERRY_TEST_NCCL_HARNESS_H

#include "ferry/nccl.h"

/* A rank's body: 0 on success. `id` is the world communicator's id. `forked` is 1 when the ranks
 * were forked by run_forked (each may then make new ids), 0 under a launcher (NCCL_COMM_ID-style:
 * every rank got the same id from the environment, and no other id can be made). */
typedef int (*rank_body)(int rank, int nranks, const ncclUniqueId* id, int forked);

/* Fork `nranks` children. Child 0 makes the id with ncclGetUniqueId and the parent, which never
 * calls the library, relays it to the others. Returns 0 when every child exited 0; kills them all
 * after `timeout_s` seconds. */
int run_forked(int nranks, rank_body body, int timeout_s);

/* Run `body` as the rank FERRY_RANK of FERRY_WORLD_SIZE; every rank calls ncclGetUniqueId, which
 * describes FERRY_ADDR. */
int run_from_env(rank_body body);

#endif
