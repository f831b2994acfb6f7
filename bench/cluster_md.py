#!/usr/bin/python3
"""Tables and targets of a bench/compare-cluster run: ferry next to Open MPI across namespace hosts.

  bench/cluster_md.py DIR                      text tables and issue 9's targets on stdout
  bench/cluster_md.py DIR --page PERFORMANCE.md   also write them as the page's "## Several hosts"
                                                section (its "### What stands between" subsection,
                                                written by hand, is kept)

Link bus bandwidth. nccl-tests' bus bandwidth counts what each rank must send; across hosts what
costs is what crosses each host's link, and a two-level algorithm sends less there than a flat one.
So the tables also give the link bus bandwidth: the bytes each host must send over its link at the
least, whatever the algorithm, per second of the operation. With H hosts, R ranks per host and n
ranks, S the operation's size in nccl-tests' terms (the vector for all_reduce, broadcast, reduce;
all ranks' blocks together for the others):
  all_reduce                 2 (H-1)/H S    (the hosts' sums reduce-scatter and all-gather across)
  reduce_scatter, all_gather   (H-1)/H S    (a host's share of every other host's part)
  alltoall                   R (n-R)/n S    (its R ranks' blocks bound for the other hosts)
  broadcast, reduce                    S    (the vector crosses into, or out of, each host once)
Ratios between libraries are ratios of times, so they do not depend on the factor. Standard
library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_table import load, side_by_side  # noqa: E402

SECTION = "## Several hosts"
HAND_WRITTEN = "### What stands between"
LINK_TARGET = 0.85        # of the shaped link's rate, all_reduce at 64 MiB on 2x2
RATIO_TARGET_SHAPED = 1.5  # ferry over Open MPI there
MIB = 1 << 20


def hosts_of(layout):
    """[ranks per host] of 'HxR' or '2,1'."""
    if "x" in layout:
        h, r = layout.split("x")
        return [int(r)] * int(h)
    return [int(x) for x in layout.split(",")]


def link_factor(coll, per_host):
    h, n = len(per_host), sum(per_host)
    r = max(per_host)
    if coll == "all_reduce":
        return 2 * (h - 1) / h
    if coll in ("reduce_scatter", "all_gather"):
        return (h - 1) / h
    if coll == "alltoall":
        return r * (n - r) / n
    return 1.0


def shape_rate(shape):
    """The link rate of a shape in bytes per second, or None when unshaped."""
    if shape == "none":
        return None
    rate = shape.split(",")[0].lower()
    for suffix, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate.endswith(suffix):
            return float(rate[: -len(suffix)]) * mult / 8
    return None


def human(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def collect(results):
    run = json.load(open(os.path.join(results, "cluster-run.json")))
    clusters = {}
    for r in run["runs"]:
        clusters.setdefault((r["layout"], r["shape"]), {})[r["key"]] = r
    out = []
    for (layout, shape), libs in clusters.items():
        if "ferry" not in libs or "ompi" not in libs:
            continue
        paths = [os.path.join(results, libs[k]["json"]) for k in ("ferry", "ompi")]
        if not all(os.path.exists(p) for p in paths):
            continue
        docs = [load(p) for p in paths]
        out.append((layout, shape, docs, max(libs[k]["status"] for k in ("ferry", "ompi"))))
    return run, out


def rows(layout, docs):
    """(collective, size, ferry measurement, Open MPI measurement, link factor) for every row."""
    per_host = hosts_of(layout)
    for (coll, _, _, _), lines in side_by_side(docs):
        for size, _, ms in lines:
            yield coll, size, ms[0], ms[1], link_factor(coll, per_host)


def targets(clusters):
    """Issue 9's targets: (text, passed or None when not measured)."""
    out = []
    found = False
    for layout, shape, docs, _ in clusters:
        rate = shape_rate(shape)
        if layout != "2x2" or rate is None or not shape.startswith("1gbit"):
            continue
        for coll, size, f, o, k in rows(layout, docs):
            if coll != "all_reduce" or size != 64 * MIB or f is None:
                continue
            found = True
            link = size * k / (f["time"] * 1e-6)
            out.append((f"2x2, links {shape}: all_reduce 64 MiB link bus bandwidth >= {LINK_TARGET:.0%} of the link "
                        f"({rate * LINK_TARGET / 1e6:.1f} MB/s): {link / 1e6:.1f} MB/s = {link / rate:.0%}",
                        link >= LINK_TARGET * rate))
            if o is not None:
                r = o["time"] / f["time"]
                out.append((f"2x2, links {shape}: all_reduce 64 MiB ferry / Open MPI >= {RATIO_TARGET_SHAPED}: "
                            f"{r:.2f} (ferry {f['time'] / 1e3:.0f} ms, Open MPI {o['time'] / 1e3:.0f} ms)",
                            r >= RATIO_TARGET_SHAPED))
    if not found:
        out.append(("2x2, links 1gbit,5ms: all_reduce 64 MiB: not in this run", None))
    for layout, shape, docs, _ in clusters:
        if shape != "none":
            continue
        worst = None
        for coll, size, f, o, _ in rows(layout, docs):
            if size < MIB or f is None or o is None or f["time"] <= 0:
                continue
            r = o["time"] / f["time"]
            if worst is None or r < worst[0]:
                worst = (r, coll, size)
        if worst is not None:
            out.append((f"{layout}, unshaped: every collective >= 1 MiB at least as fast as Open MPI: worst "
                        f"{worst[0]:.2f} ({worst[1]} {human(worst[2])})", worst[0] >= 1.0))
    return out


