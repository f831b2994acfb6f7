#!/usr/bin/python3
"""Predicted (ferry-sim) against measured (ferry-perf) for bench/sim_check's results.

  bench/sim_check.py DIR
  bench/sim_check.py --floor DIR DIR...

Reads DIR/LAYOUT-SHAPE-measured-R.json (the fastest of the repeats R counts) and
DIR/LAYOUT-SHAPE-sim-COLL.json and prints one row per collective and size >= 1 MiB: measured and
predicted time, and the error (predicted / measured - 1); then the median and largest absolute
error, per shape and in all.

--floor: the machine's own repeatability, the floor under any model's error. For several runs'
results, each run's measurements stand as the prediction of every other run's, with the same
errors as above, per shape; and each point's spread (slowest / fastest of the runs).
"""
import glob
import itertools
import json
import os
import re
import statistics
import sys


def measured_points(d):
    """{(layout, shape): {(collective, size): fastest time}} of one sim_check results directory."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*-measured*.json"))):
        m = re.match(r"(.+?)-(.+)-measured(-\d+)?\.json", os.path.basename(path))
        runs.setdefault((m.group(1), m.group(2)), []).append(path)
    out = {}
    for run, paths in runs.items():
        measured = out.setdefault(run, {})
        for path in paths:
            for r in json.load(open(path))["results"]:
                key, t = (r["collective"], r["size"]), r["out_of_place"]["time"]
                if r["size"] >= 1 << 20 and (key not in measured or t < measured[key]):
                    measured[key] = t
    return out


def floor(dirs):
    points = [measured_points(d) for d in dirs]
    shapes = sorted({shape for p in points for (_, shape) in p})
    for shape in shapes:
        # The points every run measured: {(layout, collective, size): time} per run.
        per_run = [{(layout,) + key: t for (layout, s), m in p.items() if s == shape for key, t in m.items()}
                   for p in points]
        keys = sorted(set.intersection(*(set(r) for r in per_run)))
        if not keys:
            continue
        print(f"{shape} links: {len(keys)} points measured by all {len(dirs)} runs")
        overs = []
        for (i, a), (j, b) in itertools.permutations(enumerate(per_run), 2):
            errs = [abs(a[k] / b[k] - 1) for k in keys]
            overs.append(sum(1 for e in errs if e > 0.3))
            print(f"  {dirs[i]} as the prediction of {dirs[j]}: median error "
                  f"{statistics.median(errs) * 100:.1f}%, largest {max(errs) * 100:.1f}%, over 30%: {overs[-1]}")
        spread = [max(r[k] for r in per_run) / min(r[k] for r in per_run) for k in keys]
        print(f"  over 30% per pair: median {statistics.median(overs):g}, fewest {min(overs)}, most {max(overs)}, "
              f"none in {overs.count(0)} of {len(overs)} pairs")
        print(f"  each point's spread over the runs: median {statistics.median(spread):.2f}x, largest "
              f"{max(spread):.2f}x, over 1.3x: {sum(1 for x in spread if x > 1.3)}")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--floor":
        return floor(sys.argv[2:])
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    d = sys.argv[1]
    rows = []
    for (layout, shape), measured in sorted(measured_points(d).items()):
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
