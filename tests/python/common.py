"""Shared parts of the Python package's tests: the data types under test (numpy's, and torch's bfloat16/fp8 when torch
is there), inputs every rank can recompute for every other rank, and the float64 references.

Inputs are small integers (1..5, or 1..2 where products or fp8 need it), so every sum, product, average and
PreMulSum of 2 or 4 ranks is exact in every type: the result must equal the numpy float64 reference, rounded to the
type, exactly.
"""

import os
import sys

import numpy as np

torch = None
if not os.environ.get("HOCCL_TEST_NO_TORCH"):
    try:
        import torch
    except ImportError:  # the bfloat16/fp8 cases need torch; finish() says they were left out
        pass

import hoccl

NUMPY_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
TORCH_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"] if torch is not None else []
ALL_TYPES = NUMPY_TYPES + TORCH_TYPES
OPS = ["sum", "prod", "min", "max", "avg", "premul"]
_failures = []
_checks = [0]


def is_float(t):
    return t.startswith("float") or t == "bfloat16"


def make(t, values):
    """A buffer of type t holding values (float64 numpy array): a numpy array, or a torch tensor for torch's types."""
    if t in NUMPY_TYPES:
        return np.asarray(values).astype(t)
    return torch.from_numpy(np.asarray(values, dtype=np.float64)).to(getattr(torch, t))


def empty(t, n):
    return make(t, np.zeros(n))


def f64(buf):
    """The buffer's values as numpy float64."""
    if isinstance(buf, np.ndarray):
        return buf.astype(np.float64)
    return buf.to(torch.float64).numpy()


def inputs(t, op, rank, n, salt=0):
    """Rank `rank`'s input of n elements for type t and op (any rank can compute any other rank's)."""
    i = np.arange(n, dtype=np.int64)
    if op == "prod" or t.startswith("float8"):
        return ((i * 3 + rank * 5 + salt) % 2 + 1).astype(np.float64)
    return ((i * 3 + rank * 7 + salt) % 5 + 1).astype(np.float64)


PREMUL = 2


def reference(t, op, per_rank):
    """The float64 reference of reducing per_rank (a list of float64 arrays) with op, as type t rounds it."""
    stack = np.stack(per_rank)
    n = len(per_rank)
    if op == "sum":
        r = stack.sum(0)
    elif op == "prod":
        r = stack.prod(0)
    elif op == "min":
        r = stack.min(0)
    elif op == "max":
        r = stack.max(0)
    elif op == "avg":
        r = stack.sum(0) / n
        if not is_float(t):
            r = np.trunc(r)  # C integer division, as NCCL's average
    elif op == "premul":
        r = (stack * PREMUL).sum(0)
    return f64(make(t, r))


def hoccl_op(op):
    return hoccl.premul_sum(PREMUL) if op == "premul" else op


def expect(cond, what):
    _checks[0] += 1
    if not cond:
        _failures.append(what)
        print(f"FAIL: {what}", flush=True)


def expect_equal(got, want, what):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.flatnonzero(got.ravel() != want.ravel())[:5] if got.shape == want.shape else []
        expect(False, f"{what}: got {got.ravel()[bad] if len(bad) else got.ravel()[:8]} want "
                      f"{want.ravel()[bad] if len(bad) else want.ravel()[:8]} (first differing indices {list(bad)})")
    else:
        expect(True, what)


def expect_raises(exc_type, fn, what, contains=None):
    try:
        fn()
    except exc_type as e:
        expect(not contains or contains in str(e), f"{what}: message {str(e)!r} lacks {contains!r}")
        return e
    except Exception as e:  # the wrong kind of exception
        expect(False, f"{what}: raised {type(e).__name__}: {e}, expected {exc_type.__name__}")
        return None
    expect(False, f"{what}: no exception, expected {exc_type.__name__}")
    return None


def finish(rank):
    """Prints the summary and exits non-zero when anything failed."""
    if torch is None and not os.environ.get("HOCCL_TEST_NO_TORCH") and rank == 0:
        print("note: torch is not installed: bfloat16 and fp8 were not tested", flush=True)
    if _failures:
        print(f"rank {rank}: {len(_failures)} of {_checks[0]} checks FAILED", flush=True)
        sys.exit(1)
    print(f"rank {rank}: {_checks[0]} checks passed", flush=True)


def env_int(name):
    return int(os.environ[name])
