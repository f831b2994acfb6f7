"""ferry's Python bindings in one process: a communicator of size 1 (UniqueId.create + Comm.create),
two ranks on two threads (the GIL is released while ferry blocks), argument checks and the errors
they raise, the DLPack capsule protocol, Work, and the life cycle of a Comm.

    PYTHONPATH=build/python python3 test_unit.py
"""
import ctypes
import gc
import os
import pickle
import subprocess
import sys
import threading

from harness import Checks, mapping_of, skip

try:
    import numpy as np
except ImportError as e:
    skip(f"numpy cannot be imported ({e}): apt-get install python3-numpy")

import ferry  # noqa: E402

c = Checks("bindings unit")
DLTENSOR = b"dltensor"  # capsule names must outlive the capsules that point at them


def capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode()


class Producer:
    """A DLPack producer around a numpy array (numpy's deleter drops a reference to the array), which
    keeps the capsules it gives out so the test can see what the consumer did with them."""

    def __init__(self, array, device=(1, 0), capsule_name_override=None):
        self.array = array
        self.device = device
        self.capsules = []
        self.override = capsule_name_override

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        if self.device[0] != 1:
            raise AssertionError("a device tensor must be refused before __dlpack__ is called")
        cap = self.array.__dlpack__()
        if self.override is not None:
            set_name = ctypes.pythonapi.PyCapsule_SetName
            set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
            set_name(cap, self.override)
        self.capsules.append(cap)
        return cap

    def release(self):
        """Give renamed capsules their name back so that numpy's destructor frees them, then drop them."""
        if self.override is not None:
            set_name = ctypes.pythonapi.PyCapsule_SetName
            set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
            for cap in self.capsules:
                set_name(cap, DLTENSOR)
        self.capsules.clear()


def check_unique_id():
    uid = ferry.UniqueId.create()
    h = uid.hex()
    c.true(len(h) == 256 and ferry.UniqueId.from_hex(h) == uid, "UniqueId.from_hex(hex()) differs")
    c.true(pickle.loads(pickle.dumps(uid)) == uid, "a pickled UniqueId differs")
    c.true(ferry.UniqueId.from_bytes(bytes(uid)) == uid, "UniqueId.from_bytes(bytes(uid)) differs")
    e = c.raises(ferry.InvalidArgumentError, lambda: ferry.UniqueId.from_hex("xyz"), what="UniqueId.from_hex('xyz')")
    c.true(isinstance(e, ValueError) and e.code == ferry.ErrorCode.INVALID_ARGUMENT, "from_hex: wrong error kind")
    c.raises(ferry.InvalidArgumentError, lambda: ferry.UniqueId.from_bytes(b"12"), "'data'", "expected 128",
             what="UniqueId.from_bytes(2 bytes)")


def check_size_one(comm):
    """Every collective at size 1 is a copy (or nothing), on numpy and torch."""
    c.true(comm.rank == 0 and comm.size == 1 and isinstance(comm.id, int) and comm.device == -1,
           "Comm.create(uid, 0, 1): rank, size, id or device")
    c.true(comm.error() is None and "rank 0 of 1" in repr(comm), "a fresh Comm has an error or a bad repr")
    a = np.arange(5, dtype=np.float32)
    r = np.zeros(5, np.float32)
    c.true(comm.all_reduce(a, r, ferry.RedOp.MAX) is r, "all_reduce did not return recv")
    c.equal(r, np.arange(5), "all_reduce with RedOp.MAX at size 1")
    c.equal(comm.reduce_scatter(np.arange(4.0)), np.arange(4.0), "reduce_scatter in place at size 1")
    g = np.zeros(3, np.int64)
    comm.all_gather(np.arange(3), g)
    c.equal(g, np.arange(3), "all_gather at size 1")
    c.equal(comm.all_to_all(np.arange(6, dtype=np.uint8)), np.arange(6), "all_to_all at size 1")
    c.equal(comm.broadcast(np.arange(2.0), 0), np.arange(2.0), "broadcast at size 1")
    c.equal(comm.reduce(np.arange(4), op="min"), np.arange(4), "reduce at size 1")
    ro = np.arange(3.0)
    ro.flags.writeable = False
    out = np.zeros(3)
    comm.all_reduce(ro, out)  # a read-only input is fine
    c.equal(out, np.arange(3.0), "all_reduce from a read-only send")
    b = bytearray(b"\x01\x02\x03\x04")
    comm.all_reduce(b)  # any writable buffer-protocol object
    c.true(b == bytearray(b"\x01\x02\x03\x04"), "all_reduce on a bytearray")
    r = np.zeros(4, np.float64)
    comm.send_recv(sends=[(np.arange(4.0), 0)], recvs=[(r, 0)])  # to itself: a copy inside a batch
    c.equal(r, np.arange(4.0), "send_recv to this rank")
    comm.barrier()
    # async: Work.wait() returns the output; a Work dropped unwaited keeps its arrays until done.
    x = np.ones(1000, np.float64)
    w = comm.all_reduce(x, async_op=True)
    c.true(w.wait() is x and w.is_completed() and "completed" in repr(w), "Work.wait / is_completed")
    comm.all_gather(np.ones(1000), np.zeros(1000), async_op=True)
    comm.barrier()


