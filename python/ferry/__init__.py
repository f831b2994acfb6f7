"""ferry: collective communication for training code.

Two entry points (docs/PYTHON.md):

* ``ferry.Comm.from_env()`` and the collectives on numpy arrays and torch tensors, in place, without
  copies (the buffer protocol or DLPack).
* ``torch.distributed.init_process_group(backend="ferry")``: importing ``ferry`` after ``torch``
  registers the backend (``import ferry.torch_backend`` does it explicitly).
"""
import sys as _sys

from ferry._ferry import *  # noqa: F401,F403  (the bindings: Comm, UniqueId, RedOp, Work, Error, ...)
from ferry import _ferry

__version__ = _ferry.__version__

# The c10d backend is registered when torch is already loaded, so that `import ferry` alone does
# not pay for importing torch. Where it was not built (no libtorch-dev at build time) the bindings
# still import; `import ferry.torch_backend` then says why the backend is missing.
if "torch" in _sys.modules:
    try:
        from ferry import torch_backend as _torch_backend  # noqa: F401
    except ImportError:
        pass
