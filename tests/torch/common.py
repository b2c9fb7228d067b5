"""Helpers of the hoccl.torch tests: spawn N ranks on loopback with a bounded run time, report failures per rank."""

from __future__ import annotations

import os
import socket
import sys
import traceback

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, fn, size, port, env, args):
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size))
    try:
        fn(rank, size, *args)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def spawn(fn, size: int, *args, env: dict | None = None, timeout_s: float = 120.0) -> None:
    """Runs fn(rank, size, *args) in `size` processes; raises if any fails or the whole run exceeds timeout_s."""
    ctx = mp.start_processes(_entry, args=(fn, size, free_port(), env or {}, args), nprocs=size, join=False,
                             start_method="spawn")
    import time

    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            raise TimeoutError(f"{fn.__name__}: the {size} ranks did not finish within {timeout_s:.0f} s")
