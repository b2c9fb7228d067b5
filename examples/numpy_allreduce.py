"""All-reduce of numpy arrays with the hoccl Python package, without torch.

Run it as several ranks under a launcher, e.g.
    hoccl-run -n 4 python examples/numpy_allreduce.py
    mpirun -np 4 python examples/numpy_allreduce.py     (or srun, as for any hoccl program)
Each rank contributes rank+1; the sum (and the other results) are checked against numpy on every rank.
Options: --count N (elements, default 1M), --dtype float32|float64|int32|... (default float32).
"""

import argparse
import sys
import time

import numpy as np

import hoccl


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1 << 20)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    comm = hoccl.Communicator.from_env()
    rank, n = comm.rank, comm.size

    # Out of place, then in place: every rank contributes rank+1, so the sum is n*(n+1)/2 everywhere.
    send = np.full(args.count, rank + 1, dtype=args.dtype)
    recv = np.empty_like(send)
    start = time.perf_counter()
    comm.all_reduce(send, recv)
    elapsed = time.perf_counter() - start
    ok = bool(np.all(recv == n * (n + 1) // 2))

    comm.all_reduce(send, op="max")  # in place: send now holds the largest contribution
    ok &= bool(np.all(send == n))

    # Every rank's contribution, gathered: [1, 2, ..., n].
    mine = np.array([rank + 1], dtype=args.dtype)
    everyone = np.empty(n, dtype=args.dtype)
    comm.all_gather(mine, everyone)
    ok &= bool(np.array_equal(everyone, np.arange(1, n + 1)))

    nbytes = send.nbytes
    if rank == 0:
        print(f"hoccl {hoccl.version()} ({hoccl.library_path}): {n} ranks, all_reduce of {args.count} {args.dtype} "
              f"({nbytes / 2**20:.1f} MiB) in {elapsed * 1e3:.2f} ms: {'OK' if ok else 'WRONG'}", flush=True)
    elif not ok:
        print(f"rank {rank}: WRONG result", flush=True)
    comm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
