"""Rank-based fills and the closed forms of their collective results.

Every value is a small integer (|v| <= 47), so it is exact in every type the tests use, int8 and
bfloat16 included, and every sum, product, maximum, minimum and average below is exact too.
Functions return read-only int64/float64 numpy arrays of "ideal" values for elements
[start, start + n), cached (the sweep asks for the same ones many times); the tests cast them to
the type under test.

Vocabulary: W is the communicator size, r a rank, i an element index, k = i % 5, s(i) a sign.
"""
from functools import lru_cache

import numpy as np


def _frozen(a):
    a.setflags(write=False)
    return a


@lru_cache(maxsize=None)
def _index(start, n):
    return _frozen(np.arange(start, start + n, dtype=np.int64))


@lru_cache(maxsize=None)
def _sign(start, n, signed):
    """+1, or alternately +1/-1 for signed types, so that max and min differ from sum's order."""
    i = _index(start, n)
    return _frozen(np.where(i % 2 == 1, -1, 1) if signed else np.ones(n, dtype=np.int64))


@lru_cache(maxsize=None)
def _k(start, n):
    return _frozen(_index(start, n) % 5)


@lru_cache(maxsize=None)
def fill(r, n, signed, start=0):
    """Rank r's element i for sum, max, min and avg: s(i) * (r + 1 + k)."""
    return _frozen(_sign(start, n, signed) * (r + 1 + _k(start, n)))


@lru_cache(maxsize=None)
def expected(op, W, n, signed, integer, start=0):
    """op over ranks 0..W-1 of fill(r, i)."""
    s, k = _sign(start, n, signed), _k(start, n)
    if op == "sum":
        v = s * (W * k + W * (W + 1) // 2)
    elif op == "max":
        v = np.where(s > 0, W + k, -(1 + k))
    elif op == "min":
        v = np.where(s > 0, 1 + k, -(W + k))
    elif op == "avg":
        # sum / W = s * (k + (W + 1) / 2); integers truncate toward zero, symmetric in the sign.
        v = s * (k + (W + 1) // 2) if integer else s * (k + (W + 1) / 2)
    else:
        raise ValueError(op)
    return _frozen(v)


@lru_cache(maxsize=None)
def prod_fill(r, n, signed):
    """Rank r's element i for prod: s(i) * 2 where (i + r) % 3 == 0, else s(i)."""
    i = _index(0, n)
    return _frozen(_sign(0, n, signed) * np.where((i + r) % 3 == 0, 2, 1))


@lru_cache(maxsize=None)
def prod_expected(W, n, signed):
    """s(i)^W * 2^(the number of ranks r < W with (i + r) % 3 == 0)."""
    i = _index(0, n)
    twos = sum(((i + r) % 3 == 0).astype(np.int64) for r in range(W))
    return _frozen(_sign(0, n, signed) ** W * 2 ** twos)


@lru_cache(maxsize=None)
def gathered(W, n, signed):
    """all_gather: block r holds fill(r, i)."""
    return _frozen(np.concatenate([fill(q, n, signed) for q in range(W)] + [np.zeros(0, np.int64)]))


@lru_cache(maxsize=None)
def blocks_sent(r, W, n):
    """all_to_all: rank r's send; its block p is block(r, p, i), distinct for r, p < 4 and i % 3."""
    i = _index(0, n)
    return _frozen(np.concatenate([16 * (i % 3) + 4 * r + p for p in range(W)] + [np.zeros(0, np.int64)]))


@lru_cache(maxsize=None)
def blocks_received(r, W, n):
    """all_to_all: rank r's result; its block q is block(q, r, i)."""
    i = _index(0, n)
    return _frozen(np.concatenate([16 * (i % 3) + 4 * q + r for q in range(W)] + [np.zeros(0, np.int64)]))
