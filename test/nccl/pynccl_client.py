#!/usr/bin/python3
"""A ctypes client of libnccl.so.2 in the manner of vLLM's pynccl: it binds by name, with explicit
argument and result types, every function that wrapper binds, and runs collectives on numpy host
buffers. One rank of a job started by ferryrun (FERRY_RANK, FERRY_WORLD_SIZE, FERRY_ADDR): every
rank gets the same unique id from the environment, as with NCCL_COMM_ID.

Usage: ferryrun -n N /usr/bin/python3 pynccl_client.py LIBNCCL

Inputs are filled from the rank and the index, so each expected value has a closed form, exact in
float32 for the sizes used. Exit status 0 when every check passed; 77 (skip) without numpy.
"""
import ctypes
import os
import sys

try:
    import numpy as np
except ImportError:
    print("numpy not found: skipped")
    sys.exit(77)

ncclResult_t = ctypes.c_int
ncclComm_t = ctypes.c_void_p
ncclWindow_t = ctypes.c_void_p
cudaStream_t = ctypes.c_void_p
buffer_type = ctypes.c_void_p
ncclDataType_t = ctypes.c_int
ncclRedOp_t = ctypes.c_int
NCCL_FLOAT32, NCCL_INT32 = 7, 2
NCCL_SUM, NCCL_MAX = 0, 2


class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


# (name, result type, argument types): the functions vLLM's pynccl binds, NCCL 2.28's signatures.
FUNCTIONS = [
    ("ncclGetErrorString", ctypes.c_char_p, [ncclResult_t]),
    ("ncclGetVersion", ncclResult_t, [ctypes.POINTER(ctypes.c_int)]),
    ("ncclGetUniqueId", ncclResult_t, [ctypes.POINTER(ncclUniqueId)]),
    ("ncclCommInitRank", ncclResult_t, [ctypes.POINTER(ncclComm_t), ctypes.c_int, ncclUniqueId, ctypes.c_int]),
    ("ncclAllReduce", ncclResult_t,
     [buffer_type, buffer_type, ctypes.c_size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t]),
    ("ncclReduce", ncclResult_t,
     [buffer_type, buffer_type, ctypes.c_size_t, ncclDataType_t, ncclRedOp_t, ctypes.c_int, ncclComm_t,
      cudaStream_t]),
    ("ncclAllGather", ncclResult_t,
     [buffer_type, buffer_type, ctypes.c_size_t, ncclDataType_t, ncclComm_t, cudaStream_t]),
    ("ncclReduceScatter", ncclResult_t,
     [buffer_type, buffer_type, ctypes.c_size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t]),
    ("ncclSend", ncclResult_t,
     [buffer_type, ctypes.c_size_t, ncclDataType_t, ctypes.c_int, ncclComm_t, cudaStream_t]),
    ("ncclRecv", ncclResult_t,
     [buffer_type, ctypes.c_size_t, ncclDataType_t, ctypes.c_int, ncclComm_t, cudaStream_t]),
    ("ncclBroadcast", ncclResult_t,
     [buffer_type, buffer_type, ctypes.c_size_t, ncclDataType_t, ctypes.c_int, ncclComm_t, cudaStream_t]),
    ("ncclCommDestroy", ncclResult_t, [ncclComm_t]),
    ("ncclGroupStart", ncclResult_t, []),
    ("ncclGroupEnd", ncclResult_t, []),
    ("ncclCommWindowRegister", ncclResult_t,
     [ncclComm_t, buffer_type, ctypes.c_size_t, ctypes.POINTER(ncclWindow_t), ctypes.c_int]),
    ("ncclCommWindowDeregister", ncclResult_t, [ncclComm_t, ncclWindow_t]),
]


