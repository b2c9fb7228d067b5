"""CuPy's NCCL binding (cupy.cuda.nccl, from cupy-cuda13x) on hoccl's libnccl.so.2, on numpy buffers (host memory)
and without a GPU: N processes (the parent starts them), each a rank of one NcclCommunicator. Every collective CuPy
exposes (all-reduce with each op, all-gather, reduce-scatter, broadcast, reduce), send/recv in a ring inside
groupStart/groupEnd, and grouped collectives, for several dtypes; each result is compared with a numpy float64
reference computed from every rank's input (inputs are small integers, so every dtype represents them exactly).
Usage: cupy_nccl.py NRANKS (parent) | --rank R --nranks N --uid HEX (a rank)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_util  # noqa: E402

client_util.require("cupy", "tools/install-deps installs cupy-cuda13x into it")

import numpy as np  # noqa: E402
from cupy.cuda import nccl  # noqa: E402

DTYPES = [(np.float64, nccl.NCCL_FLOAT64), (np.float32, nccl.NCCL_FLOAT32), (np.float16, nccl.NCCL_FLOAT16),
          (np.int32, nccl.NCCL_INT32), (np.int64, nccl.NCCL_INT64), (np.uint8, nccl.NCCL_UINT8)]
OPS = {"sum": nccl.NCCL_SUM, "prod": nccl.NCCL_PROD, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}


def data(rank, count, op="sum"):
    """Rank `rank`'s input: small non-negative integers whose sums/products stay exact in every dtype."""
    i = np.arange(count)
    if op == "prod":
        return 1.0 + ((i + rank) % 2)
    return ((i * 7 + rank * 13) % 5).astype(np.float64)


def reference(op, inputs):
    stack = np.stack(inputs)
    return {"sum": stack.sum(0), "prod": stack.prod(0), "max": stack.max(0), "min": stack.min(0)}[op]


def ptr(a):
    return a.ctypes.data


def run_rank(rank, n, uid):
    c = client_util.Checks(f"cupy rank {rank}")
    comm = nccl.NcclCommunicator(n, uid, rank)
    c.check(comm.rank_id() == rank and comm.size() == n, "rank and size")
    count = 1031
    for dt, nt in DTYPES:
        name = np.dtype(dt).name
        for opname, op in OPS.items():
            if dt == np.uint8 and opname == "prod" and n > 4:
                continue
            send = data(rank, count, opname).astype(dt)
            recv = np.full(count, 99, dtype=dt)
            comm.allReduce(ptr(send), ptr(recv), count, nt, op, 0)
            want = reference(opname, [data(r, count, opname) for r in range(n)])
            c.check(np.array_equal(recv.astype(np.float64), want), f"allReduce {opname} {name}")

        send = data(rank, count).astype(dt)
        recv = np.zeros(count * n, dtype=dt)
        comm.allGather(ptr(send), ptr(recv), count, nt, 0)
        want = np.concatenate([data(r, count) for r in range(n)])
        c.check(np.array_equal(recv.astype(np.float64), want), f"allGather {name}")

        full = np.concatenate([data(rank + 10 * b, count) for b in range(n)]).astype(dt)
        recv = np.zeros(count, dtype=dt)
        comm.reduceScatter(ptr(full), ptr(recv), count, nt, nccl.NCCL_SUM, 0)
        want = sum(data(r + 10 * rank, count) for r in range(n))
        c.check(np.array_equal(recv.astype(np.float64), want), f"reduceScatter {name}")

        root = n - 1
        send = data(rank, count).astype(dt)
        recv = np.zeros(count, dtype=dt)
        comm.broadcast(ptr(send), ptr(recv), count, nt, root, 0)
        c.check(np.array_equal(recv.astype(np.float64), data(root, count)), f"broadcast {name}")
        inplace = data(rank, count).astype(dt)
        comm.bcast(ptr(inplace), count, nt, 0, 0)
        c.check(np.array_equal(inplace.astype(np.float64), data(0, count)), f"bcast in place {name}")

        recv = np.full(count, 99, dtype=dt)
        comm.reduce(ptr(send), ptr(recv), count, nt, nccl.NCCL_MAX, root, 0)
        if rank == root:
            want = reference("max", [data(r, count) for r in range(n)])
            c.check(np.array_equal(recv.astype(np.float64), want), f"reduce max {name}")
        else:
            c.check(np.all(recv == 99), f"reduce leaves a non-root's recvbuf alone ({name})")

    # Send/recv around the ring, both directions at once: needs the group to not deadlock.
    right, left = (rank + 1) % n, (rank - 1) % n
    send = data(rank, count)
    from_left = np.zeros(count)
    from_right = np.zeros(count)
    nccl.groupStart()
    comm.send(ptr(send), count, nccl.NCCL_FLOAT64, right, 0)
    comm.send(ptr(send), count, nccl.NCCL_FLOAT64, left, 0)
    comm.recv(ptr(from_left), count, nccl.NCCL_FLOAT64, left, 0)
    comm.recv(ptr(from_right), count, nccl.NCCL_FLOAT64, right, 0)
    nccl.groupEnd()
    c.check(np.array_equal(from_left, data(left, count)) and np.array_equal(from_right, data(right, count)),
            "grouped send/recv ring")

    # Two collectives in one group.
    a, b = data(rank, count), data(rank + 1, count)
    ra, rb = np.zeros(count), np.zeros(count * n)
    nccl.groupStart()
    comm.allReduce(ptr(a), ptr(ra), count, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 0)
    comm.allGather(ptr(b), ptr(rb), count, nccl.NCCL_FLOAT64, 0)
    nccl.groupEnd()
    c.check(np.array_equal(ra, reference("sum", [data(r, count) for r in range(n)])), "grouped allReduce")
    c.check(np.array_equal(rb, np.concatenate([data(r + 1, count) for r in range(n)])), "grouped allGather")

    comm.destroy()
    c.finish()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("nranks_parent", nargs="?", type=int)
    parser.add_argument("--rank", type=int)
    parser.add_argument("--nranks", type=int)
    parser.add_argument("--uid")
    args = parser.parse_args()
    if args.rank is not None:
        run_rank(args.rank, args.nranks, bytes.fromhex(args.uid))
        return
    n = args.nranks_parent
    c = client_util.Checks("cupy")
    shim = client_util.shim_path()
    c.check(nccl.get_version() >= 23203, f"cupy.cuda.nccl.get_version() {nccl.get_version()} is the shim's")
    uid = nccl.get_unique_id()
    uid = bytes(b % 256 for b in uid) if not isinstance(uid, bytes) else uid
    c.check(shim in client_util.loaded_ncclLibraries(), f"{shim} is mapped into the process")
    bad = client_util.run_ranks(os.path.abspath(__file__), n, uid.hex(), [])
    c.check(bad == 0, f"{bad} of {n} ranks failed")
    c.finish()


main()
