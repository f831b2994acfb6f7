"""The "ferry" backend against Gloo on the same inputs, and docs/PYTHON.md's support tables (issue 40).

Run by launch.py. Every rank joins the default group (ferry) and a Gloo group of the same ranks;
each check runs the call on both with the same inputs and requires ferry's result to equal the
closed form of the rank-based fill, and Gloo's where Gloo runs it. The tables of docs/PYTHON.md
(argument: its path) are parsed and every cell is run: "yes" must work on both backends, "ferry"
on ferry only (Gloo refuses), "no" must be refused by ferry. With --print-tables the observed
tables are printed instead (to write the doc).
"""
import os
import re
import sys

import torch
import torch.distributed as dist

import ferry.torch_backend  # noqa: F401  registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DTYPES = {"bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
          "int32": torch.int32, "int64": torch.int64, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
          "complex128": torch.complex128}
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
FACTOR = 2.5
checks = 0
GLOO = None


def fill(n, dtype, rank):
    # small values (1..3, products of 3 ranks stay exact in bfloat16); complex gets an imaginary part
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return (i + rank) % 2 == 0
    if dtype.is_complex:
        return torch.complex(((i + rank) % 3 + 1).double(), ((i + 2 * rank) % 3).double()).to(dtype)
    if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return ((i + rank) % 3 + 1).to(dtype)
    return ((i * 5 % 8) * 16 + (1 << rank) + (i + rank) % 3).to(dtype)  # distinct bits per rank


def closed(op, dtype, n):
    vals = [fill(n, dtype, r) for r in range(WORLD)]
    if dtype == torch.bool:
        f = {"SUM": any, "MAX": any, "BOR": any, "PRODUCT": all, "MIN": all, "BAND": all}
        if op == "BXOR":
            return torch.stack(vals).sum(0) % 2 == 1
        if op not in f:
            return None  # refused
        return torch.stack(vals).any(0) if f[op] is any else torch.stack(vals).all(0)
    wide = torch.complex128 if dtype.is_complex else (torch.float64 if dtype.is_floating_point else torch.int64)
    v = [x.to(wide) for x in vals]
    if op == "PREMUL_SUM":
        fac = torch.tensor(FACTOR, dtype=torch.float64).to(dtype).to(wide)
        v = [(x.to(dtype) * torch.tensor(FACTOR, dtype=torch.float64).to(dtype)).to(wide) for x in vals]
        del fac
    acc = v[0]
    for x in v[1:]:
        acc = {"SUM": acc + x, "AVG": acc + x, "PREMUL_SUM": acc + x, "PRODUCT": acc * x,
               "MIN": torch.minimum(acc, x) if not dtype.is_complex else acc, "MAX": torch.maximum(acc, x)
               if not dtype.is_complex else acc, "BAND": acc & x if wide == torch.int64 else acc,
               "BOR": acc | x if wide == torch.int64 else acc, "BXOR": acc ^ x if wide == torch.int64 else acc}[op]
    if op == "AVG":
        # integers: ferry's sum wraps in the type, then divides (truncating)
        acc = acc / WORLD if wide != torch.int64 else torch.div(acc.to(dtype).to(wide), WORLD, rounding_mode="trunc")
    return acc.to(dtype)


def torch_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(FACTOR)
    return getattr(dist.ReduceOp, op)


def check(name, got, want):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"rank {RANK}: {name}: got {got.flatten()[:6].tolist()} want "
                             f"{want.flatten()[:6].tolist()} ({got.dtype}/{want.dtype})")


def both(name, run, want):
    """run(group) -> output tensor or None (no output here). Ferry must give `want` (None: no check);
    returns whether Gloo ran it, after requiring Gloo's output to equal ferry's."""
    got = run(None)
    if want is not None and got is not None:
        check(name + " [ferry]", got, want)
    try:
        g = run(GLOO)
    except (RuntimeError, ValueError, TypeError):
        return False
    if got is not None and g is not None:
        check(name + " [gloo vs ferry]", g, got)
    return True


def refused(run):
    try:
        run(None)
    except (RuntimeError, ValueError, TypeError) as e:
        return str(e)
    return None


