"""Every collective of ferry.Comm on numpy arrays or torch tensors, under ferryrun at 2 and 4 ranks.

    ferryrun -n 4 python3 test_collectives.py numpy|torch

Sweeps element type x element count (0, 1, 7 and about 1 MiB) x in place / out of place, with
inputs filled from the rank so that every expected value has a closed form (closed_forms.py), and
checks that results land in the very arrays passed (no copies). torch: skipped (exit 77) when it
cannot be imported.
"""
import sys

from harness import Checks, skip

try:
    import numpy as np
except ImportError as e:
    skip(f"numpy cannot be imported ({e}): apt-get install python3-numpy")

import closed_forms as cf  # noqa: E402

GARBAGE = 77  # what outputs hold before a collective writes them: exact in every type


_casts = {}


def cast(ideal, dtype):
    """The ideal values as `dtype` (exact), cached: the closed forms are cached arrays too."""
    if not isinstance(ideal, np.ndarray) or ideal.flags.writeable:
        return np.asarray(ideal).astype(dtype)
    key = (id(ideal), np.dtype(dtype).str)
    if key not in _casts:
        _casts[key] = (ideal, ideal.astype(dtype))  # holding `ideal` keeps its id unique
    return _casts[key][1]


class NumpyLib:
    """Arrays of the type under test, made from int64/float64 ideal values."""

    name = "numpy"

    def __init__(self):
        self.types = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
                      np.float64]
        self.big_types = [np.int8, np.float16, np.uint32, np.float64]

    def make(self, values, dtype):
        return np.asarray(values).astype(dtype)  # a copy: the closed forms are shared

    def full(self, n, dtype):
        return np.full(n, GARBAGE, dtype=dtype)

    def values(self, x):
        """x as a numpy array, without a copy where possible."""
        return x

    def ptr(self, x):
        return x.__array_interface__["data"][0]

    def itemsize(self, dtype):
        return np.dtype(dtype).itemsize

    def is_signed(self, dtype):
        return not np.issubdtype(dtype, np.unsignedinteger)

    def is_integer(self, dtype):
        return np.issubdtype(dtype, np.integer)

    def type_name(self, dtype):
        return np.dtype(dtype).name


class TorchLib:
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        # torch 1.13 has no uint32/uint64 tensors; bfloat16 goes through DLPack's kDLBfloat.
        self.types = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                      torch.float32, torch.float64]
        self.big_types = [torch.uint8, torch.bfloat16, torch.float32, torch.int64]

    def make(self, values, dtype):
        # A copy: torch.from_numpy shares (even read-only) memory, and .to() of the same dtype is a no-op.
        return self.torch.from_numpy(np.array(values)).to(dtype)

    def full(self, n, dtype):
        return self.torch.full((n,), GARBAGE, dtype=dtype)

    def values(self, x):
        """x as a numpy array: a view, except for bfloat16, which numpy lacks (widened exactly)."""
        return x.float().numpy() if x.dtype == self.torch.bfloat16 else x.numpy()

    def ptr(self, x):
        return x.data_ptr()

    def itemsize(self, dtype):
        return self.torch.empty(0, dtype=dtype).element_size()

    def is_signed(self, dtype):
        return dtype != self.torch.uint8

    def is_integer(self, dtype):
        return not dtype.is_floating_point

    def type_name(self, dtype):
        return str(dtype).replace("torch.", "")


