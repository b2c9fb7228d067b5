"""nccl4py's low-level bindings (nccl.bindings.nccl) on hoccl's libnccl.so.2, without a GPU: the version, a unique
id, and a 2-rank all-reduce on numpy buffers checked against a numpy float64 reference; the parameter API as the
bindings expose it (param_get_all_keys, param_get_parameter); and ncclCommQueryProperties.
Usage: nccl4py_bindings.py (parent) | --rank R --nranks N --uid HEX (a rank)."""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_util  # noqa: E402

client_util.require("nccl", "tools/install-deps installs nccl4py into it")

import numpy as np  # noqa: E402
from nccl.bindings import nccl as nb  # noqa: E402

NRANKS = 2


def uid_bytes(uid):
    return ctypes.string_at(uid.ptr, 128)


def uid_from_bytes(raw):
    arr = np.zeros(1, dtype=nb.unique_id_dtype)
    ctypes.memmove(arr.ctypes.data, raw, 128)
    return nb.UniqueId.from_data(arr)


def run_rank(rank, n, raw):
    c = client_util.Checks(f"nccl4py rank {rank}")
    comm = nb.comm_init_rank(n, uid_from_bytes(raw), rank)
    c.check(nb.comm_count(comm) == n and nb.comm_user_rank(comm) == rank, "count and rank")
    count = 4099
    send = ((np.arange(count) * 3 + rank * 11) % 17).astype(np.float32)
    recv = np.zeros(count, dtype=np.float32)
    nb.all_reduce(send.ctypes.data, recv.ctypes.data, count, int(nb.DataType.Float32), int(nb.RedOp.Sum), comm, 0)
    want = sum(((np.arange(count) * 3 + r * 11) % 17).astype(np.float64) for r in range(n))
    c.check(np.array_equal(recv.astype(np.float64), want), "all_reduce sum float32")
    props = nb.comm_query_properties(comm)
    c.check(props.rank == rank and props.n_ranks == n and not props.device_api_support,
            f"comm_query_properties: rank {props.rank}, n_ranks {props.n_ranks}")
    nb.comm_destroy(comm)
    c.finish()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int)
    parser.add_argument("--nranks", type=int)
    parser.add_argument("--uid")
    args = parser.parse_args()
    if args.rank is not None:
        run_rank(args.rank, args.nranks, bytes.fromhex(args.uid))
        return
    c = client_util.Checks("nccl4py")
    shim = client_util.shim_path()
    c.check(os.path.realpath(nb.get_library_path()) == shim, f"nccl4py loaded {nb.get_library_path()}, not {shim}")
    c.check(nb.get_version() == 23203, f"get_version() {nb.get_version()}")
    keys = nb.param_get_all_keys()
    c.check("NCCL_TIMEOUT" in keys, f"param_get_all_keys lists NCCL_TIMEOUT ({len(keys)} keys)")
    c.check(nb.param_get_parameter("NCCL_TIMEOUT") == os.environ.get("NCCL_TIMEOUT", "300"),
            "param_get_parameter(NCCL_TIMEOUT)")
    raw = uid_bytes(nb.get_unique_id())
    c.check(len(raw) == 128 and any(raw), "a 128-byte unique id")
    bad = client_util.run_ranks(os.path.abspath(__file__), NRANKS, raw.hex(), [])
    c.check(bad == 0, f"{bad} of {NRANKS} ranks failed")
    c.finish()


main()
