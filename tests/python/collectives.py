"""Every collective of hoccl.Communicator on every data type and reduction op, in place and out of place, with zero
counts and counts that do not divide evenly, against numpy float64 references. Run under hoccl-run with 2 or 4 ranks
(Communicator.from_env)."""

import numpy as np

import hoccl
from common import (ALL_TYPES, OPS, empty, expect, expect_equal, f64, finish, hoccl_op, inputs, make,
                    reference)

comm = hoccl.Communicator.from_env()
rank, n = comm.rank, comm.size
expect(n >= 2, f"the test needs at least 2 ranks, got {n}")

REDUCE_COUNTS = [0, 1, 7, 1001]  # 7 and 1001 do not divide by 2 or 4


def all_inputs(t, op, count, salt=0):
    return [inputs(t, op, r, count, salt) for r in range(n)]


for t in ALL_TYPES:
    for op in OPS:
        for count in REDUCE_COUNTS:
            per = all_inputs(t, op, count)
            want = reference(t, op, per)
            tag = f"{t} {op} count {count}"
            # all_reduce: out of place, then in place
            send = make(t, per[rank])
            recv = empty(t, count)
            comm.all_reduce(send, recv, op=hoccl_op(op))
            expect_equal(f64(recv), want, f"all_reduce {tag}")
            expect_equal(f64(send), per[rank], f"all_reduce {tag}: send unchanged")
            buf = make(t, per[rank])
            comm.all_reduce(buf, op=hoccl_op(op))
            expect_equal(f64(buf), want, f"all_reduce in place {tag}")
            # reduce to the last rank: out of place, then in place
            root = n - 1
            recv = empty(t, count)
            out = comm.reduce(make(t, per[rank]), recv if rank == root else None, op=hoccl_op(op), root=root)
            if rank == root:
                expect_equal(f64(recv), want, f"reduce {tag}")
            else:
                expect(out is None, f"reduce {tag}: non-root returns None")
            buf = make(t, per[rank])
            comm.reduce(buf, op=hoccl_op(op), root=root)
            if rank == root:
                expect_equal(f64(buf), want, f"reduce in place {tag}")
            # reduce_scatter: every rank gets `count` elements (its block of a count*n buffer)
            per_rs = all_inputs(t, op, count * n, salt=1)
            want_rs = reference(t, op, per_rs)[rank * count:(rank + 1) * count]
            recv = empty(t, count)
            comm.reduce_scatter(make(t, per_rs[rank]), recv, op=hoccl_op(op))
            expect_equal(f64(recv), want_rs, f"reduce_scatter {tag}")
            buf = make(t, per_rs[rank])
            comm.reduce_scatter(buf, op=hoccl_op(op))
            expect_equal(f64(buf)[rank * count:(rank + 1) * count], want_rs, f"reduce_scatter in place {tag}")

