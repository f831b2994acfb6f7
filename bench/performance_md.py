#!/usr/bin/python3
"""Writes docs/PERFORMANCE.md from one bench/compare run, and checks issues 4's and 36's targets.

  bench/performance_md.py [RESULTS_DIR] [-o docs/PERFORMANCE.md] [--charts docs/perf] [--strict]

RESULTS_DIR (default bench/results) is where bench/compare left compare-run.json, the runs' JSON
files, the memcpy rates and the charts. The page gets: the machine (lscpu, kernel, memory, as
recorded by that run), the libraries and their versions and settings, one core's memcpy rate
measured at the start and end of the run (and that of two processes copying at once, where the
run measured it), the exact command, one table per rank count and
collective with every library and ferry's ratio to the best peer, the charts (copied to
--charts, linked relatively), a section for the lead to fill in, and the targets, each PASS or FAIL
with its numbers (also printed on stdout; --strict exits 1 when one fails): issue 36's on ferry with
plain buffers (the default, run "ferry"), issue 4's on ferry with registered buffers (run
"ferry-reg", where the run has one). Standard library only; the table logic is
bench/compare_table.py's.
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_table  # noqa: E402  (bench/ is not a package)

LIBRARY_ORDER = ["ferry", "ferry-reg", "ompi", "ompi-nocma", "mpich", "gloo"]
# ferry's columns: plain buffers (the default; what users pass) and registered ones.
FERRY_KEYS = ("ferry", "ferry-reg")
PLACEHOLDER = "_To be written: where the time goes at each size, measured, and what ferry changes next._"


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"performance_md.py: cannot read {what} {path}: {e}")


def size_label(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale} {unit}"
    return f"{b} B"


def lscpu_fields(text):
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def memcpy_rate(doc, size=256 << 20):
    """Best GB/s at `size` (else at the largest size measured), or None."""
    if not doc:
        return None
    rows = doc.get("results", [])
    exact = [r for r in rows if r["size"] == size] or sorted(rows, key=lambda r: r["size"])[-1:]
    return exact[0]["best_gbps"] if exact else None


class Run:
    """One bench/compare run: the record, the per-library documents per rank count."""

    def __init__(self, results):
        self.dir = results
        self.record = load_json(os.path.join(results, "compare-run.json"), "the run record")
        self.docs = {}  # (nranks, key) -> ferry-perf/1 document
        for r in self.record["runs"]:
            path = os.path.join(results, r["json"])
            if os.path.exists(path):
                self.docs[(r["nranks"], r["key"])] = compare_table.load(path)
        self.memcpy = {}
        for when, name in self.record["memcpy"].items():
            path = os.path.join(results, name)
            self.memcpy[when] = load_json(path, "memcpy rate") if os.path.exists(path) else None
        rates = [memcpy_rate(d) for d in self.memcpy.values() if d]
        self.rate = max(rates) if rates else None  # the machine's best: the strictest ceiling
        # Two processes copying at once (memcpy-rate -P 2), in runs that measured it.
        self.memcpy2 = {}
        for when, name in self.record.get("memcpy_concurrent", {}).items():
            path = os.path.join(results, name)
            self.memcpy2[when] = load_json(path, "memcpy rate, 2 processes") if os.path.exists(path) else None
        # One process handing data to another through shared memory (memcpy-rate -H), where measured.
        self.handoff = {}
        for when, name in self.record.get("memcpy_handoff", {}).items():
            path = os.path.join(results, name)
            self.handoff[when] = load_json(path, "hand-off rate") if os.path.exists(path) else None
        # One process reading another's buffer with cross-memory attach (memcpy-rate -C), where measured.
        self.cma = {}
        for when, name in self.record.get("memcpy_cma", {}).items():
            path = os.path.join(results, name)
            self.cma[when] = load_json(path, "cross-memory read rate") if os.path.exists(path) else None

    def keys(self, n):
        return [k for k in LIBRARY_ORDER if (n, k) in self.docs]

    def tables(self, n):
        """compare_table.side_by_side for rank count n, ferry first; ([keys], groups)."""
        keys = self.keys(n)
        if not keys or keys[0] != "ferry" or len(keys) <= self.start(n):
            return keys, []
        return keys, compare_table.side_by_side([self.docs[(n, k)] for k in keys])

    def start(self, n):
        """Index of the first peer in tables(n): after ferry's columns."""
        return sum(1 for k in self.keys(n) if k in FERRY_KEYS)

    def column(self, n, key):
        """Index of ferry's run `key` in tables(n), or None."""
        keys = self.keys(n)
        return keys.index(key) if key in keys else None


