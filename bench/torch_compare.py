#!/usr/bin/python3
"""torch-compare: the same torch.distributed calls on Gloo and on ferry's c10d backend, side by side.

    bench/torch_compare.py [--ranks 2 4] [-b 1K] [-e 256M] [--out bench/results/torch]

For each rank count and collective it runs bench/gloo_perf.py twice, back to back (Gloo, then
ferry), over the same sizes, and prints one table per pair: time per call and bus bandwidth of
both (out of place, float32 sum, every element checked), and ferry's speed-up (Gloo's time over
ferry's). Collectives: all_reduce, all_gather, reduce_scatter (ferry only: Gloo in torch 1.13 has
none) and alltoall (all_to_all_single). Both backends see identical Python calls, so the difference
is the backend's. Writes the JSON of every run and a Markdown table (torch_compare.md) to --out.
Run it with Debian's /usr/bin/python3 after ./run build (ferry's package is taken from build/python).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COLLS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
LABEL = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
         "alltoall": "all_to_all"}


def human(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def run(backend, n, coll, a, out_dir):
    """One gloo_perf.py sweep; returns {size: (time_us, busbw)} of the out-of-place runs, or None."""
    path = os.path.join(out_dir, f"{backend}-{n}ranks-{coll}.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(a.build, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("UCX_NET_DEVICES", "lo")
    cmd = [sys.executable, os.path.join(HERE, "gloo_perf.py"), "--backend", backend, "--nranks", str(n), coll,
           "-b", a.minbytes, "-e", a.maxbytes, "-f", "2", "-n", str(a.iters), "-w", str(a.warmup),
           "--iter_budget", a.iter_budget, "-J", path]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(path):
        print(f"torch-compare: {backend} {coll} at {n} ranks failed (exit {p.returncode}):\n{p.stdout[-2000:]}",
              file=sys.stderr)
        return None
    with open(path) as f:
        doc = json.load(f)
    if doc.get("out_of_bounds", {}).get("count", 0):
        print(f"torch-compare: {backend} {coll} at {n} ranks: WRONG VALUES (see {path})", file=sys.stderr)
        return None
    return {r["size"]: (r["out_of_place"]["time"], r["out_of_place"]["bus_bw"]) for r in doc["results"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--colls", nargs="+", default=COLLS, choices=COLLS)
    ap.add_argument("-b", "--minbytes", default="1K")
    ap.add_argument("-e", "--maxbytes", default="256M")
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--iter_budget", default="512M", help="iterations x size per size at most (as ferry-perf)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "torch"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    md = [f"torch.distributed on this host ({time.strftime('%Y-%m-%d %H:%M')}, load average "
          f"{os.getloadavg()[0]:.2f} at the start): float32 sum, out of place, time per call in us, bus "
          "bandwidth in GB/s; speed-up = Gloo's time / ferry's.", ""]
    status = 0
    for n in a.ranks:
        for coll in a.colls:
            gloo = run("gloo", n, coll, a, a.out) if coll != "reduce_scatter" else {}
            fer = run("ferry", n, coll, a, a.out)
            if gloo is None or fer is None:
                status = 1
                continue
            title = f"{LABEL[coll]}, {n} ranks"
            head = f"{'size':>10}  {'gloo us':>10}  {'gloo GB/s':>9}  {'ferry us':>10}  {'ferry GB/s':>10}  {'speed-up':>8}"
            print(f"\n# {title}\n{head}")
            md += [f"**{title}**", "", "| size | Gloo time (us) | Gloo busbw (GB/s) | ferry time (us) | "
                   "ferry busbw (GB/s) | speed-up |", "|---:|---:|---:|---:|---:|---:|"]
            for size in sorted(fer):
                ft, fb = fer[size]
                if size in gloo:
                    gt, gb = gloo[size]
                    ratio = f"{gt / ft:.2f}x" if ft > 0 else "-"
                    gts, gbs = f"{gt:.1f}", f"{gb:.3f}"
                else:
                    gts = gbs = ratio = "n/a"
                print(f"{human(size):>10}  {gts:>10}  {gbs:>9}  {ft:>10.1f}  {fb:>10.3f}  {ratio:>8}", flush=True)
                md.append(f"| {human(size)} | {gts} | {gbs} | {ft:.1f} | {fb:.3f} | {ratio} |")
            md.append("")
    with open(os.path.join(a.out, "torch_compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"\n# tables in {os.path.join(a.out, 'torch_compare.md')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
