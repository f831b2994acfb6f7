#!/usr/bin/python3
"""Charts of ferry-perf / mpi-perf results: bus bandwidth and time against size, log-scaled.

  bench/plot.py [-o PREFIX] [--placement out|in] [--ceiling GBPS[:LABEL] ...] RESULTS.json [RESULTS.json ...]

Writes PREFIX-busbw.png and PREFIX-time.png (default PREFIX: the first file without .json).
One results file (one run): one panel, one line per collective. Several runs (other libraries,
rank counts or hosts) of one collective: one panel, one line per run. Several runs of several
collectives: one panel per collective, one line per run. Titles name the host(s), rank count(s)
and type(s). Sizes with no time or zero bandwidth (0-byte rows) cannot sit on a log axis and are
left out. --ceiling draws a dashed horizontal line on the bandwidth chart (bench/compare marks one
core's memcpy rate with it). Needs Debian's python3-matplotlib; docs/BENCHMARKS.md has examples.
"""
import argparse
import json
import math
import os
import sys

ORDER = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv"]


def size_label(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale}{unit}"
    return f"{b}"


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"plot.py: cannot read {path}: {e}")
    if not str(doc.get("schema", "")).startswith("ferry-perf/"):
        raise SystemExit(f"plot.py: {path} is not a ferry-perf results file (no ferry-perf schema)")
    doc["_path"] = path
    return doc


def run_labels(docs):
    """A short label per run: what differs between the runs (library, ranks, host), else the file."""
    keys = [("library", lambda d: d["library"]), ("nranks", lambda d: f"{d['nranks']} ranks"),
            ("host", lambda d: d["host"])]
    varying = [fn for _, fn in keys if len({fn(d) for d in docs}) > 1]
    labels = []
    for d in docs:
        parts = [fn(d) for fn in varying]
        labels.append(", ".join(parts) if parts else os.path.splitext(os.path.basename(d["_path"]))[0])
    return labels


def series(docs, placement):
    """{collective: [(label, sizes, busbw, time_us)]} in a stable order."""
    labels = run_labels(docs) if len(docs) > 1 else [None]
    # Name the type, op and root in a label only where one collective ran several of them.
    per_coll = {}
    for d in docs:
        for r in d["results"]:
            per_coll.setdefault((d["_path"], r["collective"]), set()).add((r["type"], r["redop"], r["root"]))
    several = any(len(v) > 1 for v in per_coll.values())
    out = {}
    for doc, run in zip(docs, labels):
        groups = {}
        for r in doc["results"]:
            key = (r["collective"], r["type"], r["redop"], r["root"])
            groups.setdefault(key, []).append(r)
        for (coll, typ, op, root), rows in groups.items():
            parts = [run] if run else [coll]
            if several:
                parts.append(" ".join(x for x in (typ, op if op != "none" else "", f"root {root}" if root >= 0 else "") if x))
            pts = [(r["size"], r[placement]["bus_bw"], r[placement]["time"]) for r in rows if r["size"] > 0]
            pts = [p for p in pts if p[1] > 0 and p[2] > 0]
            if pts:
                pts.sort()
                out.setdefault(coll, []).append((", ".join(parts), [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts]))
    return {c: out[c] for c in sorted(out, key=lambda c: ORDER.index(c) if c in ORDER else 99)}


def title(docs, metric, placement):
    hosts = sorted({d["host"] for d in docs})
    ranks = sorted({d["nranks"] for d in docs})
    types = sorted({r["type"] for d in docs for r in d["results"]})
    what = "bus bandwidth" if metric == "busbw" else "time per operation"
    return (f"{what} vs size — host {', '.join(hosts)}, {'/'.join(map(str, ranks))} ranks, "
            f"{', '.join(types)} ({placement.replace('_', '-')})")


def parse_ceiling(text):
    value, _, label = text.partition(":")
    try:
        return float(value), label or f"{float(value):g} GB/s"
    except ValueError:
        raise SystemExit(f"plot.py: --ceiling '{text}' is not GBPS[:LABEL]")


def draw(plt, data, docs, metric, placement, path, ceilings=()):
    single_run = len(docs) == 1
    panels = [None] if single_run or len(data) == 1 else list(data)
    cols = 1 if len(panels) == 1 else min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols if cols > 1 else 9, 4.2 * rows + 0.6), squeeze=False)
    for i, panel in enumerate(panels):
        ax = axes[i // cols][i % cols]
        lines = [s for c in data for s in data[c]] if panel is None else data[panel]
        for label, sizes, busbw, time_us in lines:
            ax.plot(sizes, busbw if metric == "busbw" else time_us, marker="o", markersize=3, label=label)
        if metric == "busbw":
            for value, label in ceilings:
                ax.axhline(value, linestyle="--", color="gray", linewidth=1, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({s for _, sizes, _, _ in lines for s in sizes})
        step = max(1, len(ticks) // 8)
        ax.set_xticks(ticks[::step])
        ax.set_xticklabels([size_label(t) for t in ticks[::step]])
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)" if metric == "busbw" else "time (µs)")
        ax.grid(True, which="both", alpha=0.3)
        if panel is not None:
            ax.set_title(panel)
        ax.legend(fontsize=8)
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(title(docs, metric, placement))
    fig.tight_layout(rect=(0, 0, 1, 0.97 if rows > 1 else 0.95))  # leave the title its own band
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="RESULTS.json")
    p.add_argument("-o", "--output", metavar="PREFIX", help="output prefix (default: first file without .json)")
    p.add_argument("--placement", choices=["out", "in"], default="out", help="out-of-place (default) or in-place")
    p.add_argument("--ceiling", action="append", default=[], metavar="GBPS[:LABEL]",
                   help="a dashed line at this bandwidth on the busbw chart (repeatable)")
    a = p.parse_args()
    docs = [load(f) for f in a.files]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plot.py: needs matplotlib (Debian: apt-get install python3-matplotlib)")
    placement = "out_of_place" if a.placement == "out" else "in_place"
    data = series(docs, placement)
    if not data:
        raise SystemExit("plot.py: no rows with a non-zero size and bandwidth to plot")
    prefix = a.output or os.path.splitext(a.files[0])[0]
    for metric in ("busbw", "time"):
        path = f"{prefix}-{metric}.png"
        draw(plt, data, docs, metric, placement, path, [parse_ceiling(c) for c in a.ceiling])
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