class Library:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.fn = {}
        for name, restype, argtypes in FUNCTIONS:
            f = getattr(self.lib, name)  # AttributeError: the library lacks it (what vLLM trips on)
            f.restype = restype
            f.argtypes = argtypes
            self.fn[name] = f

    def __call__(self, name, *args):
        r = self.fn[name](*args)
        if r != 0:
            text = self.fn["ncclGetErrorString"](r).decode()
            raise RuntimeError("%s returned %d: %s" % (name, r, text))


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def main():
    lib = Library(sys.argv[1])
    rank = int(os.environ["FERRY_RANK"])
    n = int(os.environ["FERRY_WORLD_SIZE"])
    version = ctypes.c_int()
    lib("ncclGetVersion", ctypes.byref(version))
    uid = ncclUniqueId()
    lib("ncclGetUniqueId", ctypes.byref(uid))
    comm = ncclComm_t()
    lib("ncclCommInitRank", ctypes.byref(comm), n, uid, rank)
    failures = []

    def expect(name, got, want):
        if not np.array_equal(got, want):
            bad = np.flatnonzero(got != want)[:3]
            failures.append("%s: rank %d differs at %s: %s vs %s" % (name, rank, bad, got[bad], want[bad]))

    count = 4099  # not a multiple of anything ferry chunks by
    idx = np.arange(count, dtype=np.float32)
    # all-reduce (sum and max), in a registered window and out of place
    buf = (idx + rank).astype(np.float32)
    win = ncclWindow_t()
    lib("ncclCommWindowRegister", comm, ptr(buf), buf.nbytes, ctypes.byref(win), 1)
    lib("ncclAllReduce", ptr(buf), ptr(buf), count, NCCL_FLOAT32, NCCL_SUM, comm, None)
    expect("all_reduce sum", buf, n * idx + n * (n - 1) / 2)
    lib("ncclCommWindowDeregister", comm, win)
    out = np.zeros(count, np.int32)
    send = (np.arange(count, dtype=np.int32) * (rank + 1))
    lib("ncclAllReduce", ptr(send), ptr(out), count, NCCL_INT32, NCCL_MAX, comm, None)
    expect("all_reduce max", out, np.arange(count, dtype=np.int32) * n)
    # reduce to the last rank
    out[:] = -1
    lib("ncclReduce", ptr(send), ptr(out), count, NCCL_INT32, NCCL_SUM, n - 1, comm, None)
    if rank == n - 1:
        expect("reduce", out, np.arange(count, dtype=np.int32) * (n * (n + 1) // 2))
    # all-gather: block r is rank r's input
    mine = (idx + 10000 * rank).astype(np.float32)
    gathered = np.zeros(n * count, np.float32)
    lib("ncclAllGather", ptr(mine), ptr(gathered), count, NCCL_FLOAT32, comm, None)
    expect("all_gather", gathered, np.concatenate([idx + 10000 * r for r in range(n)]).astype(np.float32))
    # reduce-scatter: element j of every input is rank + j; this rank keeps block `rank`
    full = (np.arange(n * count, dtype=np.float32) + rank)
    part = np.zeros(count, np.float32)
    lib("ncclReduceScatter", ptr(full), ptr(part), count, NCCL_FLOAT32, NCCL_SUM, comm, None)
    j = np.arange(rank * count, (rank + 1) * count, dtype=np.float32)
    expect("reduce_scatter", part, n * j + n * (n - 1) / 2)
    # broadcast from rank 1
    b = (idx * (rank + 1)).astype(np.float32)
    recv = np.zeros(count, np.float32)
    lib("ncclBroadcast", ptr(b), ptr(recv), count, NCCL_FLOAT32, 1, comm, None)
    expect("broadcast", recv, idx * 2)
    # send/recv around a ring, both posted in one group (vLLM's pattern)
    right, left = (rank + 1) % n, (rank - 1) % n
    msg = (idx + 100 * rank).astype(np.float32)
    got = np.zeros(count, np.float32)
    lib("ncclGroupStart")
    lib("ncclSend", ptr(msg), count, NCCL_FLOAT32, right, comm, None)
    lib("ncclRecv", ptr(got), count, NCCL_FLOAT32, left, comm, None)
    lib("ncclGroupEnd")
    expect("send/recv", got, idx + 100 * left)
    lib("ncclCommDestroy", comm)

    for f in failures:
        print("FAIL " + f)
    print("[rank %d of %d] NCCL %d: %d functions bound, %s" % (
        rank, n, version.value, len(FUNCTIONS), "all passed" if not failures else "%d failed" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