class Sweep:
    """One element type and count on one communicator."""

    def __init__(self, comm, lib, checks, dtype, n):
        self.comm, self.lib, self.c, self.dtype, self.n = comm, lib, checks, dtype, n
        self.W, self.rank = comm.size, comm.rank
        self.signed = lib.is_signed(dtype)
        self.integer = lib.is_integer(dtype)
        self.es = lib.itemsize(dtype)
        self.tag = f"{lib.name} {lib.type_name(dtype)} n={n}"

    def fill(self, r, n=None):
        return self.lib.make(cf.fill(r, self.n if n is None else n, self.signed), self.dtype)

    def check(self, x, expected, what):
        got = self.lib.values(x)
        self.c.equal(got, cast(expected, got.dtype), f"{self.tag}: {what}")

    def landed_in(self, got, passed, ptr_before, what):
        """Zero copy: the call returned the array passed, whose memory did not move."""
        self.c.true(got is passed and self.lib.ptr(passed) == ptr_before, f"{self.tag}: {what}: result not in place")

    def all_reduce(self, ops):
        n = self.n
        for op in ops:
            make_in = cf.prod_fill if op == "prod" else cf.fill
            want = (cf.prod_expected(self.W, n, self.signed) if op == "prod"
                    else cf.expected(op, self.W, n, self.signed, self.integer))
            send = self.lib.make(make_in(self.rank, n, self.signed), self.dtype)
            recv = self.lib.full(self.n, self.dtype)
            p = self.lib.ptr(recv)
            got = self.comm.all_reduce(send, recv, op)
            self.landed_in(got, recv, p, f"all_reduce {op}")
            self.check(recv, want, f"all_reduce {op} out of place")
            self.check(send, make_in(self.rank, n, self.signed), f"all_reduce {op}: send changed")
            buf = self.lib.make(make_in(self.rank, n, self.signed), self.dtype)
            p = self.lib.ptr(buf)
            got = self.comm.all_reduce(buf, op=op)
            self.landed_in(got, buf, p, f"all_reduce {op} in place")
            self.check(buf, want, f"all_reduce {op} in place")

    def reduce_scatter(self, op):
        n, W, r = self.n, self.W, self.rank
        want = cf.expected(op, W, n, self.signed, self.integer, r * n)
        recv = self.lib.full(n, self.dtype)
        p = self.lib.ptr(recv)
        got = self.comm.reduce_scatter(self.fill(r, W * n), recv, op=op)
        self.landed_in(got, recv, p, "reduce_scatter")
        self.check(recv, want, f"reduce_scatter {op} out of place")
        buf = self.fill(r, W * n)
        view = self.comm.reduce_scatter(buf, op=op)
        if n > 0:
            self.c.true(self.lib.ptr(view) == self.lib.ptr(buf) + r * n * self.es,
                        f"{self.tag}: reduce_scatter in place: the view is not this rank's block of send")
        self.check(view, want, f"reduce_scatter {op} in place (view)")
        self.check(buf[r * n:(r + 1) * n], want, f"reduce_scatter {op} in place (send)")

    def all_gather(self):
        n, W, r = self.n, self.W, self.rank
        want = cf.gathered(W, n, self.signed)
        recv = self.lib.full(W * n, self.dtype)
        p = self.lib.ptr(recv)
        got = self.comm.all_gather(self.fill(r), recv)
        self.landed_in(got, recv, p, "all_gather")
        self.check(recv, want, "all_gather out of place")
        for how in ("send=None", "send=block of recv"):
            recv = self.lib.full(W * n, self.dtype)
            recv[r * n:(r + 1) * n] = self.fill(r)
            send = None if how == "send=None" else recv[r * n:(r + 1) * n]
            p = self.lib.ptr(recv)
            got = self.comm.all_gather(send, recv)
            self.landed_in(got, recv, p, "all_gather in place")
            self.check(recv, want, f"all_gather in place ({how})")

    def all_to_all(self):
        n, W, r = self.n, self.W, self.rank
        mine = cf.blocks_sent(r, W, n)
        want = cf.blocks_received(r, W, n)
        recv = self.lib.full(W * n, self.dtype)
        p = self.lib.ptr(recv)
        got = self.comm.all_to_all(self.lib.make(mine, self.dtype), recv)
        self.landed_in(got, recv, p, "all_to_all")
        self.check(recv, want, "all_to_all out of place")
        buf = self.lib.make(mine, self.dtype)
        p = self.lib.ptr(buf)
        got = self.comm.all_to_all(buf)
        self.landed_in(got, buf, p, "all_to_all in place")
        self.check(buf, want, "all_to_all in place")

    def broadcast(self, root):
        n, r = self.n, self.rank
        want = cf.fill(root, n, self.signed)
        buf = self.fill(r) if r == root else self.lib.full(n, self.dtype)
        p = self.lib.ptr(buf)
        got = self.comm.broadcast(buf, root)
        self.landed_in(got, buf, p, "broadcast in place")
        self.check(buf, want, f"broadcast root {root} in place")
        recv = self.lib.full(n, self.dtype)
        p = self.lib.ptr(recv)
        got = self.comm.broadcast(self.fill(r) if r == root else None, root, recv=recv)
        self.landed_in(got, recv, p, "broadcast")
        self.check(recv, want, f"broadcast root {root} into recv")

    def reduce(self, root):
        n, r = self.n, self.rank
        send = self.fill(r)
        recv = self.lib.full(n, self.dtype)
        p = self.lib.ptr(recv)
        got = self.comm.reduce(send, recv, "sum", root)
        self.landed_in(got, recv, p, "reduce")
        if r == root:
            self.check(recv, cf.expected("sum", self.W, n, self.signed, self.integer), f"reduce root {root}")
        else:
            self.check(recv, np.full(n, GARBAGE), f"reduce root {root}: a non-root recv was written")
        self.check(send, cf.fill(r, n, self.signed), f"reduce root {root}: send changed")
        buf = self.fill(r)
        self.comm.reduce(buf, op="max", root=root)
        want = (cf.expected("max", self.W, n, self.signed, self.integer) if r == root
                else cf.fill(r, n, self.signed))
        self.check(buf, want, f"reduce max root {root} in place")

    def point_to_point(self):
        n, W, r = self.n, self.W, self.rank
        nxt, prv = (r + 1) % W, (r - 1) % W
        send, recv = self.fill(r), self.lib.full(n, self.dtype)
        if r % 2 == 0:  # even ranks send first: a ring without deadlock for even W
            self.comm.send(send, nxt)
            got = self.comm.recv(recv, prv)
        else:
            got = self.comm.recv(recv, prv)
            self.comm.send(send, nxt)
        self.c.true(got is recv, f"{self.tag}: recv did not return its buffer")
        self.check(recv, cf.fill(prv, n, self.signed), "send/recv ring")
        recv = self.lib.full(n, self.dtype)
        self.comm.send_recv(sends=[(send, prv)], recvs=[(recv, nxt)])
        self.check(recv, cf.fill(nxt, n, self.signed), "send_recv ring")

    def run(self, ops):
        self.all_reduce(ops)
        self.reduce_scatter("sum")
        self.reduce_scatter("max")
        self.all_gather()
        self.all_to_all()
        for root in sorted({0, self.W - 1}):
            self.broadcast(root)
            self.reduce(root)
        self.point_to_point()


