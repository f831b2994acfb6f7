"""Rank-based fills and the closed forms of their collective results.

Every value is a small integer (|v| <= 47), so it is exact in every type the tests use, int8 and
bfloat16 included, and every sum, product, maximum, minimum and average below is exact too.
Functions return read-only numpy arrays (int16, or float32 for a float average) of the ideal values
of elements [start, start + n); the tests cast them to the type under test. Every formula depends
on i only through i % 2, i % 3 and i % 5, so it is computed on one period of 30 elements and
repeated, and cached: the sweep asks for the same arrays many times.

Vocabulary: W is the communicator size, r a rank, i an element index, k = i % 5, s(i) a sign.
"""
from functools import lru_cache

import numpy as np

PERIOD = 30  # lcm(2, 3, 5)


def _periodic(formula, start, n):
    """formula(i) for i in [start, start + n), from one period; read-only."""
    i = np.arange(start % PERIOD, start % PERIOD + PERIOD, dtype=np.int16)
    a = np.resize(formula(i), n)
    a.setflags(write=False)
    return a


def _sign(i, signed):
    """+1, or alternately +1/-1 for signed types, so that max and min differ from sum's order."""
    return np.where(i % 2 == 1, -1, 1).astype(np.int16) if signed else np.ones_like(i)


@lru_cache(maxsize=None)
def fill(r, n, signed, start=0):
    """Rank r's element i for sum, max, min and avg: s(i) * (r + 1 + k)."""
    return _periodic(lambda i: _sign(i, signed) * (r + 1 + i % 5), start, n)


@lru_cache(maxsize=None)
def expected(op, W, n, signed, integer, start=0):
    """op over ranks 0..W-1 of fill(r, i)."""
    def formula(i):
        s, k = _sign(i, signed), i % 5
        if op == "sum":
            return s * (W * k + W * (W + 1) // 2)
        if op == "max":
            return np.where(s > 0, W + k, -(1 + k))
        if op == "min":
            return np.where(s > 0, 1 + k, -(W + k))
        if op == "avg":
            # sum / W = s * (k + (W + 1) / 2); integers truncate toward zero, symmetric in the sign.
            return s * (k + (W + 1) // 2) if integer else (s * (k + (W + 1) / 2)).astype(np.float32)
        raise ValueError(op)
    return _periodic(formula, start, n)


@lru_cache(maxsize=None)
def prod_fill(r, n, signed):
    """Rank r's element i for prod: s(i) * 2 where (i + r) % 3 == 0, else s(i)."""
    return _periodic(lambda i: _sign(i, signed) * np.where((i + r) % 3 == 0, 2, 1).astype(np.int16), 0, n)


@lru_cache(maxsize=None)
def prod_expected(W, n, signed):
    """s(i)^W * 2^(the number of ranks r < W with (i + r) % 3 == 0)."""
    def formula(i):
        twos = sum(((i + r) % 3 == 0).astype(np.int16) for r in range(W))
        return _sign(i, signed) ** W * 2 ** twos
    return _periodic(formula, 0, n)


def _concat(parts):
    a = np.concatenate(parts + [np.zeros(0, np.int16)])
    a.setflags(write=False)
    return a


@lru_cache(maxsize=None)
def gathered(W, n, signed):
    """all_gather: block r holds fill(r, i)."""
    return _concat([fill(q, n, signed) for q in range(W)])


def _block(r, p, n):
    """all_to_all: element i of the block rank r sends to rank p; distinct for r, p < 4 and i % 3."""
    return _periodic(lambda i: 16 * (i % 3) + 4 * r + p, 0, n)


@lru_cache(maxsize=None)
def blocks_sent(r, W, n):
    """all_to_all: rank r's send, its block p being _block(r, p)."""
    return _concat([_block(r, p, n) for p in range(W)])


@lru_cache(maxsize=None)
def blocks_received(r, W, n):
    """all_to_all: rank r's result, its block q being _block(q, r)."""
    return _concat([_block(q, r, n) for q in range(W)])
