"""DistributedDataParallel on the "ferry" backend against the same run on Gloo (issue 8).

    ddp_train.py            (under launch.py) train with both backends, compare on rank 0

Each rank trains the same small model for 20 SGD steps on its own deterministic batches, first
with backend="gloo", then with backend="ferry" (two process groups in turn, same seeds). DDP
averages the gradients through the backend (several buckets: bucket_cap_mb is tiny), so the
final parameters depend only on the backend's all-reduce. Rank 0 gathers nothing: every rank
checks that its own final parameters agree (max |ferry - gloo| <= 1e-6) and that they agree
with rank 0's (DDP keeps replicas identical).
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.torch_backend  # noqa: F401  registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
STEPS = 20


def model():
    torch.manual_seed(1234 + RANK)  # replicas start apart: DDP must broadcast rank 0's
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def train(backend):
    store = os.environ["FERRY_TEST_STORE"] + "." + backend
    dist.init_process_group(backend, init_method="file://" + store, rank=RANK, world_size=WORLD)
    net = DDP(model(), bucket_cap_mb=0.005)  # ~5 KB buckets: several all-reduces per step
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    # A learnable task: labels from a fixed linear teacher, the same on every rank; inputs per rank.
    teacher = torch.randn(32, 10, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(99 + RANK)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(64, 32, generator=gen)
        y = (x @ teacher).argmax(1)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = torch.cat([p.detach().reshape(-1).clone() for p in net.parameters()])
    # Every replica must hold the same parameters: compare with rank 0's through the backend.
    ref = params.clone()
    dist.broadcast(ref, 0)
    dist.destroy_process_group()
    return params, ref, losses


def main():
    gloo, gloo_ref, gloo_loss = train("gloo")
    fer, fer_ref, fer_loss = train("ferry")
    diff = (fer - gloo).abs().max().item()
    print(f"rank {RANK}: {fer.numel()} parameters, {STEPS} steps; loss {fer_loss[0]:.4f} -> {fer_loss[-1]:.4f} "
          f"(gloo {gloo_loss[-1]:.4f}); max |ferry - gloo| = {diff:.3g}")
    assert fer_loss[-1] < fer_loss[0], "training did not reduce the loss"
    assert torch.equal(fer, fer_ref), f"rank {RANK}: ferry replicas differ from rank 0's"
    assert torch.equal(gloo, gloo_ref), f"rank {RANK}: gloo replicas differ from rank 0's"
    assert diff <= 1e-6, f"rank {RANK}: ferry and gloo parameters differ by {diff} (limit 1e-6)"


if __name__ == "__main__":
    main()