def check_async(comm, lib, c):
    """Several operations in flight at once, completed by Work.wait() in order."""
    W, r = comm.size, comm.rank
    dtype = lib.types[-2]  # float32
    n = 1001
    a = lib.make(cf.fill(r, n, True), dtype)
    gathered = lib.full(W * n, dtype)
    b = lib.make(cf.fill(r, n, True), dtype) if r == 0 else lib.full(n, dtype)
    works = [comm.all_reduce(a, async_op=True), comm.all_gather(lib.make(cf.fill(r, n, True), dtype), gathered,
                                                                 async_op=True),
             comm.broadcast(b, 0, async_op=True), comm.barrier(async_op=True)]
    results = [w.wait() for w in works]
    c.true(results[0] is a and results[1] is gathered and results[2] is b and results[3] is None,
           "async: wait() did not return the output arrays")
    c.true(all(w.is_completed() for w in works), "async: a waited Work is not completed")
    c.equal(lib.values(a), cf.expected("sum", W, n, True, False), "async all_reduce")
    c.equal(lib.values(gathered), cf.gathered(W, n, True), "async all_gather")
    c.equal(lib.values(b), cf.fill(0, n, True), "async broadcast")
    # A Work dropped unwaited must keep its arrays until done (its destructor waits).
    comm.all_reduce(lib.make(cf.fill(r, n, True), dtype), async_op=True)
    comm.barrier()