def check_errors(comm):
    f32, f64 = np.float32, np.float64
    used = Producer(np.zeros(3), capsule_name_override=b"used_dltensor")
    z = lambda n, t=f64: np.zeros(n, t)  # noqa: E731
    cases = [
        ("non-contiguous send", lambda: comm.all_reduce(np.arange(8.0)[::2]), ferry.InvalidArgumentError,
         ["all_reduce on rank 0", "argument 'send'", "not C-contiguous"]),
        ("non-contiguous recv", lambda: comm.all_reduce(z(4), np.zeros((4, 2))[:, 0]), ferry.InvalidArgumentError,
         ["argument 'recv'", "contiguous"]),
        ("read-only recv", lambda: comm.all_reduce(z(3), readonly(z(3))), ferry.InvalidArgumentError,
         ["argument 'recv'", "read-only"]),
        ("read-only in place", lambda: comm.all_reduce(readonly(z(3))), ferry.InvalidArgumentError,
         ["argument 'send'", "read-only"]),
        ("read-only bytes as recv", lambda: comm.recv(b"abcd", 0), ferry.InvalidArgumentError,
         ["recv on rank 0", "argument 'buf'", "read-only"]),
        ("dtype mismatch", lambda: comm.all_reduce(z(3), z(3, f32)), ferry.InvalidArgumentError,
         ["argument 'recv'", "dtype float32", "expected float64", "'send'"]),
        ("all_reduce size", lambda: comm.all_reduce(z(3), z(4)), ferry.InvalidArgumentError,
         ["argument 'recv'", "has 4 elements", "expected 3"]),
        ("all_gather size", lambda: comm.all_gather(z(3), z(4)), ferry.InvalidArgumentError,
         ["all_gather on rank 0", "argument 'recv'", "has 4 elements", "expected 3", "size 1"]),
        ("all_gather recv None", lambda: comm.all_gather(z(3), None), ferry.InvalidArgumentError,
         ["argument 'recv'", "None"]),
        ("reduce_scatter size", lambda: comm.reduce_scatter(z(5), z(4)), ferry.InvalidArgumentError,
         ["argument 'send'", "has 5 elements", "expected 4"]),
        ("broadcast size", lambda: comm.broadcast(z(5), 0, recv=z(4)), ferry.InvalidArgumentError,
         ["argument 'recv'", "expected 5"]),
        ("reduce dtype", lambda: comm.reduce(z(5), z(5, np.int64)), ferry.InvalidArgumentError,
         ["argument 'recv'", "dtype int64", "expected float64"]),
        ("overlap", lambda: (lambda a: comm.all_reduce(a[0:4], a[2:6]))(z(8)), ferry.InvalidArgumentError,
         ["argument 'recv'", "overlaps 'send'"]),
        ("int16", lambda: comm.all_reduce(z(3, np.int16)), ferry.InvalidArgumentError,
         ["argument 'send'", "dtype int16", "bfloat16"]),
        ("bool", lambda: comm.all_reduce(z(3, np.bool_)), ferry.InvalidArgumentError, ["dtype bool"]),
        ("complex64", lambda: comm.all_reduce(z(3, np.complex64)), ferry.InvalidArgumentError,
         ["dtype complex64"]),
        ("big-endian", lambda: comm.all_reduce(z(3, ">i4")), ferry.InvalidArgumentError,
         ["big-endian int32"]),
        ("a list", lambda: comm.all_reduce([1.0, 2.0]), TypeError, ["argument 'send'", "list", "numpy array"]),
        ("None send", lambda: comm.all_reduce(None), ferry.InvalidArgumentError, ["argument 'send'", "None"]),
        ("op name", lambda: comm.all_reduce(z(3), op="mean"), ferry.InvalidArgumentError,
         ["argument 'op'", "'mean'", "'avg'", "'band'", "'bor'", "'bxor'"]),
        ("band on float64", lambda: comm.all_reduce(z(3), op="band"), ferry.InvalidArgumentError,
         ["rank 0", "op band needs an integer type (int8, uint8, int32, uint32, int64, uint64), got float64"]),
        ("bxor on float32", lambda: comm.reduce(z(3, f32), op=ferry.RedOp.BXOR), ferry.InvalidArgumentError,
         ["op bxor needs an integer type", "got float32"]),
        ("op type", lambda: comm.all_reduce(z(3), op=3), TypeError, ["argument 'op'", "int"]),
        ("root out of range", lambda: comm.broadcast(z(3), 2), ferry.InvalidArgumentError,
         ["rank 0", "root 2", "out of range"]),
        ("root INT_MIN", lambda: comm.broadcast(z(3), -2**31), ferry.InvalidArgumentError,
         ["rank 0", "root -2147483648", "out of range"]),
        ("reduce root INT_MIN", lambda: comm.reduce(z(3), root=-2**31), ferry.InvalidArgumentError,
         ["root -2147483648", "expected 0 <= root < 1"]),
        ("send to self", lambda: comm.send(z(3), 0), ferry.InvalidArgumentError, ["peer 0"]),
        ("send_recv item", lambda: comm.send_recv(sends=[z(3)]), TypeError, ["sends[0]", "(array, peer)"]),
        ("send_recv read-only", lambda: comm.send_recv(recvs=[(readonly(z(3)), 0)]), ferry.InvalidArgumentError,
         ["recvs[0]", "read-only"]),
        ("CUDA tensor", lambda: comm.all_reduce(Producer(z(3), device=(2, 1))), ferry.InvalidArgumentError,
         ["argument 'send'", "cuda:1", "CUDA"]),
        ("used capsule", lambda: comm.all_reduce(used), ferry.InvalidArgumentError, ["argument 'send'", "dltensor"]),
    ]
    for what, fn, exc, needles in cases:
        e = c.raises(exc, fn, *needles, what=what)
        if isinstance(e, ferry.Error):
            c.true(isinstance(e, ValueError) and e.code == ferry.ErrorCode.INVALID_ARGUMENT,
                   f"{what}: not a ValueError with code INVALID_ARGUMENT")
    used.release()


