#!/usr/bin/python3
"""Charts of ferry-train --json results.

  strategies/plot_train.py -o PREFIX RESULT.json [RESULT.json ...]

Writes PREFIX-loss.png: the loss curve of every run, one line per file (label: strategy and rank
count). For each run with a pipeline timeline, PREFIX-timeline-STRATEGY.png: per stage (one row
each) the forward (light) and backward (dark) of every micro-batch of the last step, numbered,
against time; each stage's clock starts at its own start of the step. When the files hold one
strategy at several rank counts (ps and ddp, say), PREFIX-scaling.png: per strategy against the
rank count, the busiest rank's bytes sent per step and the slowest rank's mean step time.
Needs python3-matplotlib.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--prefix", required=True)
    ap.add_argument("results", nargs="+")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for path in args.results:
        with open(path) as f:
            runs.append(json.load(f))

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        steps = [i for i, v in enumerate(r["loss"]) if v is not None]
        ax.plot(steps, [r["loss"][i] for i in steps], marker="o", label=f'{r["strategy"]} ({r["ranks"]} ranks)')
    ax.set_xlabel("step")
    ax.set_ylabel("loss (mean over the global batch)")
    ax.set_title("ferry-train loss curves")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.prefix + "-loss.png", dpi=110)
    plt.close(fig)

    by_strategy = {}
    for r in runs:
        by_strategy.setdefault(r["strategy"], []).append(r)
    if any(len({r["ranks"] for r in rs}) > 1 for rs in by_strategy.values()):
        fig, (bytes_ax, time_ax) = plt.subplots(1, 2, figsize=(10, 4))
        for name, rs in sorted(by_strategy.items()):
            rs = sorted(rs, key=lambda r: r["ranks"])
            ranks = [r["ranks"] for r in rs]
            bytes_ax.plot(ranks, [max(p["bytes_sent"] for p in r["per_rank"]) / 1e6 for r in rs], marker="o",
                          label=name)
            time_ax.plot(ranks, [max(p["step_ms"] for p in r["per_rank"]) for r in rs], marker="o", label=name)
        all_ranks = sorted({r["ranks"] for r in runs})
        bytes_ax.set_xticks(all_ranks)
        time_ax.set_xticks(all_ranks)
        bytes_ax.set_xlabel("ranks")
        bytes_ax.set_ylabel("busiest rank's MB sent per step")
        time_ax.set_xlabel("ranks")
        time_ax.set_ylabel("slowest rank's mean step (ms)")
        bytes_ax.legend()
        time_ax.legend()
        fig.suptitle("the same model and global batch as ranks grow")
        fig.tight_layout()
        fig.savefig(args.prefix + "-scaling.png", dpi=110)
        plt.close(fig)

    for r in runs:
        if "timeline" not in r:
            continue
        stages = r["timeline"]
        fig, ax = plt.subplots(figsize=(9, 0.6 * len(stages) + 1.2))
        for s, events in enumerate(stages):
            for forward, micro, start, end in events:
                color = "#8fb8de" if forward else "#2a5d8f"
                ax.barh(s, end - start, left=start, color=color, edgecolor="black", linewidth=0.4)
                ax.text((start + end) / 2, s, str(micro), ha="center", va="center", fontsize=7,
                        color="black" if forward else "white")
        ax.set_yticks(range(len(stages)))
        ax.set_yticklabels([f"stage {s}" for s in range(len(stages))])
        ax.invert_yaxis()
        ax.set_xlabel("ms from the stage's start of the step")
        m = r["config"]["micro_batches"]
        ax.set_title(f'{r["strategy"]}: {len(stages)} stages, {m} micro-batches (light: forward, dark: backward)')
        fig.tight_layout()
        fig.savefig(f'{args.prefix}-timeline-{r["strategy"]}.png', dpi=110)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
