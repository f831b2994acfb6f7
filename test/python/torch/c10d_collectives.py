"""Every c10d call of the "ferry" backend against closed-form results (run by launch.py).

Inputs are filled from the rank and the index with small integers, exact in every type, so the
expected value of each element has a closed form; every rank checks its own outputs.
"""
import os
import sys

import torch
import torch.distributed as dist

import ferry.torch_backend  # noqa: F401  registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
TYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.int8,
         torch.uint8]
COUNTS = [0, 1, 7, 1000, 65537]
checks = 0


def fill(n, dtype, rank):
    # rank r's element i: (i + 3 r) mod 7 + 1, in 1..7: sums over 4 ranks stay exact in int8.
    return ((torch.arange(n, dtype=torch.int64) + 3 * rank) % 7 + 1).to(dtype)


def expect_equal(name, got, want):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        diff = (got.double() - want.double()).abs()
        bad = int((diff != 0).sum()) if got.shape == want.shape else -1
        raise AssertionError(f"rank {RANK}: {name}: {bad} wrong elements; got {got[:8].tolist()} "
                             f"want {want[:8].tolist()} (dtype {got.dtype}/{want.dtype}, shape {tuple(got.shape)})")


def expect_raises(name, exc, needle, fn):
    global checks
    checks += 1
    try:
        fn()
    except exc as e:
        if needle not in str(e):
            raise AssertionError(f"rank {RANK}: {name}: message lacks {needle!r}: {e}") from e
        return
    raise AssertionError(f"rank {RANK}: {name}: no {exc.__name__} raised")


def total(n, dtype, op):
    vals = [fill(n, torch.int64, r) for r in range(WORLD)]
    out = vals[0].clone()
    for v in vals[1:]:
        out = {"sum": out + v, "max": torch.maximum(out, v), "min": torch.minimum(out, v), "prod": out * v}[op]
    return out.to(dtype)


def bits_fill(n, dtype, rank):
    # rank r's element i: bits 4..6 shared by every rank ((5 i) mod 8), and bit r, which only rank r
    # sets; at most 127, so exact in int8.
    return ((torch.arange(n, dtype=torch.int64) * 5 % 8) * 16 + (1 << rank)).to(dtype)


def bits_total(n, dtype, op):
    # Closed forms: band keeps the shared bits, bor adds every rank's bit, bxor keeps the shared
    # bits when WORLD is odd and sets every rank's bit.
    shared = (torch.arange(n, dtype=torch.int64) * 5 % 8) * 16
    own = (1 << WORLD) - 1
    out = {"band": shared, "bor": shared | own, "bxor": (shared if WORLD % 2 else shared * 0) | own}[op]
    return out.to(dtype)


