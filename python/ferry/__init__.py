"""ferry: collective communication for training code.

Two entry points (docs/PYTHON.md):

* ``ferry.Comm.from_env()`` and the collectives on numpy arrays and torch tensors, in place, without
  copies (the buffer protocol or DLPack).
* ``torch.distributed.init_process_group(backend="ferry")``: importing ``ferry`` after ``torch``
  registers the backend (``import ferry.torch_backend`` does it explicitly).

Buffers in shared memory that peers read in place: ``ferry.empty``/``ferry.zeros``/``ferry.empty_like``
(numpy) and ``ferry.torch.shared_allocator()``/``ferry.torch.empty`` (torch).
"""
import sys as _sys

from ferry._ferry import *  # noqa: F401,F403  (the bindings: Comm, UniqueId, RedOp, Work, Error, ...)
from ferry import _ferry

__version__ = _ferry.__version__


def empty_like(a):
    """ferry.empty with the shape and dtype of `a` (a numpy array or anything with .shape and .dtype)."""
    return _ferry.empty(tuple(a.shape), a.dtype)


# The c10d backend is registered when torch is already loaded, so that `import ferry` alone does
# not pay for importing torch. Where it was not built (no libtorch-dev at build time) the bindings
# still import; `import ferry.torch_backend` then says why the backend is missing.
if "torch" in _sys.modules:
    try:
        from ferry import torch_backend as _torch_backend  # noqa: F401
        from ferry import torch  # noqa: F401  (ferry.torch.shared_allocator, ferry.torch.empty)
    except ImportError:
        pass
