"""ferry.torch: CPU tensors in shared memory that the other ranks of this host map.

    import torch, ferry.torch
    net = ferry.torch.shared_ddp(model)           # DistributedDataParallel, its buckets in shared memory
    with ferry.torch.shared_allocator():          # tensors of >= 64 KiB go to shared memory
        ...
    t = ferry.torch.empty(1 << 20)                # one tensor in shared memory, whatever its size

Collectives whose tensors are all in such memory read the peers' tensors in place instead of
copying them through shared mailboxes (docs/PYTHON.md, "Tensors in shared memory"). Importing this
module also registers the c10d backend "ferry".
"""
import math as _math

import torch as _torch

from ferry import torch_backend as _torch_backend  # noqa: F401  (registers "ferry"; says why _c10d is missing)
from ferry import _c10d

#: Bytes from which shared_allocator() places a tensor in shared memory, unless told otherwise.
DEFAULT_THRESHOLD = _c10d.SHARED_ALLOCATOR_THRESHOLD


class SharedAllocator:
    """The handle shared_allocator() returns: close() (or the end of a ``with`` block) restores the
    allocator torch had when it was made. Tensors allocated meanwhile keep their memory."""

    def __init__(self, threshold):
        if threshold < 0:
            raise ValueError(f"ferry.torch.shared_allocator: threshold is {threshold}; expected bytes >= 0")
        self._was_on = _c10d.shared_allocator_installed()
        self._old_threshold = _c10d.shared_allocator_threshold()
        _c10d.shared_allocator_install(threshold)
        self._open = True
        self.threshold = threshold

    def close(self):
        """Restore the previous state: torch's own allocator, or the outer shared_allocator's threshold."""
        if not self._open:
            return
        self._open = False
        if self._was_on:
            _c10d.shared_allocator_install(self._old_threshold)
        else:
            _c10d.shared_allocator_uninstall()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def shared_allocator(threshold=DEFAULT_THRESHOLD):
    """Make torch allocate CPU tensors of at least `threshold` bytes in shared memory (hostAlloc) from
    now on, until the returned handle is closed (or its ``with`` block ends). Smaller tensors, and any
    the system refuses shared memory for, come from torch's previous allocator. Calls nest."""
    return SharedAllocator(int(threshold))


def shared_allocator_enabled():
    """Whether torch's CPU allocator is ferry's shared one now."""
    return _c10d.shared_allocator_installed()


def shared_ddp(module, *args, threshold=DEFAULT_THRESHOLD, **kwargs):
    """torch.nn.parallel.DistributedDataParallel(module, *args, **kwargs) with its gradient buckets in
    shared memory, and the gradients views of them (gradient_as_bucket_view=True unless given).

    DDP makes its buckets when it is constructed and makes them again once, at its second step, in
    the order the gradients became ready (in the forward pass, or in the backward with
    static_graph=True). So the allocator is on from construction until the third forward call starts
    (its handle is the module's ``ferry_shared_allocator``): the two first steps' temporaries are
    shared as well, the later steps' are torch's."""
    from torch.nn.parallel import DistributedDataParallel

    kwargs.setdefault("gradient_as_bucket_view", True)
    handle = shared_allocator(threshold)
    try:
        ddp = DistributedDataParallel(module, *args, **kwargs)
    except BaseException:
        handle.close()
        raise
    ddp.ferry_shared_allocator = handle
    calls = [0]

    def pre_forward(mod, inputs):
        calls[0] += 1
        if calls[0] == 3:
            handle.close()
            hook.remove()

    hook = ddp.register_forward_pre_hook(pre_forward)
    return ddp


def empty(*size, dtype=None):
    """A contiguous CPU tensor of `size` in shared memory, whatever its size (zero-filled)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, _torch.Size)):
        size = tuple(size[0])
    dtype = dtype if dtype is not None else _torch.get_default_dtype()
    count = _math.prod(int(s) for s in size)
    if count < 0 or any(int(s) < 0 for s in size):
        raise ValueError(f"ferry.torch.empty: size {tuple(size)}; expected sizes >= 0")
    itemsize = _torch.empty((), dtype=dtype).element_size()
    return _c10d.shared_bytes(count * itemsize).view(dtype).reshape(size)


zeros = empty

__all__ = ["DEFAULT_THRESHOLD", "SharedAllocator", "shared_allocator", "shared_allocator_enabled", "shared_ddp",
           "empty", "zeros"]
