#!/usr/bin/python3
"""Side-by-side table of two ferry-perf / mpi-perf results files (same sweep, same rank count):

  bench/compare_table.py [--placement out|in] FERRY.json OTHER.json

For every collective and size present in both: time and bus bandwidth of each, and the ratio of
bus bandwidths (first / second: above 1, the first library is faster). The ratio comes from the
unrounded times, so it is meaningful at small sizes where busbw rounds to 0.00. Rows where either
run found wrong values are marked. Standard library only.
"""
import argparse
import json
import sys

ORDER = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"compare_table.py: cannot read {path}: {e}")


def rows_by_key(doc, placement):
    out = {}
    for r in doc["results"]:
        out[(r["collective"], r["type"], r["redop"], r["root"], r["size"])] = (r["count"], r[placement])
    return out


def short(library):
    return library.split(" ")[0] if library.startswith("ferry") else library.rsplit(" ", 1)[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--placement", choices=["out", "in"], default="out")
    a = p.parse_args()
    placement = "out_of_place" if a.placement == "out" else "in_place"
    d1, d2 = load(a.first), load(a.second)
    if d1["nranks"] != d2["nranks"]:
        raise SystemExit(f"compare_table.py: {d1['nranks']} ranks against {d2['nranks']}: compare like with like")
    n1, n2 = short(d1["library"]), short(d2["library"])
    r1, r2 = rows_by_key(d1, placement), rows_by_key(d2, placement)
    keys = sorted(set(r1) & set(r2), key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1], k[2], k[3], k[4]))
    print(f"# {d1['library']} vs {d2['library']} on {d1['host']}, {d1['nranks']} ranks, "
          f"{placement.replace('_', '-')}; ratio = {n1} busbw / {n2} busbw (> 1: {n1} faster)")
    coll = None
    for key in keys:
        if key[0] != coll:
            coll = key[0]
            print(f"#\n# {coll}")
            print(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>4}  "
                  f"{n1 + ' us':>10}  {n1 + ' GB/s':>10}  {n2 + ' us':>12}  {n2 + ' GB/s':>12}  {'ratio':>6}")
        count, m1 = r1[key]
        _, m2 = r2[key]
        ratio = m2["time"] / m1["time"] if m1["time"] > 0 and m2["time"] > 0 and key[4] > 0 else None
        wrong = "  WRONG VALUES" if (m1["nwrong"] or 0) + (m2["nwrong"] or 0) else ""
        print(f"{key[4]:>12}  {count:>12}  {key[1]:>8}  {key[2]:>6}  {key[3]:>4}  {m1['time']:>10.2f}  "
              f"{m1['bus_bw']:>10.3f}  {m2['time']:>12.2f}  {m2['bus_bw']:>12.3f}  "
              f"{(f'{ratio:.2f}' if ratio else '-'):>6}{wrong}")
    if not keys:
        print("# no sizes in common")
    return 0


if __name__ == "__main__":
    sys.exit(main())
