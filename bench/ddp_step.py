#!/usr/bin/python3
"""ddp-step: DistributedDataParallel's step time on backend "ferry", with and without
ferry.torch.shared_allocator() (issue 36), and the all-reduce of DDP's bucket sizes alone.

    bench/ddp_step.py [--ranks 2] [--mb 100] [--steps 20] [--warmup 3] [--build build]

Starts --ranks copies of itself on this host (torch's FileStore in a fresh folder). The model is a
stack of square Linear layers holding --mb MB of float32 parameters (so as many of gradients); the
batch is small (--batch rows), so a step is mostly the gradients' all-reduce. Modes, in turn:
  plain        DDP as it comes (its buckets and the gradients in torch's memory)
  shared       ferry.torch.shared_ddp(gradient_as_bucket_view=False): the buckets are in shared
               memory; the gradients are copied into them every step
  view         plain with gradient_as_bucket_view=True (the gradients are the buckets)
  shared-view  ferry.torch.shared_ddp(): the buckets in shared memory, the gradients views of them
  shared-all   view, with shared_allocator() on for the whole run (every temporary >= 64 KiB too)
Time per step is the median over --steps (forward, backward with DDP's all-reduces, SGD step;
after a barrier). Then all_reduce of one tensor of each bucket size DDP uses (its first bucket,
1 MiB, and bucket_cap_mb, 25 MiB), in torch's memory and in ferry.torch.empty's. Rank 0 prints.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["plain", "shared", "view", "shared-view", "shared-all"]


def launch(a):
    with tempfile.TemporaryDirectory(prefix="ferry-ddp-") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(os.path.abspath(a.build), "python") + (
            ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        procs = [subprocess.Popen([sys.executable] + sys.argv,
                                  env=dict(env, RANK=str(r), WORLD_SIZE=str(a.ranks), DDP_STEP_TMP=tmp))
                 for r in range(a.ranks)]
        return max(p.wait() for p in procs)


def step_times(a, mode, rank, world, tmp, seq):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import ferry.torch as ft

    dist.init_process_group("ferry", init_method=f"file://{tmp}/store.{seq}", rank=rank, world_size=world)
    width = 2048
    layers = max(1, round(a.mb * 1e6 / 4 / (width * width)))
    torch.manual_seed(1)
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    view = mode in ("view", "shared-view", "shared-all")
    handle = ft.shared_allocator() if mode == "shared-all" else None
    if mode in ("shared", "shared-view"):
        net = ft.shared_ddp(model, gradient_as_bucket_view=view)
    else:
        net = DDP(model, gradient_as_bucket_view=view)
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    x = torch.randn(a.batch, width)
    times = []
    for i in range(a.warmup + a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        net(x).square().mean().backward()
        opt.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    if handle is not None:
        handle.close()
    dist.destroy_process_group()
    return layers, times


def bucket_times(a, rank, world, tmp):
    import torch
    import torch.distributed as dist
    import ferry.torch as ft

    dist.init_process_group("ferry", init_method=f"file://{tmp}/store.buckets", rank=rank, world_size=world)
    out = []
    for nbytes in (1 << 20, 25 << 20):
        row = []
        for make in (lambda n: torch.ones(n), lambda n: ft.empty(n).fill_(1.0)):
            t = make(nbytes // 4)
            times = []
            for i in range(a.warmup + a.steps):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                if i >= a.warmup:
                    times.append(time.perf_counter() - t0)
            row.append(statistics.median(times))
        out.append((nbytes, row))
    dist.destroy_process_group()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mb", type=float, default=100.0, help="MB of float32 parameters (and gradients)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    a = ap.parse_args()
    if "RANK" not in os.environ:
        return launch(a)
    import torch
    torch.set_num_threads(1)
    rank, world, tmp = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["DDP_STEP_TMP"]
    rows = []
    for seq, mode in enumerate(a.modes.split(",")):
        layers, times = step_times(a, mode, rank, world, tmp, seq)
        rows.append((mode, statistics.median(times), min(times)))
    buckets = bucket_times(a, rank, world, tmp)
    if rank == 0:
        mb = layers * (2048 * 2048 + 2048) * 4 / 1e6
        print(f"DDP on ferry, {world} ranks, {layers} x Linear(2048, 2048) = {mb:.1f} MB of float32 gradients, "
              f"batch {a.batch}, {a.steps} steps after {a.warmup}, torch.set_num_threads(1)")
        print("| mode | median step (ms) | best (ms) | vs plain |")
        print("|---|---|---|---|")
        base = rows[0][1]
        for mode, med, best in rows:
            print(f"| {mode} | {med * 1e3:.1f} | {best * 1e3:.1f} | {base / med:.2f} |")
        print()
        print("| all_reduce of one bucket | torch.ones (ms) | ferry.torch.empty (ms) | speed-up |")
        print("|---|---|---|---|")
        for nbytes, (plain, shared) in buckets:
            print(f"| {nbytes >> 20} MiB | {plain * 1e3:.2f} | {shared * 1e3:.2f} | {plain / shared:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