def check_shared(comm, lib, c):
    """all_reduce on arrays from ferry.empty (shared memory peers read in place), in and out of place,
    at about 1 MiB (an odd count)."""
    if not isinstance(lib, NumpyLib):
        return
    import numpy as np
    import ferry
    W, r, n = comm.size, comm.rank, (1 << 18) + 3
    a = ferry.empty(n, np.float32)
    a[:] = cf.fill(r, n, True)
    out = ferry.empty(n, np.float32)
    comm.all_reduce(a, out)
    c.equal(out, np.asarray(cf.expected("sum", W, n, True, False), np.float32), "all_reduce, ferry.empty buffers")
    comm.all_reduce(a)
    c.equal(a, np.asarray(cf.expected("sum", W, n, True, False), np.float32), "in-place all_reduce, ferry.empty")
    comm.barrier()


def check_bitwise(comm, lib, c):
    """band, bor and bxor on every integer type: rank r sets bit r on top of bits 4..6, which every
    rank shares; band keeps the shared bits, bor adds every rank's bit, bxor keeps the shared bits
    when W is odd and sets every rank's bit."""
    import ferry
    W, r = comm.size, comm.rank
    shared = (np.arange(61, dtype=np.int16) * 5 % 8) * 16
    own = (1 << W) - 1
    want = {"band": shared, "bor": shared | own, "bxor": (shared if W % 2 else 0 * shared) | own}
    for dtype in lib.types:
        if not lib.is_integer(dtype):
            continue
        for op, ideal in want.items():
            got = comm.all_reduce(lib.make(shared | (1 << r), dtype), op=op)
            c.equal(lib.values(got), cast(ideal, lib.values(got).dtype), f"{lib.name} {dtype}: all_reduce {op}")
            root = W - 1
            got = comm.reduce(lib.make(shared | (1 << r), dtype), root=root, op=getattr(ferry.RedOp, op.upper()))
            if r == root:
                c.equal(lib.values(got), cast(ideal, lib.values(got).dtype), f"{lib.name} {dtype}: reduce {op}")
    c.raises(ferry.InvalidArgumentError, lambda: comm.all_reduce(lib.full(3, lib.types[-2]), op="bor"),
             f"on rank {r}: op bor needs an integer type (int8, uint8, int32, uint32, int64, uint64)",
             what="bor on a floating-point type")


def check_split(comm, lib, c):
    import ferry
    W, r = comm.size, comm.rank
    sub = comm.split(r % 2, -r)  # by parity, in reverse rank order
    members = [q for q in range(W) if q % 2 == r % 2]
    c.true(sub.size == len(members) and sub.rank == sorted(members, reverse=True).index(r),
           f"split: rank {sub.rank} of {sub.size}, expected {sorted(members, reverse=True).index(r)} of {len(members)}")
    x = lib.make(np.full(3, r + 1), lib.types[-1])
    sub.all_reduce(x)
    c.equal(lib.values(x), np.full(3, sum(q + 1 for q in members)), "all_reduce on the split communicator")
    sub.close()
    none = comm.split(ferry.SPLIT_NOCOLOR if r == 0 else 0)
    c.true((none is None) == (r == 0), "split: SPLIT_NOCOLOR did not give None")
    if none is not None:
        c.true(none.size == W - 1, "split: the colored ranks' communicator has the wrong size")
        none.close()
    if W >= 2:
        # The last rank leaves a split of the world; the others shrink it without that rank.
        part = comm.split(0, r)
        if r != W - 1:
            small = part.shrink([W - 1])
            c.true(small.size == W - 1 and small.rank == r, f"shrink: rank {small.rank} of {small.size}")
            y = lib.make(np.full(2, r + 1), lib.types[-1])
            small.all_reduce(y)
            c.equal(lib.values(y), np.full(2, sum(q + 1 for q in range(W - 1))), "all_reduce after shrink")
            small.close()
        part.close()