# -- the reduction table: op x dtype, by all_reduce, reduce and _reduce_scatter_base ---------------
def reduce_cell(op, dtype):
    n = 7
    want = closed(op, dtype, n)

    def ar(g):
        t = fill(n, dtype, RANK)
        dist.all_reduce(t, op=torch_op(op), group=g)
        return t

    if refused(ar) is not None:
        return "no"
    check(f"all_reduce {op} {dtype}", ar(None), want)
    t = fill(n, dtype, RANK)
    dist.reduce(t, 0, op=torch_op(op))
    if RANK == 0:
        check(f"reduce {op} {dtype}", t, want)
    out = torch.empty(n, dtype=dtype)
    dist._reduce_scatter_base(out, torch.cat([fill(n, dtype, RANK)] * WORLD), op=torch_op(op))
    check(f"_reduce_scatter_base {op} {dtype}", out, want)
    return "yes" if both(f"all_reduce {op} {dtype}", ar, want) else "ferry"


# -- the data-movement table: call x dtype ------------------------------------------------------------
def mv_broadcast(dtype, g):
    t = fill(5, dtype, RANK)
    dist.broadcast(t, WORLD - 1, group=g)
    check("broadcast", t, fill(5, dtype, WORLD - 1))


def mv_all_gather(dtype, g):
    outs = [torch.empty(5, dtype=dtype) for _ in range(WORLD)]
    dist.all_gather(outs, fill(5, dtype, RANK), group=g)
    check("all_gather", torch.stack(outs), torch.stack([fill(5, dtype, r) for r in range(WORLD)]))


def mv_all_gather_base(dtype, g):
    out = torch.empty(5 * WORLD, dtype=dtype)
    dist._all_gather_base(out, fill(5, dtype, RANK), group=g)
    check("_all_gather_base", out, torch.cat([fill(5, dtype, r) for r in range(WORLD)]))


def mv_gather(dtype, g):
    outs = [torch.empty(5, dtype=dtype) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(fill(5, dtype, RANK), outs, dst=0, group=g)
    if RANK == 0:
        check("gather", torch.stack(outs), torch.stack([fill(5, dtype, r) for r in range(WORLD)]))


def mv_scatter(dtype, g):
    t = torch.empty(5, dtype=dtype)
    dist.scatter(t, [fill(5, dtype, r) for r in range(WORLD)] if RANK == 0 else None, src=0, group=g)
    check("scatter", t, fill(5, dtype, RANK))


def mv_all_to_all_single(dtype, g):
    out = torch.empty(2 * WORLD, dtype=dtype)
    dist.all_to_all_single(out, fill(2 * WORLD, dtype, RANK), group=g)
    want = torch.cat([fill(2 * WORLD, dtype, s)[2 * RANK:2 * RANK + 2] for s in range(WORLD)])
    check("all_to_all_single", out, want)


def mv_all_to_all(dtype, g):
    outs = [torch.empty(3, dtype=dtype) for _ in range(WORLD)]
    dist.all_to_all(outs, [fill(3, dtype, RANK + 10 * d) for d in range(WORLD)], group=g)
    check("all_to_all", torch.stack(outs), torch.stack([fill(3, dtype, s + 10 * RANK) for s in range(WORLD)]))


def mv_send_recv(dtype, g):
    got = torch.empty(5, dtype=dtype)
    reqs = [dist.isend(fill(5, dtype, RANK), (RANK + 1) % WORLD, group=g),
            dist.irecv(got, (RANK - 1) % WORLD, group=g)]
    for r in reqs:
        r.wait()
    check("isend/irecv", got, fill(5, dtype, (RANK - 1) % WORLD))


def mv_recv_any(dtype, g):
    if RANK == 0:
        seen = {}
        for _ in range(WORLD - 1):
            t = torch.empty(5, dtype=dtype)
            src = dist.recv(t, group=g)
            seen[src] = t
        assert sorted(seen) == list(range(1, WORLD)), seen.keys()
        for s, t in seen.items():
            check("recv(src=None)", t, fill(5, dtype, s))
    else:
        dist.send(fill(5, dtype, RANK), 0, group=g)


def mv_batch(dtype, g):
    got = torch.empty(5, dtype=dtype)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got, (RANK + 1) % WORLD, g),
                                   dist.P2POp(dist.isend, fill(5, dtype, RANK), (RANK - 1) % WORLD, g)])
    for r in reqs:
        r.wait()
    check("batch_isend_irecv", got, fill(5, dtype, (RANK + 1) % WORLD))


