#!/usr/bin/python3
"""Side-by-side table of ferry-perf / mpi-perf / gloo-perf results files (same sweep, same rank count):

  bench/compare_table.py [--placement out|in] FERRY.json PEER.json [PEER.json ...]

The first file is the reference (ferry), the others its peers (Open MPI, MPICH, Gloo, ...); files
right after the first whose library is ferry too (another setup of it: registered buffers) are
shown beside it and get their own ratio column, but are never anyone's peer. For
every collective (and type, op, root) and size of the first file: each library's time per
operation and bus bandwidth, side by side ("-" where a library has no such row: Gloo has no
reduce_scatter), then the best peer at that size (the shortest time) and the ratio of the first
library's bus bandwidth to the best peer's (above 1: the first library is faster). Ratios come
from the unrounded times, so they mean something at small sizes where busbw rounds to 0.00. Rows
where any run found wrong values are marked. Standard library only; bench/performance_md.py
imports load(), short_name() and side_by_side() from here.
"""
import argparse
import json
import re
import sys

ORDER = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv"]


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"compare_table.py: cannot read {path}: {e}")
    if not str(doc.get("schema", "")).startswith("ferry-perf/"):
        raise SystemExit(f"compare_table.py: {path} is not a ferry-perf results file (no ferry-perf schema)")
    return doc


def short_name(library):
    """'Open MPI 4.1.4' -> 'Open MPI', 'Gloo (torch 1.13.1)' -> 'Gloo', 'ferry 0.1.0' -> 'ferry',
    'Open MPI 4.1.4 (no CMA)' -> 'Open MPI (no CMA)': versions go, other labels stay."""
    name = re.sub(r"\s*\([^)]*\d[^)]*\)", "", library)
    words = [w for w in name.split() if not re.fullmatch(r"v?\d[\w.+~-]*", w)]
    return " ".join(words) or library


def group_key(row):
    return (row["collective"], row["type"], row["redop"], row["root"])


def side_by_side(docs, placement="out_of_place"):
    """Groups of rows, one group per (collective, type, redop, root) of the first run, in ORDER:
    [(group key, [(size, count, [measurement or None per run])])]. A measurement is the row's
    placement object (time in us, bus_bw, nwrong, ...)."""
    rows = []
    for d in docs:
        rows.append({group_key(r) + (r["size"],): (r["count"], r[placement]) for r in d["results"]})
    groups = {}
    for key in rows[0]:
        groups.setdefault(key[:4], []).append(key[4])
    order = sorted(groups, key=lambda g: (ORDER.index(g[0]) if g[0] in ORDER else 99, g[1], g[2], g[3]))
    out = []
    for g in order:
        lines = []
        for size in sorted(groups[g]):
            k = g + (size,)
            count = rows[0][k][0]
            lines.append((size, count, [r[k][1] if k in r else None for r in rows]))
        out.append((g, lines))
    return out


def peer_start(docs):
    """Index of the first peer: the files after the first that are ferry too are its variants."""
    i = 1
    while i < len(docs) and short_name(docs[i]["library"]).startswith("ferry"):
        i += 1
    return i


def best_peer(measurements, start=1):
    """(index, measurement) of the peer (index >= start) with the shortest time, or (None, None)."""
    best = (None, None)
    for i, m in enumerate(measurements[start:], start=start):
        if m is not None and m["time"] > 0 and (best[1] is None or m["time"] < best[1]["time"]):
            best = (i, m)
    return best


def ratio(first, peer, size):
    """First library's busbw over the peer's, from the times; None where undefined (0 bytes)."""
    if first is None or peer is None or size == 0 or first["time"] <= 0 or peer["time"] <= 0:
        return None
    return peer["time"] / first["time"]


def wrong(measurements):
    return any(m is not None and (m["nwrong"] or 0) > 0 for m in measurements)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="RESULTS.json")
    p.add_argument("--placement", choices=["out", "in"], default="out")
    a = p.parse_args()
    if len(a.files) < 2:
        raise SystemExit("compare_table.py: give the reference results file and at least one peer's")
    placement = "out_of_place" if a.placement == "out" else "in_place"
    docs = [load(f) for f in a.files]
    for f, d in zip(a.files[1:], docs[1:]):
        if d["nranks"] != docs[0]["nranks"]:
            raise SystemExit(f"compare_table.py: {f} has {d['nranks']} ranks, {a.files[0]} {docs[0]['nranks']}: "
                             f"compare like with like")
    names = [short_name(d["library"]) for d in docs]
    start = peer_start(docs)
    if start >= len(docs):
        raise SystemExit("compare_table.py: every file is ferry's; give at least one peer's")
    widths = [max(10, len(n) + 5) for n in names]
    best_width = max(9, max(len(n) for n in names[start:]))
    ratio_names = ["ratio"] + [f"ratio {n.replace('ferry', '').strip()}" for n in names[1:start]]
    print(f"# {' vs '.join(d['library'] for d in docs)} on {docs[0]['host']}, {docs[0]['nranks']} ranks, "
          f"{placement.replace('_', '-')}")
    print(f"# ratio = {names[0]} busbw / busbw of the best peer at that size (> 1: {names[0]} faster); "
          f"'-': no such row" + "".join(f"; ratio {n.replace('ferry', '').strip()}: {n}'s" for n in names[1:start]))
    groups = side_by_side(docs, placement)
    for (coll, typ, op, root), lines in groups:
        what = " ".join(x for x in (coll, typ, op if op != "none" else "", f"root {root}" if root >= 0 else "") if x)
        print(f"#\n# {what}")
        head = f"# {'size':>10}"
        for n, w in zip(names, widths):
            head += f"  {n + ' us':>{w}}  {n + ' GB/s':>{w}}"
        print(head + f"  {'best peer':>{best_width}}" + "".join(f"  {n:>6}" for n in ratio_names))
        for size, _, ms in lines:
            text = f"{size:>12}"
            for m, w in zip(ms, widths):
                text += (f"  {m['time']:>{w}.2f}  {m['bus_bw']:>{w}.3f}" if m is not None
                         else f"  {'-':>{w}}  {'-':>{w}}")
            i, peer = best_peer(ms, start)
            text += f"  {names[i] if i else '-':>{best_width}}"
            for j, n in enumerate(ratio_names):
                r = ratio(ms[j], peer, size)
                text += f"  {(f'{r:.2f}' if r else '-'):>{len(n)}}"
            print(text + ("  WRONG VALUES" if wrong(ms) else ""))
    if not groups:
        print("# no rows in the first file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
