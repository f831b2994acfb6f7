"""DistributedDataParallel on the "ferry" backend against the same run on Gloo (issue 8).

    ddp_train.py            (under launch.py) train with both backends, compare on rank 0

Each rank trains the same small model for 20 SGD steps on its own deterministic batches, first
with backend="gloo", then with backend="ferry" (two process groups in turn, same seeds). DDP
averages the gradients through the backend (several buckets: bucket_cap_mb is tiny), so the
final parameters depend only on the backend's all-reduce. Rank 0 gathers nothing: every rank
checks that its own final parameters agree (max |ferry - gloo| <= 1e-6) and that they agree
with rank 0's (DDP keeps replicas identical). At 2 ranks, a third run on "ferry" through
ferry.torch.shared_ddp() (issue 36: shared_allocator() while DDP makes its buckets, the gradients
views of them) must have its buckets in shared memory after the 20 steps (DDP rebuilt them at the
second) and give the same parameters.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.torch  # noqa: F401  registers "ferry"; shared_allocator

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
STEPS = 20


def model():
    torch.manual_seed(1234 + RANK)  # replicas start apart: DDP must broadcast rank 0's
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def in_shared_memory(addr):
    """Whether `addr` lies in hostAlloc's shared memory ("memfd:ferry-host-N" in /proc/self/maps)."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi:
                return len(fields) > 5 and "memfd:ferry-host-" in fields[5]
    return False


def train(backend, shared=False):
    store = os.environ["FERRY_TEST_STORE"] + "." + backend + (".shared" if shared else "")
    dist.init_process_group(backend, init_method="file://" + store, rank=RANK, world_size=WORLD)
    if shared:
        # The buckets (~5 KB) are below the default threshold: share everything of 1 KiB and more.
        net = ferry.torch.shared_ddp(model(), bucket_cap_mb=0.005, threshold=1024)
    else:
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
    if shared:
        assert not ferry.torch.shared_allocator_enabled(), "shared_ddp left the allocator on after 3 steps"
        big = [p for p in net.parameters() if p.numel() * 4 >= 1024]
        assert all(in_shared_memory(p.grad.data_ptr()) for p in big), \
            f"rank {RANK}: under shared_allocator() DDP's buckets (the gradients' memory) are not in shared memory"
    params = torch.cat([p.detach().reshape(-1).clone() for p in net.parameters()])
    # Every replica must hold the same parameters: compare with rank 0's through the backend.
    ref = params.clone()
    dist.broadcast(ref, 0)
    dist.destroy_process_group()
    return params, ref, losses


def main():
    gloo, gloo_ref, gloo_loss = train("gloo")
    fer, fer_ref, fer_loss = train("ferry")
    if WORLD == 2:  # one world size is enough for the allocator, and each run costs a second
        sh, sh_ref, _ = train("ferry", shared=True)
        sdiff = (sh - fer).abs().max().item()
        print(f"rank {RANK}: shared_ddp: max |shared - plain| = {sdiff:.3g}")
        assert torch.equal(sh, sh_ref), f"rank {RANK}: ferry replicas differ from rank 0's under shared_ddp()"
        assert sdiff <= 1e-6, f"rank {RANK}: parameters with and without shared_ddp() differ by {sdiff}"
    diff = (fer - gloo).abs().max().item()
    print(f"rank {RANK}: {fer.numel()} parameters, {STEPS} steps; loss {fer_loss[0]:.4f} -> {fer_loss[-1]:.4f} "
          f"(gloo {gloo_loss[-1]:.4f}); max |ferry - gloo| = {diff:.3g}")
    assert fer_loss[-1] < fer_loss[0], "training did not reduce the loss"
    assert torch.equal(fer, fer_ref), f"rank {RANK}: ferry replicas differ from rank 0's"
    assert torch.equal(gloo, gloo_ref), f"rank {RANK}: gloo replicas differ from rank 0's"
    assert diff <= 1e-6, f"rank {RANK}: ferry and gloo parameters differ by {diff} (limit 1e-6)"


if __name__ == "__main__":
    main()