# -- issue 4's targets ---------------------------------------------------------------------------
def find(run, n, coll, size, col=0):
    """(ferry measurement, best peer name, best peer measurement, ratio) at rank count n for ferry's
    column `col` of the tables, or None."""
    keys, groups = run.tables(n)
    if col is None:
        return None
    for (c, _, _, _), lines in groups:
        if c != coll:
            continue
        for s, _, ms in lines:
            if s == size:
                i, peer = compare_table.best_peer(ms, run.start(n))
                name = compare_table.short_name(run.docs[(n, keys[i])]["library"]) if i else None
                return ms[col], name, peer, compare_table.ratio(ms[col], peer, size)
    return None


def rows_at_least(run, n, coll, min_size, col=0):
    keys, groups = run.tables(n)
    out = []
    if col is None:
        return out
    for (c, _, _, _), lines in groups:
        if c == coll:
            for s, _, ms in lines:
                if s >= min_size and s > 0:
                    i, peer = compare_table.best_peer(ms, run.start(n))
                    out.append((s, compare_table.ratio(ms[col], peer, s)))
    return out


def cliffs(run, n, col=0):
    """[(collective, size, next size, busbw drop factor)] of ferry's column `col` at n ranks where the
    bus bandwidth falls by more than 2x from one size to the next larger one."""
    keys, groups = run.tables(n)
    out = []
    if col is None:
        return out
    for (c, _, _, _), lines in groups:
        sized = [(s, ms[col]) for s, _, ms in lines if s > 0 and ms[col] is not None and ms[col]["bus_bw"] > 0]
        for (s0, m0), (s1, m1) in zip(sized, sized[1:]):
            if m0["bus_bw"] > 2 * m1["bus_bw"]:
                out.append((c, s0, s1, m0["bus_bw"] / m1["bus_bw"]))
    return out


def ompi_time(run, n, coll, size):
    """Open MPI's better setup's out-of-place time at that row, or None."""
    times = [r["out_of_place"]["time"] for k in run.keys(n) if k.startswith("ompi")
             for r in run.docs[(n, k)]["results"] if r["collective"] == coll and r["size"] == size]
    return min(times) if times else None


