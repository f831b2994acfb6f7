#!/usr/bin/python3
"""ferry-sim against rank count: 8 B latency and 1 GiB bus bandwidth of every algorithm row.

  bench/sim_scale.py [--topology FILE] [--collective all_reduce] [--ranks 8,16,...] [-o PREFIX] [--sim PATH]

Runs build/tools/ferry-sim once per rank count (sizes 8 B and 1 GiB) with every algorithm row of
the collective that runs over messages, and the tuner's choice: whatever rows the algorithm table
has, so rows added later (trees, ...) appear without a change here. Prints a markdown table
(docs/SCALE.md) and writes PREFIX-latency.svg and PREFIX-busbw.svg (plain SVG: no plotting library needed).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(sim, topology, coll, ranks, small, large):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        t0 = time.time()
        proc = subprocess.run([sim, "--topology", topology, "--ranks", str(ranks), coll, "-b", str(small), "-e",
                               str(large), "-f", str(large // small), "-J", out], capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode != 0:
            raise SystemExit(f"sim_scale.py: ferry-sim failed: {proc.stderr}")
        rows = {}
        for name in sorted(os.listdir(d)):
            doc = json.load(open(os.path.join(d, name)))
            algo = doc["library"].split(" ", 1)[1]
            rows[algo] = {r["size"]: (r["out_of_place"]["time"], r["out_of_place"]["bus_bw"], r["algorithm"])
                          for r in doc["results"]}
        return rows, wall


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    p = argparse.ArgumentParser()
    p.add_argument("--topology", default=os.path.join(root, "tools/ferry_sim/topologies/dgx_h100_rail.ini"))
    p.add_argument("--collective", default="all_reduce")
    p.add_argument("--ranks", default="8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768")
    p.add_argument("--small", type=int, default=8)
    p.add_argument("--large", type=int, default=1 << 30)
    p.add_argument("-o", "--output", default="sim-scale")
    p.add_argument("--sim", default=os.path.join(root, os.environ.get("FERRY_BUILD_DIR", "build"), "tools/ferry-sim"))
    a = p.parse_args()
    counts = [int(x) for x in a.ranks.split(",")]
    table = {}  # algo -> ranks -> (latency us, busbw GB/s, chosen rows)
    walls = {}
    for n in counts:
        rows, walls[n] = run(a.sim, a.topology, a.collective, n, a.small, a.large)
        for algo, pts in rows.items():
            lat = pts.get(a.small)
            bw = pts.get(a.large)
            table.setdefault(algo, {})[n] = (lat[0] if lat else None, bw[1] if bw else None,
                                            f"{lat[2] if lat else '-'}/{bw[2] if bw else '-'}")
        print(f"sim_scale: {n} ranks simulated in {walls[n]:.1f} s", file=sys.stderr)
    algos = [x for x in table if x != "choice"] + (["choice"] if "choice" in table else [])
    print(f"{a.collective} on {os.path.basename(a.topology)}: {a.small} B latency (us) / {a.large >> 20} MiB busbw (GB/s)\n")
    print("| ranks | " + " | ".join(algos) + " | ferry's choice (8 B / large) | wall (s) |")
    print("|---:|" + "---:|" * len(algos) + "---|---:|")
    for n in counts:
        cells = []
        for algo in algos:
            lat, bw, _ = table[algo].get(n, (None, None, ""))
            cells.append(f"{lat:.1f} / {bw:.1f}" if lat is not None and bw is not None else
                         (f"{lat:.1f} / -" if lat is not None else (f"- / {bw:.1f}" if bw is not None else "-")))
        chosen = table.get("choice", {}).get(n, (None, None, "-"))[2]
        print(f"| {n} | " + " | ".join(cells) + f" | {chosen} | {walls[n]:.1f} |")
    for idx, label, name in ((0, f"{a.small} B {a.collective}: time (us)", "latency"),
                             (1, f"{a.large >> 20} MiB {a.collective}: busbw (GB/s)", "busbw")):
        series = []
        for algo in algos:
            pts = [(n, table[algo][n][idx]) for n in counts if table[algo].get(n, (None, None))[idx]]
            if pts:
                series.append(("ferry's choice" if algo == "choice" else algo, pts))
        with open(f"{a.output}-{name}.svg", "w") as f:
            f.write(svg_chart(series, f"ferry-sim, {os.path.basename(a.topology)}: {label}", log_y=idx == 0))


def svg_chart(series, title, log_y):
    """A log-x line chart as SVG text (no plotting library needed)."""
    import math
    w, h, left, right, top, bottom = 720, 440, 70, 150, 40, 50
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    if not xs:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    fy = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    y0, y1 = (fy(min(ys)), fy(max(ys))) if log_y else (0.0, max(ys) * 1.05)
    if x1 == x0:
        x1 += 1
    if y1 == y0:
        y1 += 1
    px = lambda x: left + (math.log2(x) - x0) / (x1 - x0) * (w - left - right)
    py = lambda y: h - bottom - (fy(y) - y0) / (y1 - y0) * (h - top - bottom)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>",
           f"<rect width='{w}' height='{h}' fill='white'/>",
           f"<text x='{w / 2}' y='22' text-anchor='middle' font-size='14'>{title}</text>",
           f"<line x1='{left}' y1='{h - bottom}' x2='{w - right}' y2='{h - bottom}' stroke='black'/>",
           f"<line x1='{left}' y1='{top}' x2='{left}' y2='{h - bottom}' stroke='black'/>"]
    for x in sorted(set(xs)):
        out.append(f"<text x='{px(x):.1f}' y='{h - bottom + 16}' text-anchor='middle'>{x}</text>")
    out.append(f"<text x='{(left + w - right) / 2}' y='{h - 12}' text-anchor='middle'>ranks</text>")
    for i in range(6):
        v = y0 + (y1 - y0) * i / 5
        val = 10 ** v if log_y else v
        y = h - bottom - i / 5 * (h - top - bottom)
        out.append(f"<line x1='{left}' y1='{y:.1f}' x2='{w - right}' y2='{y:.1f}' stroke='#ddd'/>")
        out.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{val:.3g}</text>")
    for i, (name, pts) in enumerate(series):
        c = colors[i % len(colors)]
        dash = " stroke-dasharray='6,3'" if name == "ferry's choice" else ""
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f"<path d='{path}' fill='none' stroke='{c}' stroke-width='2'{dash}/>")
        for x, y in pts:
            out.append(f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='3' fill='{c}'/>")
        ly = top + 10 + 18 * i
        out.append(f"<line x1='{w - right + 10}' y1='{ly}' x2='{w - right + 30}' y2='{ly}' stroke='{c}' stroke-width='2'{dash}/>")
        out.append(f"<text x='{w - right + 35}' y='{ly + 4}'>{name}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"

if __name__ == "__main__":
    main()