def main():
    dist.init_process_group("ferry", init_method="file://" + os.environ["FERRY_TEST_STORE"], rank=RANK,
                            world_size=WORLD)
    assert dist.get_backend() == "ferry", dist.get_backend()
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    for dtype in TYPES:
        for n in COUNTS:
            # all_reduce, every op but prod (7^4 does not fit int8; prod runs on floats below)
            for name, op in ops.items():
                t = fill(n, dtype, RANK)
                dist.all_reduce(t, op=op)
                expect_equal(f"all_reduce {name} {dtype} n={n}", t, total(n, dtype, name))
            # all_reduce and reduce with the bitwise ops on the integer types
            if not dtype.is_floating_point:
                for name, op in {"band": dist.ReduceOp.BAND, "bor": dist.ReduceOp.BOR,
                                 "bxor": dist.ReduceOp.BXOR}.items():
                    t = bits_fill(n, dtype, RANK)
                    dist.all_reduce(t, op=op)
                    expect_equal(f"all_reduce {name} {dtype} n={n}", t, bits_total(n, dtype, name))
                    t = bits_fill(n, dtype, RANK)
                    dist.reduce(t, WORLD - 1, op=op)
                    if RANK == WORLD - 1:
                        expect_equal(f"reduce {name} {dtype} n={n}", t, bits_total(n, dtype, name))
            # broadcast from the last rank
            root = WORLD - 1
            t = fill(n, dtype, RANK)
            dist.broadcast(t, root)
            expect_equal(f"broadcast {dtype} n={n}", t, fill(n, dtype, root))
            # reduce to rank 0 (only the root's output is defined)
            t = fill(n, dtype, RANK)
            dist.reduce(t, 0, op=dist.ReduceOp.SUM)
            if RANK == 0:
                expect_equal(f"reduce {dtype} n={n}", t, total(n, dtype, "sum"))
            # all_gather into a list, and into one tensor
            outs = [torch.empty(n, dtype=dtype) for _ in range(WORLD)]
            dist.all_gather(outs, fill(n, dtype, RANK))
            for r in range(WORLD):
                expect_equal(f"all_gather {dtype} n={n} from {r}", outs[r], fill(n, dtype, r))
            flat = torch.empty(n * WORLD, dtype=dtype)
            dist._all_gather_base(flat, fill(n, dtype, RANK))
            expect_equal(f"_all_gather_base {dtype} n={n}", flat, torch.cat([fill(n, dtype, r) for r in range(WORLD)]))
            # reduce_scatter from a list, and from one tensor
            ins = [fill(n, dtype, RANK) + r for r in range(WORLD)]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out, ins)
            expect_equal(f"reduce_scatter {dtype} n={n}", out, (total(n, torch.int64, "sum") + WORLD * RANK).to(dtype))
            out2 = torch.empty(n, dtype=dtype)
            dist._reduce_scatter_base(out2, torch.cat(ins))
            expect_equal(f"_reduce_scatter_base {dtype} n={n}", out2, out)
            # all_to_all_single, even
            src = torch.cat([fill(n, dtype, RANK) + r for r in range(WORLD)])
            dst = torch.empty_like(src)
            dist.all_to_all_single(dst, src)
            expect_equal(f"all_to_all_single {dtype} n={n}", dst,
                         torch.cat([fill(n, dtype, r) + RANK for r in range(WORLD)]))
    t = (fill(1000, torch.float64, RANK) % 2 + 1)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    expect_equal("all_reduce prod", t, torch.stack([fill(1000, torch.float64, r) % 2 + 1 for r in range(WORLD)]).prod(0))
    # all_reduce avg on floats, and bool as logical or / and
    t = fill(1000, torch.float32, RANK)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    expect_equal("all_reduce avg", t, total(1000, torch.float64, "sum").div(WORLD).to(torch.float32))
    b = torch.tensor([RANK == 0, True, False])
    dist.all_reduce(b)
    expect_equal("all_reduce bool sum (or)", b, torch.tensor([True, True, False]))
    b = torch.tensor([RANK == 0, True, False])
    dist.all_reduce(b, op=dist.ReduceOp.BAND)
    expect_equal("all_reduce bool band", b, torch.tensor([WORLD == 1, True, False]))
    b = torch.tensor([RANK == 0, True, False])
    dist.all_reduce(b, op=dist.ReduceOp.BOR)
    expect_equal("all_reduce bool bor", b, torch.tensor([True, True, False]))
    b = torch.tensor([RANK == 0, True, False])
    dist.all_reduce(b, op=dist.ReduceOp.BXOR)
    expect_equal("all_reduce bool bxor", b, torch.tensor([True, WORLD % 2 == 1, False]))
    # coalesced all-reduce of tensors of several shapes
    ts = [fill(k, torch.float32, RANK).reshape(-1) for k in (3, 0, 1000, 17)]
    dist.all_reduce_coalesced(ts)
    for k, t in zip((3, 0, 1000, 17), ts):
        expect_equal(f"all_reduce_coalesced n={k}", t, total(k, torch.float32, "sum"))
    # uneven all_to_all_single: rank r sends (r + d + 1) rows of 3 elements to rank d
    rows_to = [RANK + d + 1 for d in range(WORLD)]
    rows_from = [s + RANK + 1 for s in range(WORLD)]
    src = torch.cat([torch.full((rows_to[d], 3), float(100 * RANK + d)) for d in range(WORLD)])
    dst = torch.empty(sum(rows_from), 3)
    dist.all_to_all_single(dst, src, output_split_sizes=rows_from, input_split_sizes=rows_to)
    expect_equal("all_to_all_single uneven", dst,
                 torch.cat([torch.full((rows_from[s], 3), float(100 * s + RANK)) for s in range(WORLD)]))
    # all_to_all with a list of tensors of different sizes
    ins = [torch.full((d + 1,), RANK * 10 + d, dtype=torch.int64) for d in range(WORLD)]
    outs = [torch.empty(RANK + 1, dtype=torch.int64) for _ in range(WORLD)]
    dist.all_to_all(outs, ins)
    for s in range(WORLD):
        expect_equal(f"all_to_all from {s}", outs[s], torch.full((RANK + 1,), s * 10 + RANK, dtype=torch.int64))
    # gather and scatter, root 0
    g = [torch.empty(5) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(torch.full((5,), float(RANK)), g, dst=0)
    if RANK == 0:
        for r in range(WORLD):
            expect_equal(f"gather from {r}", g[r], torch.full((5,), float(r)))
    s = torch.empty(4)
    dist.scatter(s, [torch.full((4,), float(r * 2)) for r in range(WORLD)] if RANK == 0 else None, src=0)
    expect_equal("scatter", s, torch.full((4,), float(RANK * 2)))
    # send/recv: every rank exchanges 8 MiB with both ring neighbours, sends posted first (the
    # pattern that deadlocks when each send must finish before the next call starts)
    if WORLD > 1:
        n = 2 * 1024 * 1024
        nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        out = torch.full((n,), float(RANK))
        got = torch.empty(n)
        reqs = [dist.isend(out, nxt), dist.irecv(got, prv)]
        for r in reqs:
            r.wait()
        expect_equal("isend/irecv ring", got, torch.full((n,), float(prv)))
        # batch_isend_irecv, receive listed first
        got2 = torch.empty(n)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got2, nxt), dist.P2POp(dist.isend, out, prv)])
        for r in reqs:
            r.wait()
        expect_equal("batch_isend_irecv", got2, torch.full((n,), float(nxt)))
        # blocking send/recv between 0 and 1
        if RANK == 0:
            dist.send(torch.arange(10), 1)
        elif RANK == 1:
            x = torch.empty(10, dtype=torch.int64)
            dist.recv(x, 0)
            expect_equal("send/recv", x, torch.arange(10))
    # futures complete asynchronously and run callbacks
    t = torch.ones(1000)
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    expect_equal("future then", fut.wait(), torch.full((1000,), 2.0 * WORLD))
    works = [dist.all_reduce(torch.full((100,), float(i)), async_op=True) for i in range(8)]
    for i, w in enumerate(works):
        w.wait()
        assert w.is_completed(), f"work {i}"
        expect_equal(f"async all_reduce {i}", w.result()[0], torch.full((100,), float(i * WORLD)))
    # argument errors: raised at once, on the caller's thread, naming the argument and the rank
    # (non-contiguous tensors, int16 and the errors' names: gloo_parity.py)
    expect_raises("bxor on float32", ValueError,
                  f"allreduce on rank {RANK}: op BXOR needs an integer or bool tensor; tensors[0] has dtype "
                  "torch.float32", lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BXOR))
    expect_raises("band on bfloat16", ValueError, "op BAND needs an integer or bool tensor",
                  lambda: dist.reduce(torch.ones(3, dtype=torch.bfloat16), 0, op=dist.ReduceOp.BAND))
    expect_raises("_all_gather_base size", ValueError, f"on rank {RANK}: output_tensor has 5 elements",
                  lambda: dist._all_gather_base(torch.empty(5), torch.empty(3)))
    expect_raises("uneven splits", ValueError, "input_split_sizes adds up to",
                  lambda: dist.all_to_all_single(torch.empty(WORLD), torch.empty(WORLD),
                                                 [1] * WORLD, [2] * WORLD))
    expect_raises("send to self", ValueError, "cannot send to itself", lambda: dist.send(torch.ones(1), RANK))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {RANK}: {checks} checks passed")


if __name__ == "__main__":
    main()
