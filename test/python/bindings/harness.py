"""A small check harness for the bindings tests (no pytest on Debian's python3 by default).

Checks count and report; the first failure raises, so the test process exits non-zero with the
traceback. `raises` checks the exception class and that the message names what it must.
"""
import sys
import time

SKIP = 77  # meson's exit code for a skipped test


class Checks:
    def __init__(self, name, rank=0):
        self.name = name
        self.rank = rank
        self.count = 0
        self.start = time.monotonic()

    def equal(self, got, expected, what):
        """Exact equality of two numpy arrays (or scalars)."""
        import numpy as np
        self.count += 1
        got = np.asarray(got)
        expected = np.asarray(expected)
        if got.shape != expected.shape or not (got == expected).all():
            bad = np.flatnonzero(got.reshape(-1) != expected.reshape(-1)) if got.shape == expected.shape else []
            detail = (f"first difference at {bad[0]}: got {got.reshape(-1)[bad[0]]}, expected "
                      f"{expected.reshape(-1)[bad[0]]}" if len(bad) else f"shapes {got.shape} vs {expected.shape}")
            raise AssertionError(f"rank {self.rank}: {what}: {detail}")

    def true(self, cond, what):
        self.count += 1
        if not cond:
            raise AssertionError(f"rank {self.rank}: {what}")

    def raises(self, exc_type, fn, *needles, what=""):
        """fn() raises exc_type whose message contains every needle; returns the exception."""
        self.count += 1
        try:
            fn()
        except exc_type as e:
            msg = str(e)
            for n in needles:
                if n not in msg:
                    raise AssertionError(f"rank {self.rank}: {what}: message lacks {n!r}: {msg!r}") from e
            return e
        except Exception as e:  # the wrong class
            raise AssertionError(f"rank {self.rank}: {what}: raised {type(e).__name__} ({e}), "
                                 f"expected {exc_type.__name__}") from e
        raise AssertionError(f"rank {self.rank}: {what}: raised nothing, expected {exc_type.__name__}")

    def report(self):
        print(f"{self.name}: rank {self.rank}: {self.count} checks passed in "
              f"{time.monotonic() - self.start:.2f} s", flush=True)


def mapping_of(addr):
    """The name of the mapping of this process that holds address `addr` ("" when anonymous, None when
    unmapped), from /proc/self/maps: hostAlloc's memory shows as "/memfd:ferry-host-N (deleted)"."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi:
                return fields[5].strip() if len(fields) > 5 else ""
    return None


def skip(message):
    print(f"SKIP: {message}", flush=True)
    sys.exit(SKIP)
