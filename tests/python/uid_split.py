"""Communicators from a unique id (this process is rank 0: it makes the id and starts the other ranks with
subprocess), split (colors, keys, ranks left out) and PaRO groups, against numpy references. Ranks 2k and 2k+1
share an emulated host (HOCCL_HOSTID), so 4 ranks make 2 PaRO groups of 2.

Usage: uid_split.py NRANKS            (rank 0; starts ranks 1..NRANKS-1)
       uid_split.py NRANKS RANK UID  (the others, UID in hex)
"""

import os
import subprocess
import sys

nranks = int(sys.argv[1])
rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
os.environ["HOCCL_HOSTID"] = f"pytest-host{rank // 2}"  # before the library reads its parameters
os.environ["HOCCL_TEST_NO_TORCH"] = "1"  # common.py: this test needs no torch (its import is slow)

import numpy as np  # noqa: E402

import hoccl  # noqa: E402
from common import expect, expect_equal, finish  # noqa: E402

children = []
if rank == 0:
    uid = hoccl.get_unique_id()
    expect(isinstance(uid, bytes) and len(uid) == 128, "get_unique_id returns 128 bytes")
    for r in range(1, nranks):
        children.append(subprocess.Popen([sys.executable, __file__, str(nranks), str(r), uid.hex()]))
else:
    uid = bytes.fromhex(sys.argv[3])

comm = hoccl.Communicator(nranks, uid, rank)
expect(comm.rank == rank and comm.size == nranks, f"rank {comm.rank} size {comm.size}")
expect(comm.peer_transport(rank) == "self", "peer_transport(self)")
x = np.full(5, rank + 1.0)
comm.all_reduce(x)
expect_equal(x, np.full(5, nranks * (nranks + 1) / 2), "all_reduce on the unique-id communicator")

# split by parity, ordered by descending rank
sub = comm.split(rank % 2, key=-rank)
members = sorted((r for r in range(nranks) if r % 2 == rank % 2), reverse=True)
expect(sub.size == len(members) and sub.rank == members.index(rank),
       f"split(parity, key=-rank): rank {sub.rank} of {sub.size}, want {members.index(rank)} of {len(members)}")
y = np.array([float(rank)], dtype=np.float32)
gathered = np.zeros(sub.size, np.float32)
sub.all_gather(y, gathered)
expect_equal(gathered, np.array(members, dtype=np.float64), "all_gather on the split communicator (key order)")
sub.close()

# rank 0 leaves the split
rest = comm.split(None if rank == 0 else 7)
if rank == 0:
    expect(rest is None, "split(None) gives None")
else:
    expect(rest.size == nranks - 1 and rest.rank == rank - 1, f"split without rank 0: {rest}")
    z = np.array([rank], dtype=np.int64)
    rest.all_reduce(z, op="min")
    expect_equal(z, [1], "all_reduce(min) without rank 0")
    rest.close()

# PaRO: zero2 (NGG) over host groups
with comm.paro("zero2") as paro:
    m = 2 if nranks % 2 == 0 else 1
    expect(paro.strategy == "NGG", f"strategy {paro.strategy}")
    expect((paro.group_size, paro.ngroups) == (m, nranks // m), f"layout {paro}")
    expect((paro.group, paro.local_index) == (rank // m, rank % m), f"position {paro}")
    expect(paro.intra.size == m and paro.inter.size == nranks // m, "intra/inter sizes")
    v = np.array([float(rank)])
    paro.intra.all_reduce(v)
    expect_equal(v, [sum(range(rank // m * m, rank // m * m + m))], "all_reduce over the PaRO group")
    w = np.array([float(rank)])
    paro.inter.all_reduce(w)
    expect_equal(w, [sum(r for r in range(nranks) if r % m == rank % m)], "all_reduce across the PaRO groups")
    count = 10
    padded = paro.padded_count(count)
    expect(padded % nranks == 0 and padded >= count, f"padded_count({count}) = {padded}")
    off, length = paro.shard_range("grads", count)
    full = [np.concatenate([np.arange(count) + r + 1.0, np.zeros(padded - count)]) for r in range(nranks)]
    shard = np.zeros(length)
    paro.reduce_grads(full[rank], shard, count)
    expect_equal(shard, np.sum(full, axis=0)[off:off + length], "reduce_grads (zero2: sum over all ranks)")
    wrong = np.zeros(length + 1)
    try:
        paro.reduce_grads(full[rank], wrong, count)
        expect(False, "reduce_grads with a shard of the wrong size raised nothing")
    except ValueError as e:
        expect("shard" in str(e), f"reduce_grads wrong size: {e}")
    intra = paro.intra
expect_raises_closed = False
try:
    intra.all_reduce(np.zeros(1))
except ValueError:
    expect_raises_closed = True
expect(expect_raises_closed, "a PaRO communicator after the handle closed raises ValueError")

comm.close()
for c in children:
    try:
        expect(c.wait(timeout=120) == 0, f"rank process {c.args[3]} exited with {c.returncode}")
    except subprocess.TimeoutExpired:
        c.kill()
        expect(False, f"rank process {c.args[3]} did not finish in 120 s")
finish(rank)
