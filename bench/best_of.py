#!/usr/bin/python3
"""Merge the repetitions of one library's sweep (bench/compare --repeat, bench/compare-cluster
--repeat) into one results file:

  bench/best_of.py OUT.json REP1.json [REP2.json ...]

At every row, the out-of-place and the in-place measurement with the shortest time, each from
whichever run had it (the row's "repeat" says which); a wrong value in any run stays in the result.
A row only some files have (bench/compare --by-collective: a file per collective) is taken as it is.
Other work on a shared machine only ever slows a run down, so the best of several is the figure
closest to what the library can do. Standard library only.
"""
import json
import sys


def main(out, reps):
    runs = [json.load(open(f)) for f in reps]
    merged = runs[0]
    key = lambda r: (r["collective"], r["size"], r["type"], r["redop"], r["root"])
    rows = {key(r): r for r in merged["results"]}
    for i, run in enumerate(runs):
        known = set(rows)
        for r in run["results"]:
            m = rows.get(key(r))
            if key(r) not in known:
                rows[key(r)] = r
                merged["results"].append(r)
                for side in ("out_of_place", "in_place"):
                    if isinstance(r.get(side), dict):
                        r[side]["repeat"] = i + 1
                continue
            for side in ("out_of_place", "in_place"):
                a, b = m.get(side), r.get(side)
                if not isinstance(a, dict) or not isinstance(b, dict):
                    continue
                wrong = max(a.get("nwrong") or 0, b.get("nwrong") or 0)
                if i == 0:
                    a["repeat"] = 1
                elif b.get("time", 0) > 0 and (a.get("time", 0) <= 0 or b["time"] < a["time"]):
                    m[side] = dict(b, repeat=i + 1)
                if isinstance(m[side].get("nwrong"), int):
                    m[side]["nwrong"] = wrong
        # A file of other collectives adds them to the list and their summaries.
        for c in run.get("collectives", []):
            if c not in merged.setdefault("collectives", []):
                merged["collectives"].append(c)
                merged.setdefault("per_collective", []).extend(
                    p for p in run.get("per_collective", []) if p.get("collective") == c)
    merged["repeats"] = len(runs)
    errors = [run.get("errors") for run in runs]
    merged["errors"] = sum(errors) if all(isinstance(e, int) for e in errors) else merged.get("errors")
    with open(out, "w") as f:
        json.dump(merged, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2:])