def readonly(a):
    a.flags.writeable = False
    return a


def check_dlpack_protocol(comm):
    """The consumer renames the capsule and calls the deleter exactly once, also when it refuses."""
    a = np.arange(6, dtype=np.float32)
    p = Producer(a)
    base = sys.getrefcount(a)
    for _ in range(50):
        comm.all_reduce(p)
    c.true(len(p.capsules) == 50 and all(capsule_name(cap) == "used_dltensor" for cap in p.capsules),
           "a consumed capsule was not renamed")
    # Each export holds a reference to the array until its deleter runs: ferry ran all 50, once each
    # (twice would have dropped references it does not own).
    c.true(sys.getrefcount(a) == base, f"DLPack deleter: the array's reference count went from {base} to "
           f"{sys.getrefcount(a)} after 50 calls")
    p.capsules.clear()
    c.true(sys.getrefcount(a) == base, f"DLPack deleter: {sys.getrefcount(a) - base} references leaked")
    bad = Producer(np.zeros(4, np.int16))
    base16 = sys.getrefcount(bad.array)
    c.raises(ferry.InvalidArgumentError, lambda: comm.all_reduce(bad), "dtype int16", what="DLPack int16")
    bad.capsules.clear()
    c.true(sys.getrefcount(bad.array) == base16, "DLPack: a refused tensor was not released")
    # A capsule nobody consumed is freed by its own destructor, not by ferry.
    unused = Producer(np.zeros(4, np.float32), capsule_name_override=b"something_else")
    base_u = sys.getrefcount(unused.array)
    c.raises(ferry.InvalidArgumentError, lambda: comm.all_reduce(unused), what="capsule of another name")
    unused.release()
    c.true(sys.getrefcount(unused.array) == base_u, "DLPack: a capsule of another name was consumed")


