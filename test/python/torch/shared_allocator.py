"""ferry.torch.shared_allocator() and ferry.torch.empty in one process (issue 36).

    PYTHONPATH=build/python python3 shared_allocator.py

With the allocator on, a CPU tensor of at least the threshold lands in hostAlloc's shared memory
("memfd:ferry-host-N" in /proc/self/maps) and a smaller one does not; turning it off restores
torch's allocator while the tensors made meanwhile keep their memory until they are freed (then it
is unmapped). Handles nest. Without file descriptors, hostAlloc fails and tensors come from
torch's allocator instead: made all the same, never a crash.
"""
import gc
import os
import resource
import sys

import torch

import ferry.torch as ft

# The bindings' harness reads /proc/self/maps for us (mapping_of).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings"))
from harness import mapping_of  # noqa: E402

SHARED = "memfd:ferry-host-"
count = 0


def shared(t):
    return SHARED in (mapping_of(t.data_ptr()) or "")


def check(cond, what):
    global count
    count += 1
    if not cond:
        raise AssertionError(what)


def main():
    kib64 = ft.DEFAULT_THRESHOLD // 4  # float32 elements in the default threshold
    check(ft.DEFAULT_THRESHOLD == 64 << 10, f"default threshold {ft.DEFAULT_THRESHOLD}, documented as 64 KiB")
    check(not ft.shared_allocator_enabled() and not shared(torch.empty(1 << 18)),
          "a 1 MiB tensor is in shared memory before shared_allocator()")
    with ft.shared_allocator() as handle:
        check(ft.shared_allocator_enabled(), "shared_allocator() did not install the allocator")
        big = torch.empty(1 << 18)
        at = torch.zeros(kib64)
        below = torch.ones(kib64 - 1)
        small = torch.empty(100)
        check(shared(big), f"a 1 MiB tensor is in {mapping_of(big.data_ptr())!r}, expected {SHARED}...")
        check(shared(at), "a tensor of exactly the threshold is not in shared memory")
        check(not shared(below) and not shared(small), "a tensor below the threshold is in shared memory")
        check(handle.threshold == ft.DEFAULT_THRESHOLD, "the handle does not report its threshold")
        # Nested: the inner threshold holds inside, the outer one again after.
        with ft.shared_allocator(threshold=1 << 30):
            check(not shared(torch.empty(1 << 18)), "a nested threshold of 1 GiB still shares 1 MiB")
        check(ft.shared_allocator_enabled() and shared(torch.empty(1 << 18)),
              "closing a nested shared_allocator turned the outer one off")
    check(not ft.shared_allocator_enabled(), "the allocator is still installed after the with block")
    check(not shared(torch.empty(1 << 18)), "a 1 MiB tensor is in shared memory after shared_allocator() closed")
    # Tensors made meanwhile keep their memory, usable, until freed: then hostFree unmaps it.
    big.fill_(3.0)
    check(float(big.sum()) == 3.0 * (1 << 18), "a shared tensor is not usable after the allocator was turned off")
    addr = big.data_ptr()
    del big
    gc.collect()
    check(SHARED not in (mapping_of(addr) or ""), "a freed shared tensor is still mapped: its deleter did not run")
    # The function form: on until close().
    h = ft.shared_allocator(threshold=1024)
    check(shared(torch.empty(256)) and not shared(torch.empty(255)), "threshold=1024 bytes not applied")
    h.close()
    h.close()
    check(not ft.shared_allocator_enabled(), "close() did not restore torch's allocator")
    # ferry.torch.empty: shared whatever its size.
    e = ft.empty(2, 3, dtype=torch.float64)
    check(e.shape == (2, 3) and e.dtype == torch.float64 and e.is_contiguous() and shared(e) and not e.any(),
          f"ferry.torch.empty(2, 3, float64): {e!r}")
    check(shared(ft.zeros((5,))) and ft.zeros(0).numel() == 0, "ferry.torch.zeros")
    # Without descriptors hostAlloc fails: the allocator falls back to torch's, and nothing crashes.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    fillers = []
    try:
        while True:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        with ft.shared_allocator():
            t = torch.full((1 << 18,), 2.0)
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check(not shared(t) and float(t.sum()) == 2.0 * (1 << 18), "a tensor made without descriptors left")
    # At most half the descriptors are held by shared tensors: the rest stay for the program.
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    try:
        with ft.shared_allocator():
            ts = [torch.full((1 << 14,), float(i)) for i in range(48)]
        n = sum(shared(t) for t in ts)
        check(0 < n <= 32, f"{n} of 48 tensors in shared memory with 64 descriptors; expected 1 to 32")
        check(all(float(t[-1]) == float(i) for i, t in enumerate(ts)), "tensors past the descriptor limit")
        os.close(os.open("/dev/null", os.O_RDONLY))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(f"shared allocator: {count} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