MOVE_COUNTS = [0, 5, 1003]
for t in ALL_TYPES:
    for count in MOVE_COUNTS:
        tag = f"{t} count {count}"
        per = all_inputs(t, "sum", count, salt=2)
        gathered = np.concatenate(per) if count else np.zeros(0)
        # all_gather: out of place, in place (send None), and in place through a view of recv
        recv = empty(t, count * n)
        comm.all_gather(make(t, per[rank]), recv)
        expect_equal(f64(recv), f64(make(t, gathered)), f"all_gather {tag}")
        recv = empty(t, count * n)
        recv[rank * count:(rank + 1) * count] = make(t, per[rank])
        comm.all_gather(None, recv)
        expect_equal(f64(recv), f64(make(t, gathered)), f"all_gather in place {tag}")
        recv = empty(t, count * n)
        recv[rank * count:(rank + 1) * count] = make(t, per[rank])
        comm.all_gather(recv[rank * count:(rank + 1) * count], recv)
        expect_equal(f64(recv), f64(make(t, gathered)), f"all_gather in place (view) {tag}")
        # broadcast from rank 1: out of place (non-roots pass no send), in place
        root = 1
        recv = empty(t, count)
        comm.broadcast(make(t, per[rank]) if rank == root else None, recv, root=root)
        expect_equal(f64(recv), f64(make(t, per[root])), f"broadcast {tag}")
        buf = make(t, per[rank])
        comm.broadcast(buf, root=root)
        expect_equal(f64(buf), f64(make(t, per[root])), f"broadcast in place {tag}")
        # all_to_all: block j of rank r goes to block r of rank j
        per_a2a = all_inputs(t, "sum", count * n, salt=3)
        want = np.concatenate([per_a2a[j][rank * count:(rank + 1) * count] for j in range(n)]) if count else np.zeros(0)
        recv = empty(t, count * n)
        comm.all_to_all(make(t, per_a2a[rank]), recv)
        expect_equal(f64(recv), f64(make(t, want)), f"all_to_all {tag}")
        buf = make(t, per_a2a[rank])
        comm.all_to_all(buf)
        expect_equal(f64(buf), f64(make(t, want)), f"all_to_all in place {tag}")
        # gather to rank 0: out of place, in place on the root
        recv = empty(t, count * n) if rank == 0 else None
        out = comm.gather(make(t, per[rank]), recv, root=0)
        if rank == 0:
            expect_equal(f64(recv), f64(make(t, gathered)), f"gather {tag}")
            buf = empty(t, count * n)
            buf[0:count] = make(t, per[0])
            comm.gather(None, buf, root=0)
            expect_equal(f64(buf), f64(make(t, gathered)), f"gather in place {tag}")
        else:
            expect(out is None, f"gather {tag}: non-root returns None")
            comm.gather(make(t, per[rank]), None, root=0)
        # scatter from the last rank: block r of its buffer to rank r
        root = n - 1
        src = make(t, all_inputs(t, "sum", count * n, salt=4)[root])
        want = f64(src)[rank * count:(rank + 1) * count]
        recv = empty(t, count)
        comm.scatter(src if rank == root else None, recv, root=root)
        expect_equal(f64(recv), want, f"scatter {tag}")
        if rank == root:
            buf = make(t, f64(src))
            comm.scatter(buf, None, root=root)
            expect_equal(f64(buf), f64(src), f"scatter in place {tag} (root keeps its block)")
        else:
            recv = empty(t, count)
            comm.scatter(None, recv, root=root)
            expect_equal(f64(recv), want, f"scatter {tag} (the root in place)")
        # send/recv around the ring inside a group (any order is fine inside a group)
        right, left = (rank + 1) % n, (rank - 1) % n
        recv = empty(t, count)
        with hoccl.group():
            comm.recv(recv, left)
            comm.send(make(t, per[rank]), right)
        expect_equal(f64(recv), f64(make(t, per[left])), f"send/recv ring {tag}")

# Larger counts, float32 and int32 sums (several chunks per step)
for t in ["float32", "int32"]:
    count = 262147
    per = all_inputs(t, "sum", count, salt=5)
    buf = make(t, per[rank])
    comm.all_reduce(buf)
    expect_equal(f64(buf), reference(t, "sum", per), f"all_reduce {t} count {count}")

# Other buffer kinds: bytearray/memoryview (buffer protocol), array.array, and a 2-D array (C order blocks)
import array  # noqa: E402
a = array.array("i", [rank + 1] * 6)
comm.all_reduce(a)
expect_equal(np.array(a), np.full(6, n * (n + 1) // 2), "all_reduce array.array('i')")
m = memoryview(bytearray(8 * n)).cast("d")  # a writable memoryview over a bytearray
comm.all_gather(np.array([float(rank)]), m)
expect_equal(np.array(m), np.arange(n, dtype=np.float64), "all_gather into a memoryview")
two_d = np.full((n, 3), float(rank), dtype=np.float32)
comm.all_to_all(two_d)
expect_equal(two_d, np.repeat(np.arange(n, dtype=np.float64)[:, None], 3, axis=1), "all_to_all of a 2-D array")



class OnlyArrayInterface:
    """Exposes a numpy array through __array_interface__ alone (no buffer protocol, no DLPack)."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


ai = np.full(5, rank + 1, dtype=np.int64)
comm.all_reduce(OnlyArrayInterface(ai))
expect_equal(ai, np.full(5, n * (n + 1) // 2), "all_reduce through __array_interface__")

comm.barrier()
comm.close()
finish(rank)