def check_torch(comm):
    try:
        import torch
    except ImportError as e:
        print(f"bindings unit: torch cannot be imported ({e}); its checks are skipped", flush=True)
        return
    t = torch.arange(6, dtype=torch.bfloat16)
    ptr = t.data_ptr()
    c.true(comm.all_reduce(t) is t and t.data_ptr() == ptr, "torch all_reduce did not return the tensor")
    c.equal(t.float().numpy(), np.arange(6), "torch bfloat16 all_reduce at size 1")
    m = torch.arange(12, dtype=torch.float16).reshape(3, 4)
    out = torch.zeros(12, dtype=torch.float16)
    comm.all_gather(m, out)  # any shape: collectives see the elements
    c.equal(out.float().numpy(), np.arange(12), "torch float16 all_gather of a 3x4 tensor")
    p = torch.ones(4, requires_grad=True)
    comm.all_reduce(p, op="sum")  # collectives are not differentiable: the tensor is used detached
    c.true(p.requires_grad and p.grad is None, "all_reduce changed requires_grad")
    cases = [
        ("torch non-contiguous", lambda: comm.all_reduce(torch.zeros(3, 4).t()), ["argument 'send'", "contiguous"]),
        ("torch dtype mismatch", lambda: comm.all_reduce(torch.zeros(3), torch.zeros(3, dtype=torch.bfloat16)),
         ["argument 'recv'", "dtype bfloat16", "expected float32"]),
        ("torch bool", lambda: comm.all_reduce(torch.zeros(3, dtype=torch.bool)), ["dtype bool"]),
        ("torch int16", lambda: comm.all_reduce(torch.zeros(3, dtype=torch.int16)), ["dtype int16"]),
        ("torch complex64", lambda: comm.all_reduce(torch.zeros(3, dtype=torch.complex64)), ["dtype complex64"]),
        ("torch conjugate", lambda: comm.all_reduce(torch.zeros(3, dtype=torch.complex64).conj()),
         ["argument 'send'", "could not be exported", "conjugate"]),
        ("torch size", lambda: comm.all_gather(torch.zeros(3), torch.zeros(2)), ["has 2 elements", "expected 3"]),
    ]
    for what, fn, needles in cases:
        c.raises(ferry.InvalidArgumentError, fn, *needles, what=what)
    # The slice of a tensor (a storage offset) is borrowed where it lies.
    big = torch.zeros(10)
    view = big[4:8]
    comm.broadcast(torch.arange(4.0), 0, recv=view)
    c.equal(big.numpy(), np.array([0, 0, 0, 0, 0, 1, 2, 3, 0, 0]), "broadcast into a torch slice")


def check_lifecycle(comm):
    e = None
    sub = comm.split(0)
    c.true(sub is not None and sub.size == 1, "split(0) at size 1")
    sub.close()
    c.true(comm.split(ferry.SPLIT_NOCOLOR) is None, "split(SPLIT_NOCOLOR) is not None")
    comm.abort("the unit test aborts")
    e = c.raises(ferry.AbortedError, comm.barrier, "the unit test aborts", what="a call after abort()")
    c.true(e.code == ferry.ErrorCode.ABORTED and isinstance(e, ferry.Error) and isinstance(e, RuntimeError),
           "AbortedError's code or bases")
    err = comm.error()
    c.true(isinstance(err, ferry.AbortedError), f"Comm.error() after abort is {err!r}")
    comm.close()
    comm.close()  # idempotent
    c.true(comm.closed and "closed" in repr(comm), "a closed Comm does not say so")
    e = c.raises(ferry.InvalidUsageError, lambda: comm.all_reduce(np.zeros(2)), "all_reduce", "closed",
                 what="a call on a closed Comm")
    c.true(e.code == ferry.ErrorCode.INVALID_USAGE, "closed Comm: code")
    c.raises(ferry.InvalidUsageError, lambda: comm.rank, "closed", what="rank of a closed Comm")