MOVES = {"broadcast": mv_broadcast, "all_gather": mv_all_gather, "_all_gather_base": mv_all_gather_base,
         "gather": mv_gather, "scatter": mv_scatter, "all_to_all_single": mv_all_to_all_single,
         "all_to_all": mv_all_to_all, "send / recv": mv_send_recv, "recv(src=None)": mv_recv_any,
         "batch_isend_irecv": mv_batch}


def move_cell(call, dtype):
    fn = MOVES[call]
    try:
        fn(dtype, None)
    except (RuntimeError, ValueError, TypeError):
        dist.barrier()
        return "no"
    try:
        fn(dtype, GLOO)
        ok = True
    except (RuntimeError, ValueError, TypeError, AssertionError):
        ok = False
    # a refusal on one rank only may leave the others' Gloo calls waiting: meet again here
    ok = bool(all_ranks(ok))
    return "yes" if ok else "ferry"


def all_ranks(flag):
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return t.item()


def tables():
    red = {op: {name: reduce_cell(op, dt) for name, dt in DTYPES.items()} for op in OPS}
    mv = {call: {name: move_cell(call, dt) for name, dt in DTYPES.items()} for call in MOVES}
    return red, mv


def parse_tables(path):
    """The two tables after the line '<!-- support tables: checked by gloo_parity.py -->'."""
    text = open(path).read().split("<!-- support tables: checked by gloo_parity.py -->", 1)[1]
    out = []
    for block in re.findall(r"((?:^\|.*\|\n)+)", text, re.M)[:2]:
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.strip().splitlines()]
        head, body = rows[0], rows[2:]
        out.append({r[0].strip("`"): dict(zip(head[1:], r[1:])) for r in body})
    return out


def format_table(title, t):
    cols = list(DTYPES)
    lines = [f"| {title} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for k, row in t.items():
        lines.append(f"| `{k}` | " + " | ".join(row[c] for c in cols) + " |")
    return "\n".join(lines)


# -- beyond the tables: layouts, factors, errors ------------------------------------------------------
def layouts():
    base = lambda: fill(12, torch.float32, RANK).reshape(3, 4)  # noqa: E731

    def transposed(g):
        t = base().t()
        dist.all_reduce(t, group=g)
        return t
    both("all_reduce transposed", transposed, closed("SUM", torch.float32, 12).reshape(3, 4).t())

    def mixed(g):  # rank 0 transposed, the others contiguous: the same values, other layouts
        t = base().t() if RANK == 0 else base().t().contiguous()
        dist.all_reduce(t, group=g)
        return t
    check("all_reduce mixed layouts", mixed(None), closed("SUM", torch.float32, 12).reshape(3, 4).t())

    def column(g):  # a column of a matrix: the rest must stay untouched
        x = torch.full((4, 3), -1.0)
        x[:, 1] = fill(4, torch.float32, RANK)
        dist.all_reduce(x[:, 1], group=g)
        return x
    want = torch.full((4, 3), -1.0)
    want[:, 1] = closed("SUM", torch.float32, 4)
    check("all_reduce column", column(None), want)

    def int16_t(g):
        t = fill(12, torch.int16, RANK).reshape(3, 4).t()
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
        return t
    check("all_reduce int16 transposed", int16_t(None), closed("MAX", torch.int16, 12).reshape(3, 4).t())

    def gather_nc(g):
        x = torch.zeros(WORLD, 8)
        outs = [x[r, ::2] for r in range(WORLD)]
        dist.all_gather(outs, fill(8, torch.float32, RANK)[::2], group=g)
        return x
    want = torch.zeros(WORLD, 8)
    for r in range(WORLD):
        want[r, ::2] = fill(8, torch.float32, r)[::2]
    both("all_gather strided in and out", gather_nc, want)

    def bcast_slice(g):
        x = torch.zeros(5, 2)
        x[:, 0] = fill(5, torch.float64, RANK)
        dist.broadcast(x[:, 0], 0, group=g)
        return x
    want = torch.zeros(5, 2, dtype=torch.float64)
    want[:, 0] = fill(5, torch.float64, 0)
    check("broadcast into a column", bcast_slice(None).double(), want)

    def rs_nc(g):
        out = torch.zeros(4, 2)
        dist._reduce_scatter_base(out[:, 1], torch.cat([fill(4, torch.float32, RANK)] * WORLD), group=g)
        return out
    want = torch.zeros(4, 2)
    want[:, 1] = closed("SUM", torch.float32, 4)
    check("_reduce_scatter_base into a column", rs_nc(None), want)

    # (a conjugate view is not checked: torch 1.13's dispatcher hands the backend a resolved copy of
    # it and drops what the backend writes there, whatever the backend)
    # receive from any source into a column, reporting the sender
    if RANK == 0:
        x = torch.zeros(3, 2)
        srcs = []
        for _ in range(WORLD - 1):
            x.zero_()
            srcs.append(dist.recv(x[:, 1]))
            check("recv(src=None) into a column", x[:, 1], fill(3, torch.float32, srcs[-1]))
        check("recv(src=None) senders", torch.tensor(sorted(srcs)), torch.arange(1, WORLD))
    else:
        dist.send(fill(3, torch.float32, RANK), 0)
    # PREMUL_SUM with a tensor factor
    t = fill(6, torch.float64, RANK)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum([torch.tensor([0.5])]))
    check("PREMUL_SUM tensor factor", t, closed("SUM", torch.float64, 6) * 0.5)