def targets(run):
    """[(verdict, text)]: PASS, FAIL or MISSING (the run has no such data). Issue 36's on ferry's
    plain buffers, then issue 4's on its registered buffers where the run has them."""
    out = []
    plain = "plain buffers"
    for n in (2, 4):
        for coll in compare_table.ORDER[:6]:
            rows = [(s, r) for s, r in rows_at_least(run, n, coll, 64 << 10) if r is not None]
            what = f"{n} ranks {coll} >= 64 KiB, {plain}: ferry / best peer >= 1.0 at every size"
            if coll in ("all_reduce", "reduce_scatter"):
                rows_1m = [(s, r) for s, r in rows if s >= 1 << 20]
                what_1m = f"{n} ranks {coll} >= 1 MiB, {plain}: ferry / best peer >= 1.5 at every size"
                if rows_1m:
                    worst = min(rows_1m, key=lambda x: x[1])
                    out.append(("PASS" if worst[1] >= 1.5 else "FAIL",
                                f"{what_1m}: worst {worst[1]:.2f} at {size_label(worst[0])} over {len(rows_1m)} sizes"))
                else:
                    out.append(("MISSING", what_1m + " (no rows with a peer in this run)"))
            if not rows:
                out.append(("MISSING", what + " (no rows with a peer in this run)"))
                continue
            worst = min(rows, key=lambda x: x[1])
            out.append(("PASS" if worst[1] >= 1.0 else "FAIL",
                        f"{what}: worst {worst[1]:.2f} at {size_label(worst[0])} over {len(rows)} sizes"))
        for coll in ("all_reduce", "broadcast"):
            f, o = find(run, n, coll, 8), ompi_time(run, n, coll, 8)
            bound = 1.0 if n == 2 else 2.0
            what = f"{n} ranks {coll} 8 B, {plain}: ferry time <= {bound:g} x Open MPI's"
            if f is None or o is None:
                out.append(("MISSING", what + " (no 8 B row of ferry or Open MPI)"))
            else:
                t = f[0]["time"]
                out.append(("PASS" if t <= bound * o else "FAIL", f"{what}: ferry {t:.2f} us, Open MPI {o:.2f} us"))
    found = cliffs(run, 4)
    what = f"4 ranks, {plain}: no collective's busbw falls by more than 2x from one size to the next"
    if not run.tables(4)[1]:
        out.append(("MISSING", what + " (no 4-rank run)"))
    elif found:
        out.append(("FAIL", what + ": " + ", ".join(f"{c} {size_label(a)} -> {size_label(b)} {x:.1f}x"
                                                     for c, a, b, x in found)))
    else:
        out.append(("PASS", what))
    reg = "ferry-reg" if any(run.column(n, "ferry-reg") is not None for n in (2, 4)) else "ferry"
    label = " (registered buffers)" if reg == "ferry-reg" else ""

    def ratio_target(n, coll, size, want):
        f = find(run, n, coll, size, run.column(n, reg))
        what = f"{n} ranks {coll} {size_label(size)}{label}: ferry busbw / best peer >= {want}"
        if f is None or f[3] is None:
            out.append(("MISSING", what + " (no such row with a peer in this run)"))
            return
        ferry, name, peer, r = f
        out.append(("PASS" if r >= want else "FAIL",
                    f"{what}: {r:.2f} (ferry {ferry['bus_bw']:.3f} GB/s, {name} {peer['bus_bw']:.3f} GB/s)"))

    def range_target(n, coll, min_size, want, what):
        rows = [(s, r) for s, r in rows_at_least(run, n, coll, min_size, run.column(n, reg)) if r is not None]
        if not rows:
            out.append(("MISSING", f"{what} (no rows with a peer in this run)"))
            return
        worst = min(rows, key=lambda x: x[1])
        ok = all(r >= want for _, r in rows)
        out.append(("PASS" if ok else "FAIL",
                    f"{what}: worst {worst[1]:.2f} at {size_label(worst[0])} over {len(rows)} sizes"))

    for size, want in ((256 << 20, 3.0), (16 << 20, 2.0), (1 << 20, 1.5)):
        ratio_target(2, "all_reduce", size, want)
    f = find(run, 2, "all_reduce", 8, run.column(2, reg))
    what = f"2 ranks all_reduce 8 B{label}: ferry time <= Open MPI's"
    o = ompi_time(run, 2, "all_reduce", 8)
    if f is None or o is None:
        out.append(("MISSING", what + " (no 8 B row of ferry or Open MPI)"))
    else:
        t = f[0]["time"]
        out.append(("PASS" if t <= o else "FAIL", f"{what}: ferry {t:.2f} us, Open MPI {o:.2f} us"))
    for coll in ("all_gather", "reduce_scatter", "alltoall", "broadcast"):
        range_target(2, coll, 16 << 20, 2.0, f"2 ranks {coll} >= 16 MiB{label}: ferry / best peer >= 2 at every size")
    for coll in compare_table.ORDER[:6]:
        range_target(4, coll, 1 << 20, 1.5, f"4 ranks {coll} >= 1 MiB{label}: ferry / best peer >= 1.5 at every size")
        range_target(4, coll, 1, 1 / 1.1,
                     f"4 ranks {coll}, every size{label}: ferry at most 10% slower than the best peer (ratio >= 0.91)")
    f = find(run, 2, "all_reduce", 256 << 20, run.column(2, reg))
    what = f"2 ranks all_reduce 256 MiB{label}: ferry busbw >= 40% of one core's memcpy rate"
    if f is None or run.rate is None:
        out.append(("MISSING", what + " (no 256 MiB row or no memcpy rate)"))
    else:
        bw = f[0]["bus_bw"]
        out.append(("PASS" if bw >= 0.4 * run.rate else "FAIL",
                    f"{what}: {bw:.3f} GB/s = {100 * bw / run.rate:.0f}% of {run.rate:.2f} GB/s"))
    return out