def check_two_threads():
    """Two ranks on two threads: Comm.create blocks until both joined, so it deadlocks unless the GIL is
    released; then concurrent collectives, also blocking."""
    uid = ferry.UniqueId.create()
    results, errors = [None, None], []

    def rank_main(r):
        try:
            with ferry.Comm.create(uid, r, 2) as comm:
                a = np.full(1001, r + 1, np.int32)
                comm.all_reduce(a)
                g = np.zeros(4, np.int64)
                comm.all_gather(np.array([r, 10 + r]), g)
                results[r] = (a, g)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    c.true(not any(t.is_alive() for t in threads), "two ranks on two threads did not finish in 30 s")
    c.true(not errors, f"two ranks on two threads: {errors}")
    for r in range(2):
        c.equal(results[r][0], np.full(1001, 3), f"thread rank {r}: all_reduce")
        c.equal(results[r][1], np.array([0, 10, 1, 11]), f"thread rank {r}: all_gather")


def check_timeout():
    """A rank that never arrives: ferry.TimeoutError, also the builtin TimeoutError (FERRY_TIMEOUT=1, in a
    child process since the knob is read once)."""
    code = ("import ferry\n"
            "try:\n"
            "    ferry.Comm.create(ferry.UniqueId.create(), 0, 2)\n"
            "except TimeoutError as e:\n"
            "    assert isinstance(e, ferry.TimeoutError) and isinstance(e, ferry.Error), type(e).__mro__\n"
            "    assert e.code == ferry.ErrorCode.TIMEOUT, e.code\n"
            "    print('TIMEOUT', e)\n")
    env = dict(__import__("os").environ, FERRY_TIMEOUT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    c.true(out.returncode == 0 and "TIMEOUT" in out.stdout,
           f"Comm.create with a missing rank: rc {out.returncode}, stdout {out.stdout!r}, stderr {out.stderr[-500:]!r}")
    c.true("rank 1 (of 2) never arrived" in out.stdout,
           f"the timeout message does not name the missing rank: {out.stdout!r}")


SHARED = "memfd:ferry-host-"


def check_shared_arrays():
    """ferry.empty / zeros / empty_like: numpy arrays over hostAlloc memory, which lives until the last
    view of it is collected; hostAlloc's failure is an exception, not a crash."""
    a = ferry.empty((3, 40000), np.float32)
    c.true(a.shape == (3, 40000) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable,
           f"ferry.empty((3, 40000), float32): shape {a.shape}, dtype {a.dtype}, flags {a.flags}")
    c.true(SHARED in (mapping_of(a.ctypes.data) or ""), f"ferry.empty's data is in {mapping_of(a.ctypes.data)!r}, "
           f"expected a {SHARED} mapping")
    plain = np.empty((3, 40000), np.float32)
    c.true(SHARED not in (mapping_of(plain.ctypes.data) or ""), "numpy.empty's data is in ferry's shared memory")
    c.equal(a, np.zeros((3, 40000), np.float32), "ferry.empty's elements start at zero")
    # A view outlives the array it came from: the memory stays mapped, with its bytes, until the view goes.
    a[1] = 7.0
    view = a[1]
    addr = view.ctypes.data
    del a
    gc.collect()
    c.true(SHARED in (mapping_of(addr) or ""), "the memory under a live view was unmapped when its array was collected")
    c.equal(view, np.full(40000, 7.0, np.float32), "a view after its array was collected")
    del view
    gc.collect()
    c.true(SHARED not in (mapping_of(addr) or ""), "ferry.empty's memory is still mapped after its last view went")
    z = ferry.zeros(5, "int64")
    c.true(z.shape == (5,) and z.dtype == np.int64 and not z.any(), f"ferry.zeros(5, int64): {z!r}")
    like = ferry.empty_like(np.ones((4, 6), np.float64))
    c.true(like.shape == (4, 6) and like.dtype == np.float64 and SHARED in mapping_of(like.ctypes.data),
           f"ferry.empty_like: shape {like.shape}, dtype {like.dtype}")
    c.raises(ValueError, lambda: ferry.empty((2, -1)), "shape", ">= 0", what="ferry.empty with a negative size")
    # With no file descriptor left, hostAlloc fails: ferry.empty raises, and the process goes on.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
    fillers = []
    try:
        while True:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        c.raises(ferry.Error, lambda: ferry.empty(1 << 16), "hostAlloc", what="ferry.empty without descriptors")
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def main():
    check_unique_id()
    check_shared_arrays()
    comm = ferry.Comm.create(ferry.UniqueId.create(), 0, 1)
    check_size_one(comm)
    check_errors(comm)
    check_dlpack_protocol(comm)
    check_torch(comm)
    check_lifecycle(comm)
    check_two_threads()
    check_timeout()
    c.report()


if __name__ == "__main__":
    main()