def check_errors(comm, lib, c):
    """Errors every rank raises alike (no rank waits for another), naming the argument and the rank."""
    import ferry
    W, r = comm.size, comm.rank
    dtype = lib.types[-2]
    c.raises(ferry.InvalidArgumentError, lambda: comm.broadcast(lib.full(4, dtype), W), f"rank {r}", f"root {W}",
             what="broadcast to a root out of range")
    c.raises(ferry.InvalidArgumentError, lambda: comm.all_gather(lib.full(3, dtype), lib.full(3 * W + 1, dtype)),
             f"all_gather on rank {r}", "argument 'recv'", f"expected {3 * W}", what="all_gather recv size")
    c.raises(ferry.InvalidArgumentError, lambda: comm.all_to_all(lib.full(W + 1, dtype)), "argument 'send'",
             f"multiple of the communicator size {W}", what="all_to_all size")
    c.raises(ferry.InvalidArgumentError,
             lambda: comm.reduce_scatter(lib.full(2 * W, dtype), lib.full(3, dtype)), "argument 'send'",
             f"expected {3 * W}", what="reduce_scatter send size")
    # Ranks that disagree on the count: MismatchError on every rank, on a communicator of their own
    # since the error is sticky.
    with comm.split(0) as sub:
        e = c.raises(ferry.MismatchError, lambda: sub.all_reduce(lib.full(4 + r, dtype)), f"rank {r}", "mismatch",
                     what="all_reduce with a count that differs between ranks")
        c.true(e.code == ferry.ErrorCode.MISMATCH and isinstance(sub.error(), ferry.MismatchError),
               "a mismatch is not sticky on its communicator")
    comm.barrier()  # the parent is unaffected


def check_peer_death(comm, lib, c):
    """The last rank exits without a word: the others' next call raises RemoteError naming it, and the
    error is sticky (later calls, Comm.error(), queued Work). Leaves the communicator failed."""
    import os
    import ferry
    W, r = comm.size, comm.rank
    comm.barrier()
    if r == W - 1:
        c.report()
        os._exit(0)  # exit code 0: ferryrun lets the others run on
    x = lib.full(10, lib.types[-1])
    c.raises(ferry.RemoteError, lambda: comm.all_reduce(x), f"rank {W - 1}", "died", what="a peer that exited")
    c.raises(ferry.RemoteError, comm.barrier, f"rank {W - 1}", what="the sticky error")
    c.true(isinstance(comm.error(), ferry.RemoteError), f"Comm.error() after a peer died: {comm.error()!r}")
    work = comm.all_reduce(x, async_op=True)
    c.raises(ferry.RemoteError, work.wait, f"rank {W - 1}", what="Work.wait after a peer died")


def main():
    libname = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    if libname == "torch":
        try:
            import torch
        except ImportError as e:
            skip(f"torch cannot be imported ({e}); the torch half of the bindings tests did not run")
        lib = TorchLib(torch)
    else:
        lib = NumpyLib()
    import ferry
    with ferry.Comm.from_env() as comm:
        c = Checks(f"bindings {libname} {comm.size} ranks", comm.rank)
        ops = ["sum", "prod", "max", "min", "avg"]
        # Every type and op at small counts; about 1 MiB (an odd count) for one type of each element size,
        # which is what changes the paths taken (chunking, alignment), with sum and one other op.
        big_types = {lib.itemsize(t): t for t in lib.big_types}
        for t, dtype in enumerate(lib.types):
            sizes = [0, 1, 7]
            if big_types.get(lib.itemsize(dtype)) is dtype:
                sizes.append((1 << 20) // lib.itemsize(dtype) + 1)
            for n in sizes:
                Sweep(comm, lib, c, dtype, n).run(ops if n < 1000 else ["sum", ops[1 + t % 4]])
            comm.barrier()
        check_async(comm, lib, c)
        check_shared(comm, lib, c)
        check_bitwise(comm, lib, c)
        check_split(comm, lib, c)
        check_errors(comm, lib, c)
        check_peer_death(comm, lib, c)  # last: the communicator is failed afterwards
    c.report()


if __name__ == "__main__":
    main()
