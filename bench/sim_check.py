#!/usr/bin/python3
"""Predicted (ferry-sim) against measured (ferry-perf) for bench/sim_check's results.

  bench/sim_check.py DIR

Reads DIR/LAYOUT-SHAPE-measured-R.json (the fastest of the repeats R counts) and
DIR/LAYOUT-SHAPE-sim-COLL.json and prints one row per collective and size >= 1 MiB: measured and
predicted time, and the error (predicted / measured - 1); then the median and largest absolute
error, per shape and in all.
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    d = sys.argv[1]
    rows = []
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*-measured*.json"))):
        m = re.match(r"(.+?)-(.+)-measured(-\d+)?\.json", os.path.basename(path))
        runs.setdefault((m.group(1), m.group(2)), []).append(path)
    for (layout, shape), paths in sorted(runs.items()):
        measured = {}
        for path in paths:
            for r in json.load(open(path))["results"]:
                key, t = (r["collective"], r["size"]), r["out_of_place"]["time"]
                if r["size"] >= 1 << 20 and (key not in measured or t < measured[key]):
                    measured[key] = t
        for sim in glob.glob(os.path.join(d, f"{layout}-{shape}-sim-*.json")):
            doc = json.load(open(sim))
            for r in doc["results"]:
                key = (r["collective"], r["size"])
                if key in measured:
                    rows.append((shape, layout, r["collective"], r["algorithm"], r["size"], measured[key],
                                 r["out_of_place"]["time"]))
    if not rows:
        raise SystemExit(f"sim_check.py: no measured and simulated pairs in {d}")
    order = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce"]
    rows.sort(key=lambda r: (r[0], r[1], order.index(r[2]) if r[2] in order else 9, r[4]))
    print(f"{'shape':6} {'layout':6} {'collective':15} {'algorithm':9} {'size':>9} {'measured':>11} "
          f"{'predicted':>11} {'error':>7}")
    print(f"{'':6} {'':6} {'':15} {'':9} {'(B)':>9} {'(us)':>11} {'(us)':>11} {'':>7}")
    errs = {}
    for shape, layout, coll, algo, size, meas, pred in rows:
        e = pred / meas - 1
        errs.setdefault(shape, []).append(abs(e))
        print(f"{shape:6} {layout:6} {coll:15} {algo:9} {size:9d} {meas:11.1f} {pred:11.1f} {e * 100:+6.1f}%")
    print()
    every = []
    for shape, es in errs.items():
        every += es
        print(f"{shape:6} links: {len(es)} points, median error {statistics.median(es) * 100:.1f}%, "
              f"largest {max(es) * 100:.1f}%, over 30%: {sum(1 for e in es if e > 0.3)}")
    print(f"all:         {len(every)} points, median error {statistics.median(every) * 100:.1f}%, "
          f"largest {max(every) * 100:.1f}%, over 30%: {sum(1 for e in every if e > 0.3)}")


if __name__ == "__main__":
    main()
