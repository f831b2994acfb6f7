"""The c10d backend "ferry": importing this module registers it with torch.distributed.

    import torch.distributed as dist
    import ferry.torch_backend  # or `import ferry` after `import torch`
    dist.init_process_group(backend="ferry", ...)

The ranks meet through torch's Store (whatever init_method gave: env://, tcp://, file://): rank 0
starts ferry's rendezvous and publishes its id there, the others read it. Every collective runs on
the communicator's progress thread and returns a Work whose future completes when it is done.
"""
import torch.distributed as _dist

try:
    from ferry import _c10d
except ImportError as _e:  # built without libtorch-dev, or against another torch
    raise ImportError(
        "ferry's PyTorch backend is not available: " + str(_e) +
        " (it is built when python3-torch and libtorch-dev are installed; rebuild ferry)") from _e

BACKEND_NAME = "ferry"


def _create(store, rank, world_size, timeout):
    """torch.distributed's factory signature (store, rank, world_size, timeout)."""
    return _c10d.ProcessGroupFerry(store, rank, world_size, timeout)


if BACKEND_NAME.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND_NAME, _create)

__all__ = ["BACKEND_NAME"]
