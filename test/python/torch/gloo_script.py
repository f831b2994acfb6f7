"""A script written for Gloo, as a user has it: env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
from the launcher) and a few collectives; it prints what it got. ferryrun_parity.py runs it under
ferryrun as it is and with only the backend name changed to "ferry", and compares the outputs.
"""
import torch
import torch.distributed as dist

import ferry  # noqa: F401  registers "ferry" (unused under Gloo)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.arange(6, dtype=torch.float32).reshape(2, 3) * (rank + 1)
dist.all_reduce(t)
print("all_reduce", t.tolist())
b = torch.full((4,), float(rank))
dist.broadcast(b, world - 1)
print("broadcast", b.tolist())
outs = [torch.empty(3, dtype=torch.int64) for _ in range(world)]
dist.all_gather(outs, torch.arange(3) + 10 * rank)
print("all_gather", [o.tolist() for o in outs])
m = torch.tensor([rank * 7 % 5], dtype=torch.int32)
dist.all_reduce(m, op=dist.ReduceOp.MAX)
print("max", m.item())
if rank == 0:
    got = sorted(int(dist.recv(torch.empty(1))) for _ in range(world - 1))
    print("senders", got)
else:
    dist.send(torch.ones(1), 0)
dist.barrier()
dist.destroy_process_group()
