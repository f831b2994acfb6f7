#!/usr/bin/env python3
"""Validates ferry-perf / mpi-perf JSON results against the schema in docs/BENCHMARKS.md.

  check_perf_json.py FILE [--nranks N] [--clean]     validate a results file
  check_perf_json.py --sample PERF_JSON_SAMPLE        generate the sample file and validate it

--clean also requires a successful run: no wrong values, no errors, rows for every collective.
The check is strict about keys (unknown ones fail), so the documented schema and the writer
cannot drift apart. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SCHEMA = "ferry-perf/1"
COLLECTIVES = {"all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce", "sendrecv"}
TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
         "f8e5m2"}
OPS = {"sum", "prod", "max", "min", "avg"}
NUMBER = (int, float)


class SchemaError(Exception):
    pass


def expect(cond, where, what):
    if not cond:
        raise SchemaError(f"{where}: {what}")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_keys(obj, where, required, optional=()):
    expect(isinstance(obj, dict), where, f"expected an object, got {type(obj).__name__}")
    missing = [k for k in required if k not in obj]
    unknown = [k for k in obj if k not in required and k not in optional]
    expect(not missing, where, f"missing keys {missing}")
    expect(not unknown, where, f"unknown keys {unknown} (update docs/BENCHMARKS.md and this checker together)")


def check_measurement(m, where, nranks):
    check_keys(m, where, ["time", "alg_bw", "bus_bw", "nwrong", "wrong_per_rank", "iterations", "warmup_iterations"],
               ["settle_iterations"])
    for k in ("time", "alg_bw", "bus_bw"):
        expect(isinstance(m[k], NUMBER) and m[k] >= 0, where, f"{k} must be a number >= 0, got {m[k]!r}")
    expect(is_int(m["iterations"]) and m["iterations"] >= 1, where, "iterations must be an integer >= 1")
    expect(is_int(m["warmup_iterations"]) and m["warmup_iterations"] >= 0, where, "warmup_iterations must be >= 0")
    if "settle_iterations" in m:
        expect(is_int(m["settle_iterations"]) and m["settle_iterations"] >= 0, where,
               "settle_iterations must be an integer >= 0")
    if m["nwrong"] is None:
        expect(m["wrong_per_rank"] is None, where, "wrong_per_rank must be null when nwrong is")
        return
    expect(is_int(m["nwrong"]) and m["nwrong"] >= 0, where, "nwrong must be null or an integer >= 0")
    per = m["wrong_per_rank"]
    expect(isinstance(per, list) and len(per) == nranks and all(is_int(w) and w >= 0 for w in per), where,
           f"wrong_per_rank must list {nranks} counts")
    expect(sum(per) == m["nwrong"], where, "nwrong must be the sum of wrong_per_rank")


def check_summary(s, where):
    check_keys(s["out_of_bounds"], where + ".out_of_bounds", ["count", "okay"])
    expect(is_int(s["out_of_bounds"]["count"]), where, "out_of_bounds.count must be an integer")
    expect(isinstance(s["out_of_bounds"]["okay"], bool), where, "out_of_bounds.okay must be a boolean")
    check_keys(s["average_bus_bandwidth"], where + ".average_bus_bandwidth", ["bandwidth", "okay"])
    expect(isinstance(s["average_bus_bandwidth"]["bandwidth"], NUMBER), where, "bandwidth must be a number")


def validate(doc, nranks=None, clean=False):
    check_keys(doc, "top level",
               ["schema", "tool", "tool_version", "library", "start_time", "args", "env", "nranks", "collectives",
                "config", "host", "devices", "results", "per_collective", "out_of_bounds", "average_bus_bandwidth",
                "memory", "errors", "end_time"])
    expect(doc["schema"] == SCHEMA, "schema", f"expected {SCHEMA!r}, got {doc['schema']!r}")
    for k in ("tool", "tool_version", "library", "start_time", "end_time", "host"):
        expect(isinstance(doc[k], str), k, "must be a string")
    expect(isinstance(doc["args"], list) and all(isinstance(a, str) for a in doc["args"]), "args", "strings")
    expect(isinstance(doc["env"], dict) and all(isinstance(v, str) for v in doc["env"].values()), "env", "strings")
    expect(not any("SECRET" in k for k in doc["env"]), "env", "must not carry secrets")
    n = doc["nranks"]
    expect(is_int(n) and n >= 1, "nranks", "must be an integer >= 1")
    expect(nranks is None or n == nranks, "nranks", f"expected {nranks}, got {n}")
    expect(isinstance(doc["collectives"], list) and set(doc["collectives"]) <= COLLECTIVES, "collectives",
           "must list known collectives")

    cfg = doc["config"]
    step = "step_factor" if "step_factor" in cfg else "step_bytes"
    check_keys(cfg, "config", ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes", step, "warmup_iters",
                               "iterations", "aggregated_iterations", "run_cycles", "validation",
                               "blocking_collectives", "local_register", "average", "timeout", "iter_budget",
                               "datatype", "op", "root"])
    for k in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", step, "warmup_iters", "iterations",
              "aggregated_iterations", "run_cycles", "validation", "local_register", "average", "timeout",
              "iter_budget"):
        expect(is_int(cfg[k]), f"config.{k}", "must be an integer")
    expect(isinstance(cfg["blocking_collectives"], bool), "config.blocking_collectives", "must be a boolean")
    expect(cfg["datatype"] in TYPES | {"all"}, "config.datatype", f"unknown {cfg['datatype']!r}")
    expect(cfg["op"] in OPS | {"all"}, "config.op", f"unknown {cfg['op']!r}")
    expect(is_int(cfg["root"]) or cfg["root"] == "all", "config.root", "must be an integer or 'all'")

    expect(isinstance(doc["devices"], list), "devices", "must be a list")
    for i, d in enumerate(doc["devices"]):
        check_keys(d, f"devices[{i}]", ["rank", "group", "pid", "hostname", "device", "device_info"])
        expect(d["rank"] == i, f"devices[{i}]", "devices must be in rank order")
        expect(d["device"] in ("cpu", "cuda"), f"devices[{i}]", "device must be 'cpu' (host memory) or 'cuda' (--gpu-ranks)")
    expect(not doc["devices"] or len(doc["devices"]) == n, "devices", "one per rank")

    expect(isinstance(doc["results"], list), "results", "must be a list")
    for i, r in enumerate(doc["results"]):
        where = f"results[{i}]"
        check_keys(r, where, ["collective", "size", "count", "type", "redop", "root", "out_of_place", "in_place"])
        expect(r["collective"] in doc["collectives"], where, f"collective {r['collective']!r} not in collectives")
        expect(is_int(r["size"]) and r["size"] >= 0 and is_int(r["count"]) and r["count"] >= 0, where, "size, count")
        expect(r["type"] in TYPES, where, f"unknown type {r['type']!r}")
        expect(r["redop"] in OPS | {"none"}, where, f"unknown redop {r['redop']!r}")
        expect(is_int(r["root"]) and -1 <= r["root"] < n, where, "root must be -1 or a rank")
        check_measurement(r["out_of_place"], where + ".out_of_place", n)
        check_measurement(r["in_place"], where + ".in_place", n)

    expect(isinstance(doc["per_collective"], list), "per_collective", "must be a list")
    for i, s in enumerate(doc["per_collective"]):
        check_keys(s, f"per_collective[{i}]", ["collective", "out_of_bounds", "average_bus_bandwidth"])
        check_summary(s, f"per_collective[{i}]")
    check_summary(doc, "top level")
    if doc["memory"] is not None:
        check_keys(doc["memory"], "memory", ["initialization", "user_allocated", "collective"])
        expect(all(is_int(v) for v in doc["memory"].values()), "memory", "integers")
    expect(isinstance(doc["errors"], list) and all(isinstance(e, str) for e in doc["errors"]), "errors", "strings")

    if clean:
        expect(not doc["errors"], "errors", f"run failed: {doc['errors']}")
        expect(doc["out_of_bounds"]["count"] == 0, "out_of_bounds", "wrong values")
        for i, r in enumerate(doc["results"]):
            for k in ("out_of_place", "in_place"):
                expect(r[k]["nwrong"] in (0, None), f"results[{i}].{k}", f"{r[k]['nwrong']} wrong elements")
        have = {r["collective"] for r in doc["results"]}
        expect(have == set(doc["collectives"]), "results", f"no rows for {set(doc['collectives']) - have}")


def check_sample(exe):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sample.json")
        subprocess.run([exe, path], check=True)
        with open(path) as f:
            doc = json.load(f)
    validate(doc, nranks=2)
    expect(doc["devices"][0]["hostname"] == 'host"quoted"', "devices[0]", "quotes must survive escaping")
    expect(doc["devices"][1]["device_info"] == "cpu Example\\Model", "devices[1]", "backslashes must survive")
    bad = [r for r in doc["results"] if r["out_of_place"]["nwrong"]]
    expect(len(bad) == 1 and bad[0]["out_of_place"]["wrong_per_rank"] == [0, 3], "results", "the wrong row")
    expect(doc["out_of_bounds"] == {"count": 1, "okay": False}, "out_of_bounds", "one rank-measurement wrong")
    na = [r for r in doc["results"] if r["collective"] == "sendrecv"][0]["in_place"]
    expect(na["nwrong"] is None and na["wrong_per_rank"] is None, "sendrecv in_place", "N/A must be null")
    expect(doc["memory"] == {"initialization": 1 << 20, "user_allocated": 2 << 20, "collective": 3 << 20}, "memory", "")
    expect(doc["errors"] == ["an example error"], "errors", "the example error")
    expect(len(doc["per_collective"]) == 7, "per_collective", "one per collective")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?")
    p.add_argument("--sample", metavar="EXE", help="run the sample writer and validate its output")
    p.add_argument("--nranks", type=int)
    p.add_argument("--clean", action="store_true", help="also require a successful run")
    a = p.parse_args()
    try:
        if a.sample:
            check_sample(a.sample)
            print("sample JSON matches the schema")
        else:
            with open(a.file) as f:
                validate(json.load(f), a.nranks, a.clean)
            print(f"{a.file}: matches {SCHEMA}")
    except (SchemaError, json.JSONDecodeError, OSError, subprocess.CalledProcessError) as e:
        print(f"check_perf_json: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
