#!/usr/bin/python3
"""gloo-perf: ferry-perf's sweep through PyTorch's torch.distributed "gloo" backend on CPU tensors,
so that bench/compare can put Gloo next to ferry, Open MPI and MPICH. With --backend ferry the same
sweep runs through ferry's c10d backend (bench/torch_compare.py puts the two side by side). Same command line (the flags
below), sizes, iteration budget, formulas, table and JSON schema (ferry-perf/1) as ferry-perf.

  bench/gloo_perf.py --nranks 4 all_reduce -b 8 -e 64M -f 4 -J gloo.json

With --nranks N it starts N copies of itself on this host (rank 0 prints), rendezvous over
127.0.0.1 and GLOO_SOCKET_IFNAME=lo; under torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT set) it
joins that job instead. Run it with Debian's /usr/bin/python3 and python3-torch.

What each collective calls. torch's API is in place for most of them; where NCCL's buffer
convention needs another buffer, a copy is added and timed, as mpi-perf does where MPI lacks a form:
  all_reduce      dist.all_reduce(recv); out of place recv is first copied from send
  reduce_scatter  dist._reduce_scatter_base(recv, send) (ferry only: ProcessGroupGloo in torch 1.13
                  has no reduce_scatter; reported, skipped); in place recv is rank r's block of send
  all_gather      dist.all_gather into a list of views of recv (in place: send is rank r's block)
  alltoall        dist.all_to_all_single(recv, send); in place, recv is first copied to a scratch
                  buffer that becomes the input
  broadcast       dist.broadcast(recv, root); out of place the root first copies send to recv
  reduce          dist.reduce(buf, root). Gloo overwrites buf on every rank, so the root reduces
                  in recv (after copying send there, out of place) and the other ranks reduce a
                  scratch copy of their input, which NCCL's convention leaves untouched
  sendrecv        not run (not a torch.distributed collective)
Types: float (default), double, half, int8, uint8, int32, int64; ops sum, prod, max, min (Gloo has
no avg; torch has no uint32/uint64; Gloo has no bfloat16). Others are skipped with a comment line.

The check: each checked run fills fresh inputs from (seed, rank, index), fills the receive buffer
with a sentinel, runs one operation and compares every element with the closed form, vectorized:
small integers whose sums and products are exact in every type, so floats compare exactly.
Standard library and torch only.
"""
import argparse
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time

SCHEMA = "ferry-perf/1"
TOOL_VERSION = "0.1.0"
COLLS = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv"]
REDUCES = {"all_reduce", "reduce_scatter", "reduce"}
ROOTED = {"broadcast", "reduce"}
GATHERED = {"reduce_scatter", "all_gather", "alltoall"}  # counts are per-rank shares
UNSUPPORTED = {"reduce_scatter": "ProcessGroupGloo in torch 1.13 has no reduce_scatter",
               "sendrecv": "sendrecv is not a torch.distributed collective"}
GLOO_ONLY_UNSUPPORTED = {"reduce_scatter"}  # ferry's backend has it
ALL_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"]
TYPE_ALIASES = {"float16": "half", "float32": "float", "float64": "double", "char": "int8", "int": "int32"}
OPS = ["sum", "prod", "max", "min", "avg"]
# Largest integer each type holds exactly: the check's values keep every partial result below it.
EXACT = {"int8": 127, "uint8": 254, "int32": 2**31 - 1, "int64": 2**62, "half": 2048, "float": 2**24,
         "double": 2**53}