def text_tables(clusters):
    lines = []
    for layout, shape, docs, status in clusters:
        lines.append(f"# {layout} (ranks per host {','.join(map(str, hosts_of(layout)))}), links {shape}"
                     f"{'' if status == 0 else f' (a run exited with status {status})'}")
        lines.append(f"# {'collective':<15}{'size':>9}  {'ferry us':>11} {'ompi us':>11}  {'ferry/ompi':>10}"
                     f"  {'ferry link GB/s':>15} {'ompi link GB/s':>14}")
        for coll, size, f, o, k in rows(layout, docs):
            ft = f"{f['time']:.1f}" if f else "-"
            ot = f"{o['time']:.1f}" if o else "-"
            r = f"{o['time'] / f['time']:.2f}" if f and o and f["time"] > 0 else "-"
            fl = f"{size * k / (f['time'] * 1e3):.3f}" if f and f["time"] > 0 else "-"
            ol = f"{size * k / (o['time'] * 1e3):.3f}" if o and o["time"] > 0 else "-"
            bad = " WRONG VALUES" if (f and f.get("nwrong")) or (o and o.get("nwrong")) else ""
            lines.append(f"  {coll:<15}{human(size):>9}  {ft:>11} {ot:>11}  {r:>10}  {fl:>15} {ol:>14}{bad}")
        lines.append("")
    return lines


def markdown(run, clusters, kept):
    lines = [SECTION, "",
             f"<!-- Generated by bench/cluster_md.py from one bench/compare-cluster run; edit only \"{HAND_WRITTEN[4:]}\" "
             "(kept when the section is regenerated). -->", "",
             f"ferry against Open MPI 4.1.4 across hosts made of network namespaces on this machine (test/cluster/, "
             f"docs/CLUSTER.md), every figure from the one run of {run['start_time']} to {run['end_time']}"
             + (f", each library's best of {run['repeat']} runs taken in turns" if run.get("repeat", 1) > 1 else "")
             + f"; links with MTU {run.get('mtu', 1500)}. Times per operation (out of place, µs); *ferry / Open MPI* "
             "is the ratio of times (above 1: ferry is faster); link GB/s is the link bus bandwidth: what each host "
             "must send over its link at the least, per second (bench/cluster_md.py says how it is counted). Every "
             "row was checked element by element.", "", "```sh", run["command"], "```", "", "### Targets (issue 9)", ""]
    for text, ok in targets(clusters):
        lines.append(f"- **{'PASS' if ok else 'FAIL' if ok is not None else 'n/a'}** {text}")
    lines.append("")
    for layout, shape, docs, status in clusters:
        lines += [f"### {layout} (ranks per host {','.join(map(str, hosts_of(layout)))}), links "
                  f"{'unshaped' if shape == 'none' else shape}", "",
                  "| collective | size | ferry µs | Open MPI µs | ferry / Open MPI | ferry link GB/s | Open MPI link GB/s |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for coll, size, f, o, k in rows(layout, docs):
            r = o["time"] / f["time"] if f and o and f["time"] > 0 else None
            cell = "-" if r is None else (f"**{r:.2f}**" if r < 1 else f"{r:.2f}")
            lines.append(f"| {coll} | {human(size)} | {f['time']:.0f} | {o['time']:.0f} | {cell} | "
                         f"{size * k / (f['time'] * 1e3):.3f} | {size * k / (o['time'] * 1e3):.3f} |"
                         if f and o else f"| {coll} | {human(size)} | - | - | - | - | - |")
        lines.append("")
    lines += kept if kept else [HAND_WRITTEN + " (to write)", "", "(Nothing written yet.)", ""]
    return lines


def replace_section(path, new_lines):
    """The page at `path` with its SECTION replaced by `new_lines` (appended when absent)."""
    with open(path) as f:
        old = f.read().rstrip("\n").split("\n")
    out, i, placed = [], 0, False
    while i < len(old):
        if old[i].startswith(SECTION):
            out += new_lines
            placed = True
            i += 1
            while i < len(old) and not old[i].startswith("## "):
                i += 1
            continue
        out.append(old[i])
        i += 1
    if not placed:
        out += [""] + new_lines
    with open(path, "w") as f:
        f.write("\n".join(out).rstrip("\n") + "\n")


def kept_lines(path):
    """The hand-written subsection of SECTION in the page at `path`."""
    try:
        with open(path) as f:
            old = f.read().split("\n")
    except OSError:
        return []
    inside, keep, out = False, False, []
    for line in old:
        if line.startswith("## "):
            inside = line.startswith(SECTION)
            keep = False
        elif inside and line.startswith("### "):
            keep = line.startswith(HAND_WRITTEN)
        if inside and keep:
            out.append(line)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--page", help="docs/PERFORMANCE.md: replace its '## Several hosts' section")
    a = p.parse_args()
    run, clusters = collect(a.results)
    if not clusters:
        raise SystemExit(f"cluster_md.py: no cluster with both ferry's and Open MPI's results in {a.results}")
    clusters.sort(key=lambda c: (c[0], c[1] != "none", c[1]))
    print("\n".join(text_tables(clusters)))
    for text, ok in targets(clusters):
        print(f"{'PASS' if ok else 'FAIL' if ok is not None else 'n/a '} {text}")
    if a.page:
        replace_section(a.page, markdown(run, clusters, kept_lines(a.page)))
    wrong = any((m and m.get("nwrong")) for c in clusters for _, _, f, o, _ in rows(c[0], c[2]) for m in (f, o))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