# -- the page ------------------------------------------------------------------------------------
def rate_rows(docs):
    """(size, start row, end row) for every size a memcpy-rate document of the run measured (None where
    the start or the end did not)."""
    def row(when, size):
        d = docs.get(when)
        return next((x for x in d["results"] if x["size"] == size), None) if d else None
    sizes = sorted({r["size"] for d in docs.values() if d for r in d["results"]})
    return [(s, row("start", s), row("end", s)) for s in sizes]


def best_first(r):
    return f"{r['best_gbps']:.2f} GB/s (median {r['median_gbps']:.2f})" if r else "-"


def machine_section(run):
    m = run.record.get("machine", {})
    cpu = lscpu_fields(m.get("lscpu", ""))
    lines = ["## The machine", ""]
    rows = [("CPU", cpu.get("Model name", "?")),
            ("cores", f"{cpu.get('CPU(s)', '?')} CPUs: {cpu.get('Socket(s)', '?')} socket(s) x "
                      f"{cpu.get('Core(s) per socket', '?')} core(s) x {cpu.get('Thread(s) per core', '?')} "
                      f"thread(s)"),
            ("caches", ", ".join(f"{k} {cpu[k]}" for k in ("L1d cache", "L1i cache", "L2 cache", "L3 cache")
                                 if k in cpu) or "?"),
            ("NUMA nodes", cpu.get("NUMA node(s)", "?")),
            ("hypervisor", cpu.get("Hypervisor vendor", "none")),
            ("memory", m.get("memory", "?")),
            ("kernel", m.get("kernel", "?")),
            ("system", m.get("system", "?")),
            ("load average", "start {start}, end {end} (1, 5, 15 min; other work on the machine slows every "
                             "library)".format(**m["load_average"]) if "load_average" in m else "?")]
    lines += ["| | |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in rows] + [""]
    lines += ["One core's memcpy rate (`bench/memcpy_rate.cpp`: best of repeated copies between two pre-faulted "
              "buffers; GB/s = 10⁹ bytes copied per second, the memory moves twice that), measured at the start "
              "and the end of the run:", "", "| size | start | end |", "| --- | --- | --- |"]
    for s, start, end in rate_rows(run.memcpy):
        lines.append(f"| {size_label(s)} | {best_first(start)} | {best_first(end)} |")
    if run.rate:
        lines += ["", f"The memory limit used below: **{run.rate:.2f} GB/s** (256 MiB, the better of the two)."]
    if any(run.memcpy2.values()):
        lines += ["", "Two processes copying at once (`memcpy-rate -P 2`: each between buffers of its own, every "
                  "round started together and lasting until the slower copy ends), GB/s per process. Out of place, "
                  "each of 2 ranks of an all_gather or alltoall writes its whole output (its own block and the "
                  "peer's), so their bus bandwidth cannot pass half of this rate. Every library's sweep walks through "
                  "buffers sized for its largest call (nccl-tests' shift: consecutive calls use consecutive slices of the "
                  "size), so calls large enough to cover those buffers in a size's warm-up and timed calls work out of "
                  "the cache, and the rate at the largest size is their bound:", "",
                  "| size | start | end | bound of 2-rank all_gather, alltoall |", "| --- | --- | --- | --- |"]
        for s, start, end in rate_rows(run.memcpy2):
            best = max((r["best_gbps"] for r in (start, end) if r), default=None)
            bound = f"{best / 2:.2f} GB/s" if best else "-"
            lines.append(f"| {size_label(s)} | {best_first(start)} | {best_first(end)} | {bound} |")
    if any(run.handoff.values()):
        lines += ["", "Handing data from one core to the other (`memcpy-rate -H`: one process copies into a buffer in "
                  "shared memory, then another copies it out, in turn; GB/s = 10⁹ bytes handed over per second, both "
                  "copies counted in the time). This is what every path through a shared buffer pays with plain "
                  "buffers (ferry's mailboxes, Open MPI without CMA, MPICH): each line is written on one core and read "
                  "on the other. The median is the figure to read; a round whose two processes shared one core "
                  "keeps the data in its cache and makes the best look far higher:", "",
                  "| size | start | end |", "| --- | --- | --- |"]
        for s, start, end in rate_rows(run.handoff):
            median = [f"median {r['median_gbps']:.2f} GB/s (best {r['best_gbps']:.2f})" if r else "-"
                      for r in (start, end)]
            lines.append(f"| {size_label(s)} | {median[0]} | {median[1]} |")
    if any(run.cma.values()):
        lines += ["", "One process reading another's buffer with cross-memory attach (`memcpy-rate -C`: "
                  "`process_vm_readv` of a buffer in the other process into one of its own, as Open MPI's CMA and "
                  "ferry's single-copy plans read a peer's plain buffer; GB/s = 10⁹ bytes read per second). The "
                  "kernel pins the source's pages one by one before it copies, so a source on 4 KiB pages reads "
                  "at about half the rate of one on 2 MiB pages; ferry moves the plain buffers peers read onto "
                  "huge pages from their second call (`FERRY_HUGE_PAGES`), the peers read them as they are:", "",
                  "| size | source pages | start | end |", "| --- | --- | --- | --- |"]
        keys = sorted({(r["size"], r.get("source_page_kib", 4)) for d in run.cma.values() if d for r in d["results"]})
        for size, kib in keys:
            cells = []
            for when in ("start", "end"):
                d = run.cma.get(when)
                r = next((x for x in d["results"] if x["size"] == size and x.get("source_page_kib", 4) == kib),
                         None) if d else None
                cells.append(best_first(r))
            lines.append(f"| {size_label(size)} | {'2 MiB' if kib == 2048 else f'{kib} KiB'} | {cells[0]} | "
                         f"{cells[1]} |")
    return lines + [""]


def libraries_section(run):
    lines = ["## Libraries and settings", "", "| library | version | ranks | launched as |", "| --- | --- | ---: | --- |"]
    for r in sorted(run.record["runs"], key=lambda r: (LIBRARY_ORDER.index(r["key"]) if r["key"] in LIBRARY_ORDER
                                                       else 99, r["nranks"])):
        d = run.docs.get((r["nranks"], r["key"]))
        library = d["library"] if d else r["key"]
        launcher = r["launcher"].replace("|", "\\|")
        failed = f" (exit status {r['status']})" if r["status"] else ""
        lines.append(f"| {compare_table.short_name(library)} | {library} | {r['nranks']} | `{launcher}`{failed} |")
    if any(r["key"] == "ferry-reg" for r in run.record["runs"]):
        lines += ["", "Buffers: every library gets `posix_memalign` buffers, the plain memory users pass. ferry runs twice: "
                  "*ferry* as they come (`ferry-perf -R 0`, the default) and *ferry (registered)* with the same "
                  "buffers registered once before the sweep (`-R 2`: `Comm::registerBuffer`, as `ncclCommRegister` "
                  "does, making them shared memory the peers read in place). The MPIs keep plain buffers, their best "
                  "(Open MPI's `MPI_Alloc_mem` buffers were 10 times slower; Gloo has no allocator of its own)."]
    elif run.record.get("settings", {}).get("register"):
        lines += ["", "Buffers: `bench/compare --register`: ferry's come from `ferry::hostAlloc` (`-R 1`: shared memory "
                  "the ranks of the host map and read in place); the peers keep `posix_memalign`, their best here "
                  "(Open MPI's `MPI_Alloc_mem` buffers were 10 times slower; Gloo has no allocator of its own)."]
    env = run.record.get("settings", {}).get("env", {})
    if env:
        lines += ["", "Environment: " + ", ".join(f"`{k}={v}`" for k, v in sorted(env.items())) + "."]
    lines += ["", "docs/BENCHMARKS.md (*Side by side*) says why each library runs with these settings: each gets "
              "the best shared-memory setup that works on this machine."]
    return lines + [""]


SUMMARY_SIZES = [8, 64 << 10, 1 << 20, 16 << 20, 256 << 20]


def summary_lines(run):
    """ferry / best peer per rank count, collective and a few sizes: the page at a glance; with
    registered buffers in the run, each cell is "plain / registered"."""
    both = any(run.column(n, "ferry-reg") is not None for n in run.record["ranks"])
    out = ["## Summary", "", "ferry's bus bandwidth over the best peer's (above 1: ferry is faster; bold below 1; "
           "`-`: not in this run)" + (", as *plain / registered*: ferry with the plain buffers users pass (the "
                                      "default, `ferry-perf -R 0`) and with the same buffers registered "
                                      "(`Comm::registerBuffer`, `-R 2`)" if both else "") + ":", ""]
    for n in run.record["ranks"]:
        keys, groups = run.tables(n)
        if not groups:
            continue
        cols = [c for c in (run.column(n, "ferry"), run.column(n, "ferry-reg")) if c is not None]
        out += [f"| {n} ranks |" + "".join(f" {size_label(s)} |" for s in SUMMARY_SIZES),
                "| --- |" + " ---: |" * len(SUMMARY_SIZES)]
        for (coll, typ, op, root), lines in groups:
            by_size = {size: ms for size, _, ms in lines}
            cells = []
            for size in SUMMARY_SIZES:
                ms = by_size.get(size)
                parts = []
                for c in cols:
                    r = compare_table.ratio(ms[c], compare_table.best_peer(ms, run.start(n))[1], size) if ms else None
                    parts.append("-" if r is None else f"**{r:.2f}**" if r < 1 else f"{r:.2f}")
                cells.append(" / ".join(parts))
            out.append(f"| {coll} |" + "".join(f" {c} |" for c in cells))
        out.append("")
    return out


def table_lines(run, n):
    keys, groups = run.tables(n)
    names = [compare_table.short_name(run.docs[(n, k)]["library"]) for k in keys]
    out = []
    for (coll, typ, op, root), lines in groups:
        what = " ".join(x for x in (coll, typ, op if op != "none" else "", f"root {root}" if root >= 0 else "") if x)
        out += [f"### {n} ranks: {what}", ""]
        start = run.start(n)
        head = "| size |" + "".join(f" {nm} µs | {nm} GB/s |" for nm in names) + " best peer |" + "".join(
            f" {nm} / best |" for nm in names[:start])
        out += [head, "|" + " ---: |" * (1 + 2 * len(names)) + " --- |" + " ---: |" * start]
        for size, _, ms in lines:
            if size == 0:
                continue
            cells = [size_label(size)]
            for m in ms:
                cells += ([f"{m['time']:.2f}", f"{m['bus_bw']:.3f}"] if m is not None else ["-", "-"])
            i, peer = compare_table.best_peer(ms, start)
            cells.append(names[i] if i else "-")
            for c in range(start):
                r = compare_table.ratio(ms[c], peer, size)
                cells.append((f"**{r:.2f}**" if r < 1 else f"{r:.2f}") if r is not None else "-")
            if compare_table.wrong(ms):
                cells[-1] += " WRONG VALUES"
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return out


# The section of the page that is written by hand about this run's figures: kept as it is.
ANALYSIS = "## What stands between ferry and the memory limit"
# Sections of the page from other runs (the GPU and torch.distributed by hand, several hosts by
# bench/cluster_md.py) and the measurements the code's comments cite: kept as they are.
KEPT_SECTIONS = ("## GPU", "## Through PyTorch", "## Several hosts", "## Evidence behind the code's rules")


def old_sections(path, headings):
    """The sections of the page now at `path` whose headings start with one of `headings`, each
    up to the next level-2 heading, as lines (heading included)."""
    try:
        with open(path) as f:
            old = f.read().split("\n")
    except OSError:
        return []
    out, keep = [], False
    for line in old:
        if line.startswith("## "):
            keep = line.startswith(headings)
        if keep:
            out.append(line)
    return out


def kept_sections(path):
    """The KEPT_SECTIONS of the page now at `path`."""
    out = old_sections(path, KEPT_SECTIONS)
    return [""] + out if out else []


def analysis_lines(path):
    """The hand-written analysis of the page now at `path` (its body), or the placeholder."""
    old = old_sections(path, (ANALYSIS,))
    body = "\n".join(old[1:]).strip("\n")
    return [body if body else PLACEHOLDER, ""]


def repeat_note(rec):
    """With bench/compare --repeat R: how the R runs of each library became one figure."""
    r = rec.get("settings", {}).get("repeat", 1)
    if rec.get("settings", {}).get("by_collective"):
        return (f", one collective at a time: for each collective every library ran its sweep {r} time(s), the "
                f"libraries taking turns (ferry, then each peer, then ferry again), before the next collective "
                f"began, so each point's figures were taken minutes apart; each figure is that library's best of "
                f"its {r} runs at that size (other work on this shared virtual machine only ever slows a run down)")
    if r <= 1:
        return ""
    return (f", in which every library ran the whole sweep {r} times, the libraries taking turns (ferry, then each "
            f"peer, then ferry again); each figure is that library's best of its {r} runs at that size (other work "
            f"on this shared virtual machine only ever slows a run down)")


def write_page(run, path, chart_dir, checks):
    rec = run.record
    rel = os.path.relpath(chart_dir, os.path.dirname(os.path.abspath(path)))
    lines = ["# Performance", "",
             "<!-- Generated by bench/performance_md.py from one bench/compare run; edit only the section "
             "\"What stands between ferry and the memory limit\" and the sections \"GPU\", \"Through PyTorch\", "
             "\"Several hosts\" and \"Evidence behind the code's rules\" (kept "
             "when the page is regenerated), or regenerate. -->", "",
             f"ferry against Open MPI, MPICH and Gloo on one host, every figure from the one side-by-side run of "
             f"{rec['start_time']} to {rec['end_time']}{repeat_note(rec)}. Out-of-place times per operation in µs, bus bandwidth "
             f"in GB/s (10⁹ bytes/s) with nccl-tests' factors (docs/BENCHMARKS.md); *ferry / best* is ferry's bus "
             f"bandwidth over that of the fastest peer at that size (above 1: ferry is faster; bold below 1). "
             f"Every row was checked element by element; a wrong value would be marked.", "",
             "```sh", rec["command"], "```", "",
             f"Sweep: `{' '.join(rec['sweep'])}` at {', '.join(map(str, rec['ranks']))} ranks "
             "(`bench/compare` passes it unchanged to every library).", ""]
    lines += summary_lines(run) + machine_section(run) + libraries_section(run)
    lines += ["## Targets", "", "Checked by `bench/performance_md.py` against this run: issue 36's on ferry with plain "
              "buffers, issue 4's on ferry with registered ones (where the run has them):", ""]
    lines += [f"- **{v}** {t}" for v, t in checks] + [""]
    lines += [ANALYSIS, ""] + analysis_lines(path)
    lines += ["## Charts", ""]
    for n in rec["ranks"]:
        for metric in ("busbw", "time"):
            name = f"compare-{n}ranks-{metric}.png"
            if os.path.exists(os.path.join(chart_dir, name)):
                what = "bus bandwidth" if metric == "busbw" else "time per operation"
                lines += [f"![{n} ranks, {what}]({rel}/{name})", ""]
    lines += ["## Tables", ""]
    for n in rec["ranks"]:
        lines += table_lines(run, n)
    lines += kept_sections(path)
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", default="bench/results", metavar="RESULTS_DIR")
    p.add_argument("-o", "--output", default="docs/PERFORMANCE.md")
    p.add_argument("--charts", default="docs/perf", help="where the charts are copied (default docs/perf)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target fails or is missing")
    a = p.parse_args()
    run = Run(a.results)
    os.makedirs(a.charts, exist_ok=True)
    for n in run.record["ranks"]:
        for metric in ("busbw", "time"):
            src = os.path.join(a.results, f"compare-{n}ranks-{metric}.png")
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(a.charts, os.path.basename(src)))
    checks = targets(run)
    write_page(run, a.output, a.charts, checks)
    for verdict, text in checks:
        print(f"{verdict:7} {text}")
    print(f"performance_md.py: wrote {a.output}, charts in {a.charts}/")
    return 1 if a.strict and any(v != "PASS" for v, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