def parse_size(flag, text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    scale = units.get(text[-1:].upper(), 1) if text else 1
    number = text[:-1] if scale > 1 else text
    try:
        v = float(number) * scale
    except ValueError:
        v = -1
    if v < 0 or v > 1e18:
        raise UsageError(f"{flag} '{text}' is not a size: expected a number of bytes with an optional K, M or G")
    return int(v)


class UsageError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(prog="gloo-perf", description=__doc__, add_help=True,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collectives", nargs="+", metavar="COLLECTIVE")
    p.add_argument("--nranks", type=int, default=0, help="start this many ranks on this host")
    p.add_argument("--backend", default="gloo", choices=["gloo", "ferry"],
                   help="torch.distributed backend (ferry: its c10d backend, from PYTHONPATH)")
    p.add_argument("-b", "--minbytes", default="32M")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-i", "--stepbytes", default="1M")
    p.add_argument("-f", "--stepfactor", type=int, default=1)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-m", "--agg_iters", type=int, default=1)
    p.add_argument("-c", "--check", type=int, default=1)
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-r", "--root", default="0")
    p.add_argument("-z", "--blocking", type=int, default=0, choices=[0, 1])
    p.add_argument("-a", "--average", type=int, default=1, choices=[0, 1, 2, 3])
    p.add_argument("-T", "--timeout", type=int, default=0, help="seconds one operation may take (0: 300)")
    p.add_argument("-J", "--output_file", default="")
    p.add_argument("--iter_budget", default="0")
    a = p.parse_args(argv)
    colls = []
    for c in a.collectives:
        name = c[:-5] if c.endswith("_perf") else c
        name = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
                "all_to_all": "alltoall", "send_recv": "sendrecv"}.get(name, name)
        if name == "all":
            colls += COLLS
        elif name in COLLS:
            colls.append(name)
        else:
            raise UsageError(f"'{c}' is not a collective: expected one of {', '.join(COLLS)} or all")
    a.colls = colls
    a.min_bytes, a.max_bytes = parse_size("-b", a.minbytes), parse_size("-e", a.maxbytes)
    a.step_bytes, a.budget = parse_size("-i", a.stepbytes), parse_size("--iter_budget", a.iter_budget)
    if a.min_bytes > a.max_bytes:
        raise UsageError(f"-b {a.min_bytes} is larger than -e {a.max_bytes}")
    dt = TYPE_ALIASES.get(a.datatype, a.datatype)
    if dt != "all" and dt not in ALL_TYPES:
        raise UsageError(f"-d '{a.datatype}' is not a type: expected one of {', '.join(ALL_TYPES)} or all")
    a.types = ALL_TYPES if dt == "all" else [dt]
    if a.op != "all" and a.op not in OPS:
        raise UsageError(f"-o '{a.op}' is not an op: expected sum, prod, min, max, avg or all")
    a.ops = OPS if a.op == "all" else [a.op]
    a.root_all = a.root in ("all", "-1")
    if not a.root_all and not a.root.isdigit():
        raise UsageError(f"-r '{a.root}' is not a rank")
    for flag, v in (("-n", a.iters), ("-m", a.agg_iters)):
        if v < 1:
            raise UsageError(f"{flag} {v} is not valid: expected an integer >= 1")
    return a


def sizes(a):
    out, s = [], a.min_bytes
    while s <= a.max_bytes:
        out.append(s)
        nxt = (s * a.stepfactor if s else 1) if a.stepfactor > 1 else s + a.step_bytes
        if nxt <= s:
            break
        s = nxt
    return out


def iters_for(a, nbytes):
    if a.budget == 0 or nbytes == 0:
        return a.iters, a.warmup_iters
    iters = max(1, min(a.budget // (nbytes * a.agg_iters), a.iters))
    warm = a.warmup_iters if a.warmup_iters == 0 else max(1, min(a.budget // nbytes, a.warmup_iters))
    return iters, warm


def coll_counts(coll, count, elt, n):
    """(send_count, recv_count, param_count) as bench/perf/collectives.cpp: shares round to 16 bytes."""
    if coll not in GATHERED:
        return count, count, count
    unit = 1 if elt >= 16 else 16 // elt
    base = count // n // unit * unit
    if coll == "reduce_scatter":
        return base * n, base, base
    if coll == "all_gather":
        return base, base * n, base
    return base * n, base * n, base


def bus_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    return (n - 1) / n if coll in GATHERED else 1.0


def format_number(v, width):
    digits = len(str(int(v))) if v >= 1 else 0
    if digits < width - 2:
        return f"{v:{width}.2f}"
    if digits < width - 1:
        return f"{v:{width}.1f}"
    if digits < width + 1:
        return f"{v:{width}.0f}"
    return f"{v:{width}.1e}" if width >= 7 else f"{v:{width}.0e}"


class Bench:
    """One rank's sweep: buffers, timing, the check and (on rank 0) the table and JSON."""

    def __init__(self, a, torch, dist, rank, n):
        self.a, self.torch, self.dist, self.rank, self.n = a, torch, dist, rank, n
        self.tt = {"int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
                   "half": torch.float16, "float": torch.float32, "double": torch.float64}
        self.rops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
                     "min": dist.ReduceOp.MIN}
        nbytes = max(a.max_bytes, 64)
        self.send = torch.zeros(nbytes, dtype=torch.uint8)  # touched: page faults are not timed
        self.recv = torch.zeros(nbytes, dtype=torch.uint8)
        self.scratch = torch.zeros(nbytes, dtype=torch.uint8)
        self.seed = 0
        self.results, self.summaries, self.errors = [], [], []

    def print(self, text):
        if self.rank == 0:
            print(text, flush=True)

    def supports(self, coll, typ, op):
        if typ not in self.tt or (coll in UNSUPPORTED and
                                   not (self.a.backend == "ferry" and coll in GLOO_ONLY_UNSUPPORTED)):
            return False
        return coll not in REDUCES or op in self.rops

    # The operation with NCCL's buffer convention; `send`, `recv` are typed views (see the docstring).
    def op(self, coll, typ, op, root, c, send, recv, in_place):
        dist, r, n = self.dist, self.rank, self.n
        _, _, param = c
        if coll == "all_reduce":
            if not in_place:
                recv.copy_(send)
            dist.all_reduce(recv, op=self.rops[op])
        elif coll == "reduce_scatter":
            dist._reduce_scatter_base(recv, send, op=self.rops[op])
        elif coll == "all_gather":
            dist.all_gather([recv[i * param:(i + 1) * param] for i in range(n)],
                            recv[r * param:(r + 1) * param] if in_place else send)
        elif coll == "alltoall":
            if in_place:
                send = self.typed(self.scratch, typ, param * n)
                send.copy_(recv)
            dist.all_to_all_single(recv, send)
        elif coll == "broadcast":
            if r == root and not in_place:
                recv.copy_(send)
            dist.broadcast(recv, root)
        elif coll == "reduce":
            if r == root:
                if not in_place:
                    recv.copy_(send)
                dist.reduce(recv, root, op=self.rops[op])
            else:
                work = self.typed(self.scratch, typ, param)
                work.copy_(recv if in_place else send)
                dist.reduce(work, root, op=self.rops[op])
        if self.a.blocking:
            dist.barrier()

    def typed(self, buf, typ, count, offset_bytes=0):
        elt = self.torch.empty(0, dtype=self.tt[typ]).element_size()
        return buf[offset_bytes:offset_bytes + count * elt].view(self.tt[typ])

    def views(self, coll, typ, c, in_place, index, total, send_place=0, recv_place=0):
        """(send, recv) for operation number `index`: nccl-tests' shift walks through the buffers; out of
        place, the opening warm-up moves each side further by its place (bytes)."""
        steps = self.a.max_bytes // total if total else 1
        shift = total * (index % steps) if steps else 0
        send_count, recv_count, param = c
        if in_place and coll == "reduce_scatter":  # NCCL's in place: recv is rank r's block of send
            send = self.typed(self.recv, typ, send_count, shift)
            return send, send[self.rank * param:(self.rank + 1) * param]
        recv = self.typed(self.recv, typ, recv_count, shift + recv_place)
        send = recv if in_place else self.typed(self.send, typ, send_count, shift + send_place)
        return send, recv

    def measure(self, coll, typ, op, root, c, in_place, elt):
        total = max(c[0], c[1]) * elt
        iters, warm = iters_for(self.a, total)
        agg = self.a.agg_iters
        calls = [self.views(coll, typ, c, in_place, i, total) for i in range(min((iters + warm) * agg, 64))]
        for i in range(warm * agg):
            self.op(coll, typ, op, root, c, *calls[i % len(calls)], in_place)
        self.dist.barrier()
        t0 = time.perf_counter()
        for i in range(iters * agg):
            self.op(coll, typ, op, root, c, *calls[i % len(calls)], in_place)
        seconds = (time.perf_counter() - t0) / (iters * agg)
        t = self.torch.tensor([seconds], dtype=self.torch.float64)
        avg = self.a.average
        if avg == 0 and self.rank != 0:
            t.zero_()
        self.dist.all_reduce(t, op=self.rops["min" if avg == 2 else "max" if avg == 3 else "sum"])
        seconds = t.item() / (self.n if avg == 1 else 1)
        nbytes = c[2] * elt * (self.n if coll in GATHERED else 1)
        alg = nbytes / 1e9 / seconds if seconds > 0 else 0.0
        m = {"time": seconds * 1e6, "alg_bw": alg, "bus_bw": alg * bus_factor(coll, self.n), "nwrong": None,
             "wrong_per_rank": None, "iterations": iters, "warmup_iterations": warm}
        if self.a.check > 0:
            self.check(coll, typ, op, root, c, in_place, elt, m)
        return m

    # -- the check ---------------------------------------------------------------------------------
    CHUNK = 1 << 20  # elements filled and compared at a time: temporaries stay small

    def inputs(self, coll, typ, op, src, idx):
        """Rank src's (int or int64 tensor) input elements at indices idx (int64 tensor), as int64."""
        torch, n = self.torch, self.n
        phase = (idx * 40503 + self.seed * 977) % 65521
        if coll in REDUCES:
            if op == "sum":
                period = max(1, min(16, EXACT[typ] // n - 1))
                return 1 + (phase + 3 * src) % period
            if op == "prod":  # at most six ranks contribute a 2: the product stays within int8
                return torch.where(((phase + src) % 3 == 0) & (torch.as_tensor(src) < 6), 2, 1)
            return (phase + src) % (n + 1)
        return (phase + 101 * src) % min(EXACT[typ], 4096)

    def reduced(self, coll, typ, op, idx):
        """Elements idx of every rank's input combined with op, in rank order."""
        torch = self.torch
        out = self.inputs(coll, typ, op, 0, idx)
        for src in range(1, self.n):
            v = self.inputs(coll, typ, op, src, idx)
            out = (out + v if op == "sum" else out * v if op == "prod" else
                   torch.maximum(out, v) if op == "max" else torch.minimum(out, v))
        return out

    def expected(self, coll, typ, op, root, param, idx):
        """What element idx of this rank's receive buffer must hold after the operation."""
        r = self.rank
        if coll == "all_reduce" or (coll == "reduce" and r == root):
            return self.reduced(coll, typ, op, idx)
        if coll == "reduce_scatter":  # this rank's block of the reduced vector
            return self.reduced(coll, typ, op, r * param + idx)
        if coll == "all_gather":
            return self.inputs(coll, typ, op, idx // param, idx % param)
        if coll == "alltoall":
            return self.inputs(coll, typ, op, idx // param, r * param + idx % param)
        if coll == "broadcast":
            return self.inputs(coll, typ, op, root, idx)
        return None  # reduce off the root: see check()

    def check(self, coll, typ, op, root, c, in_place, elt, m):
        torch, r, n = self.torch, self.rank, self.n
        send_count, recv_count, param = c
        send, recv = self.views(coll, typ, c, in_place, 0, max(send_count, recv_count) * elt)
        self.seed += 1
        sentinel = 255 if typ == "uint8" else -1
        recv.fill_(sentinel)
        if in_place and coll == "all_gather":
            send = recv[r * param:(r + 1) * param]
        for lo in range(0, send_count, self.CHUNK):
            idx = torch.arange(lo, min(lo + self.CHUNK, send_count), dtype=torch.int64)
            send[lo:lo + len(idx)].copy_(self.inputs(coll, typ, op, r, idx))
        self.op(coll, typ, op, root, c, send, recv, in_place)
        wrong = 0
        for lo in range(0, recv_count, self.CHUNK):
            idx = torch.arange(lo, min(lo + self.CHUNK, recv_count), dtype=torch.int64)
            want = self.expected(coll, typ, op, root, param, idx)
            if want is None:  # reduce off the root leaves recv alone: the sentinel, or in place the input
                want = self.inputs(coll, typ, op, r, idx) if in_place else torch.full_like(idx, sentinel)
            wrong += int((recv[lo:lo + len(idx)].to(torch.int64) != want).sum().item())
        per_rank = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
        self.dist.all_gather(per_rank, torch.tensor([wrong], dtype=torch.int64))
        m["wrong_per_rank"] = [int(w.item()) for w in per_rank]
        m["nwrong"] = sum(m["wrong_per_rank"])

    # -- the sweep ---------------------------------------------------------------------------------
    def run(self):
        a = self.a
        for coll in a.colls:
            summary = {"collective": coll, "errors": 0, "busbw": []}
            self.summaries.append(summary)
            self.print(f"#\n# Collective test starting: {coll}\n#")
            self.print(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place"
                       f"                       in-place          ")
            self.print("# " + "  ".join(f"{h:>{w}}" for h, w in zip(
                ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                 "busbw", "#wrong"], [10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6])))
            self.print("# " + "  ".join(f"{h:>{w}}" for h, w in zip(
                ["(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""],
                [10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6])))
            ops = a.ops if coll in REDUCES else ["sum"]
            roots = (list(range(self.n)) if a.root_all else [int(a.root)]) if coll in ROOTED else [-1]
            for typ in a.types:
                for op in ops:
                    if not self.supports(coll, typ, op):
                        why = UNSUPPORTED.get(coll, "Gloo through torch does not run it")
                        self.print(f"# skipping {typ}{' ' + op if coll in REDUCES else ''}: {why}")
                        continue
                    elt = self.torch.empty(0, dtype=self.tt[typ]).element_size()
                    for root in roots:
                        self.opening_warmup(coll, typ, op, root, elt)
                        for size in sizes(a):
                            self.row(coll, typ, op, root, size, elt, summary)
            self.print(f"# {'Out of bounds values':<20} : {summary['errors']} "
                       f"{'FAILED' if summary['errors'] else 'OK'}")
            bw = summary["busbw"]
            self.print(f"# {'Avg bus bandwidth':<20} : {sum(bw) / len(bw) if bw else 0:g} ")
            self.print(f"#\n# Collective test concluded: {coll}")

    def opening_warmup(self, coll, typ, op, root, elt):
        """ferry-perf's opening warm-up (nccl-tests' and in place at the largest size): calls at the largest
        size out of place and in place, then at the smallest out of place. The largest out-of-place calls
        walk a smaller side (all_gather's input, reduce_scatter's output) through its whole buffer, as
        ferry-perf's do."""
        every = list(sizes(self.a))
        for run, (size, in_place) in enumerate(((every[-1], False), (every[-1], True), (every[0], False))
                                               if every else ()):
            c = coll_counts(coll, size // elt, elt, self.n)
            if c[2] == 0:
                continue
            total = max(c[0], c[1]) * elt
            _, warm = iters_for(self.a, total)
            warm = max(warm, min(2, self.a.warmup_iters))  # twice at least, as ferry-perf's
            send_places, recv_places = total // (c[0] * elt), total // (c[1] * elt)
            for place in range(max(send_places, recv_places) if run == 0 else 1):
                for i in range(warm * self.a.agg_iters):
                    send, recv = self.views(coll, typ, c, in_place, i, total,
                                            (place % send_places) * c[0] * elt, (place % recv_places) * c[1] * elt)
                    self.op(coll, typ, op, root, c, send, recv, in_place)

    def row(self, coll, typ, op, root, size, elt, summary):
        c = coll_counts(coll, size // elt, elt, self.n)
        if c[2] == 0:  # Gloo dies of SIGFPE on an empty all_gather: rows of 0 elements make no call
            self.print(f"# skipping {size} B: 0 elements per rank")
            return
        out = self.measure(coll, typ, op, root, c, False, elt)
        inp = self.measure(coll, typ, op, root, c, True, elt)
        row = {"collective": coll, "size": max(c[0], c[1]) * elt, "count": c[2], "type": typ,
               "redop": op if coll in REDUCES else "none", "root": root, "out_of_place": out, "in_place": inp}
        self.results.append(row)
        text = f"{row['size']:>12}  {c[2]:>12}  {typ:>8}  {row['redop']:>6}  {root:>6}"
        for m in (out, inp):
            summary["busbw"].append(m["bus_bw"])
            summary["errors"] += sum(1 for w in (m["wrong_per_rank"] or []) if w)
            wrong = "N/A" if m["nwrong"] is None else str(m["nwrong"])
            text += (f"  {format_number(m['time'], 7)}  {format_number(m['alg_bw'], 6)}  "
                     f"{format_number(m['bus_bw'], 6)}  {wrong:>6}")
        self.print(text)
        for name, m in (("out-of-place", out), ("in-place", inp)):
            if m["nwrong"]:
                self.print(f"#   wrong elements per rank ({name}): " + " ".join(map(str, m["wrong_per_rank"])))


def library_name(torch, backend):
    """'Gloo (torch 1.13.1)': Debian's package version where dpkg knows it (its torch says 1.13.0a0)."""
    try:
        v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torch"], capture_output=True,
                           text=True, check=True).stdout.split("+")[0]
    except (OSError, subprocess.CalledProcessError):
        v = ""
    if backend == "ferry":
        import ferry
        return f"ferry {ferry.__version__} (c10d, torch {v or torch.__version__})"
    return f"Gloo (torch {v or torch.__version__})"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "cpu " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def write_json(a, bench, argv, start, library, devices):
    bws = [bw for s in bench.summaries for bw in s["busbw"]]
    total_errors = sum(s["errors"] for s in bench.summaries)
    config = {"nthreads": 1, "ngpus": 1, "minimum_bytes": a.min_bytes, "maximum_bytes": a.max_bytes}
    config.update({"step_factor": a.stepfactor} if a.stepfactor > 1 else {"step_bytes": a.step_bytes})
    config.update({"warmup_iters": a.warmup_iters, "iterations": a.iters, "aggregated_iterations": a.agg_iters,
                   "run_cycles": 1, "validation": a.check, "blocking_collectives": a.blocking == 1,
                   "local_register": 0,
                   "average": a.average, "timeout": a.timeout, "iter_budget": a.budget,
                   "datatype": a.types[0] if len(a.types) == 1 else "all",
                   "op": a.ops[0] if len(a.ops) == 1 else "all", "root": "all" if a.root_all else int(a.root)})
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("FERRY_", "UCX_", "NCCL_", "GLOO_", "OMP_")) and
           not any(w in k for w in ("SECRET", "TOKEN", "PASSWORD", "KEY"))}
    doc = {"schema": SCHEMA, "tool": "gloo-perf", "tool_version": TOOL_VERSION, "library": library,
           "start_time": start, "args": argv, "env": env, "nranks": bench.n, "collectives": a.colls,
           "config": config, "host": devices[0]["hostname"], "devices": devices, "results": bench.results,
           "per_collective": [{"collective": s["collective"],
                               "out_of_bounds": {"count": s["errors"], "okay": s["errors"] == 0},
                               "average_bus_bandwidth": {"bandwidth": sum(s["busbw"]) / len(s["busbw"])
                                                         if s["busbw"] else 0.0, "okay": "unchecked"}}
                              for s in bench.summaries],
           "out_of_bounds": {"count": total_errors, "okay": total_errors == 0},
           "average_bus_bandwidth": {"bandwidth": sum(bws) / len(bws) if bws else 0.0, "okay": "unchecked"},
           "memory": None, "errors": bench.errors, "end_time": now()}
    with open(a.output_file, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def now():
    return time.strftime("%Y-%m-%d %H:%M:%S")


def rank_main(a, argv):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)  # one core per rank, as the MPI ranks and ferry's use
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    start = now()
    if a.backend == "ferry":
        import ferry.torch_backend  # noqa: F401  registers "ferry"
    dist.init_process_group(a.backend, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=a.timeout or 300))
    if not a.root_all and int(a.root) >= n:
        if rank == 0:
            print(f"gloo-perf: -r {a.root} is not a rank: this job has {n} ranks", file=sys.stderr)
        return 2
    library = library_name(torch, a.backend)
    mine = {"rank": rank, "group": 0, "pid": os.getpid(), "hostname": socket.gethostname().split(".")[0],
            "device": "cpu", "device_info": cpu_model()}
    devices = [None] * n
    dist.all_gather_object(devices, mine)
    bench = Bench(a, torch, dist, rank, n)
    bench.print(f"# gloo-perf version {TOOL_VERSION}, library {library}")
    step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.step_bytes}(bytes)"
    bench.print(f"# nThread 1 nGpus 1 minBytes {a.min_bytes} maxBytes {a.max_bytes} step: {step} warmup iters: "
                f"{a.warmup_iters} iters: {a.iters} agg iters: {a.agg_iters} validation: {a.check} graph: 0")
    if a.budget:
        bench.print(f"# Iteration budget: {a.budget} bytes per size: fewer iterations where iters x agg iters x "
                    f"size exceeds it")
    bench.print("#\n# Using devices")
    for d in devices:
        bench.print(f"#  Rank {d['rank']:2} Group  0 Pid {d['pid']:6} on {d['hostname']:>10} device {d['device_info']}")
    try:
        bench.run()
    except RuntimeError as e:  # a Gloo failure (peer gone, timeout): report it, as ferry-perf does
        bench.errors.append(str(e).splitlines()[0])
        print(f"gloo-perf: rank {rank}: {bench.errors[-1]}", file=sys.stderr)
    wrong = sum(s["errors"] for s in bench.summaries)
    if rank == 0:
        bench.print("#" if bench.errors else "#\n")
        if a.output_file:
            try:
                write_json(a, bench, argv, start, library, devices)
            except OSError as e:
                print(f"gloo-perf: cannot write {a.output_file}: {e}", file=sys.stderr)
                return 1
    if not bench.errors:
        dist.destroy_process_group()
    return 1 if bench.errors or wrong else 0


def launch(a, argv):
    """Starts a.nranks copies of this script as ranks 0..N-1; returns the first failure's status."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(a.nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.nranks), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        out = None if r == 0 else subprocess.DEVNULL
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env, stdout=out))
    status, failed_at = 0, None
    while any(p.poll() is None for p in procs):
        for p in procs:
            if p.poll() not in (None, 0) and status == 0:
                status, failed_at = p.returncode, time.monotonic()
        if failed_at and time.monotonic() - failed_at > 3:  # let the others report, then stop them
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    for p in procs:
        if p.returncode != 0 and status == 0:
            status = p.returncode
    return status if status >= 0 else 1


def main():
    argv = sys.argv[1:]
    try:
        a = parse_args(argv)
    except UsageError as e:
        print(f"gloo-perf: {e}", file=sys.stderr)
        return 2
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return rank_main(a, argv)
    if a.nranks < 1:
        print("gloo-perf: give --nranks N, or run it under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
              file=sys.stderr)
        return 2
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
