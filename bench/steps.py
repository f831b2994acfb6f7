#!/usr/bin/python3
"""Steps in a sweep's bus bandwidth, beside the memory's own at the same sizes (./run bench's verdict):

  bench/steps.py RESULTS.json --memcpy-args       memcpy-rate's arguments for the sizes of the steps
                                                  (nothing where there is no step)
  bench/steps.py RESULTS.json [--copy WALK.json]  one line per step, then the verdict

A step is a fall of a collective's bus bandwidth (out of place or in place) by more than 2x from one
size to the next larger one (issue 36's "no cliffs"). Part of a fall can be the memory's: the
sweep's shifts walk each size through buffers sized for the largest, so the data a size's timed
calls touch stays in a cache up to some size and comes from memory past it, whatever the library.
WALK.json (`memcpy-rate -P RANKS -W ITERS` at the steps' sizes and the largest) measures that
part: the ranks' processes copying each size while walking the same buffers. A step is the
library's where its fall, divided by the copy rate's fall between the same sizes, is still over
2x; otherwise the memory's. Exit status 0 when no step is the library's, 1 otherwise, 2 for bad
input. Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from performance_md import size_label  # noqa: E402  (bench/ is not a package)

LIMIT = 2.0  # the largest fall from one size to the next that is not a step


def load(path, schema):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"steps.py: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    if not str(doc.get("schema", "")).startswith(schema):
        print(f"steps.py: {path} has no {schema} schema", file=sys.stderr)
        sys.exit(2)
    return doc


def steps(doc):
    """[(collective, placement, size, next size, busbw, next busbw)] where busbw falls over LIMIT x."""
    rows = {}
    for r in doc["results"]:
        rows.setdefault(r["collective"], []).append(r)
    out = []
    for coll, rs in rows.items():
        rs.sort(key=lambda r: r["size"])
        for side in ("out_of_place", "in_place"):
            sized = [(r["size"], r[side]["bus_bw"]) for r in rs
                     if r["size"] > 0 and isinstance(r.get(side), dict) and (r[side].get("bus_bw") or 0) > 0]
            for (s0, b0), (s1, b1) in zip(sized, sized[1:]):
                if b0 > LIMIT * b1:
                    out.append((coll, side.replace("_", "-"), s0, s1, b0, b1))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--memcpy-args", action="store_true",
                   help="print memcpy-rate's arguments for the copy rates at the steps' sizes")
    p.add_argument("--copy", help="memcpy-rate -P RANKS -W ITERS results at those sizes")
    a = p.parse_args()
    doc = load(a.results, "ferry-perf/")
    found = steps(doc)
    if a.memcpy_args:
        if found:
            sizes = sorted({s for st in found for s in st[2:4]} | {doc["config"]["maximum_bytes"]})
            print(f"-P {doc['nranks']} -W {doc['config']['iterations']} " + " ".join(str(s) for s in sizes))
        return 0
    if not found:
        print(f"# steps: no collective's bus bandwidth falls by more than {LIMIT:g}x from one size to the next")
        return 0
    rates, walk = {}, None
    if a.copy:
        walk = load(a.copy, "ferry-memcpy/")
        rates = {r["size"]: r["median_gbps"] for r in walk["results"]}
    print(f"# steps: bus bandwidth falling by more than {LIMIT:g}x from one size to the next" +
          (f"; beside each, {walk['processes']} processes' copy rate (median) walking {walk.get('walk_steps')} "
           "steps through the same buffers" if walk else ""))
    library = 0
    for coll, side, s0, s1, b0, b1 in found:
        fall = b0 / b1
        line = f"#   {coll} {side} {size_label(s0)} -> {size_label(s1)}: {b0:.2f} -> {b1:.2f} GB/s, {fall:.2f}x"
        c0, c1 = rates.get(s0), rates.get(s1)
        if c0 and c1:
            beyond = fall / (c0 / c1)
            mine = beyond > LIMIT
            line += (f"; copy {c0:.2f} -> {c1:.2f} GB/s, {c0 / c1:.2f}x; {beyond:.2f}x beyond it: " +
                     ("the library's" if mine else "the memory's"))
        else:
            mine = True
            line += "; no copy rate at these sizes: the library's"
        library += 1 if mine else 0
        print(line)
    print(f"# steps: {library} of {len(found)} the library's")
    return 1 if library else 0


if __name__ == "__main__":
    sys.exit(main())