def errors():
    def expect(name, needles, fn):
        global checks
        checks += 1
        msg = refused(lambda g: fn())
        if msg is None or not all(n in msg for n in needles):
            raise AssertionError(f"rank {RANK}: {name}: message {msg!r} lacks one of {needles}")
    expect("BXOR float32", ["allreduce", "BXOR", "torch.float32", "tensors[0]"],
           lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BXOR))
    expect("MAX complex64", ["reduce", "MAX", "torch.complex64", "tensors[0]"],
           lambda: dist.reduce(torch.ones(3, dtype=torch.complex64), 0, op=dist.ReduceOp.MAX))
    expect("AVG bool", ["_reduce_scatter_base", "AVG", "torch.bool", "output_tensor"],
           lambda: dist._reduce_scatter_base(torch.ones(3, dtype=torch.bool),
                                             torch.ones(3 * WORLD, dtype=torch.bool), op=dist.ReduceOp.AVG))
    expect("PREMUL_SUM bool", ["PREMUL_SUM", "torch.bool", "tensors[0]"],
           lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=dist._make_nccl_premul_sum(2.0)))
    expect("qint8", ["tensors[0]", "torch.qint8"],
           lambda: dist.broadcast(torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8), 0))
    expect("overlapping output", ["output_tensors[0][0]", "share memory"],
           lambda: dist.all_gather([torch.empty(1).expand(3)] + [torch.empty(3)] * (WORLD - 1), torch.ones(3)))


def main():
    global GLOO
    dist.init_process_group("ferry", init_method="file://" + os.environ["FERRY_TEST_STORE"], rank=RANK,
                            world_size=WORLD)
    GLOO = dist.new_group(backend="gloo")
    red, mv = tables()
    if "--print-tables" in sys.argv:
        if RANK == 0:
            print(format_table("op \\ dtype", red) + "\n\n" + format_table("call \\ dtype", mv))
    else:
        doc_red, doc_mv = parse_tables(sys.argv[1])
        for name, doc, seen in (("reductions", doc_red, red), ("data movement", doc_mv, mv)):
            if doc != seen:
                raise AssertionError(f"rank {RANK}: docs/PYTHON.md's {name} table is wrong; observed:\n"
                                     + format_table(name, seen))
        layouts()
        errors()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {RANK}: {checks} checks passed")


if __name__ == "__main__":
    main()
