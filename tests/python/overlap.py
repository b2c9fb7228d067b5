"""Communicator.all_gather_overlap, reduce_scatter_overlap, ring_shift and ring_shift_start (docs/overlap.md) on
every data type (and every reduction op), odd and zero counts, in place and out of place, against numpy float64
references; what each callback sees when it runs; a call inside hoccl.group(); and callbacks that raise (the
exception comes out of the call on that rank, the other ranks get HocclError, the interpreter lives on). Run under
hoccl-run with 2 or 4 ranks."""

import array

import numpy as np

import hoccl
from common import (ALL_TYPES, OPS, NUMPY_TYPES, empty, expect, expect_equal, expect_raises, f64, finish, hoccl_op,
                    inputs, make, reference)

comm = hoccl.Communicator.from_env()
rank, n = comm.rank, comm.size
expect(n >= 2, f"the test needs at least 2 ranks, got {n}")
COUNTS = [0, 1, 1001]  # odd, and zero


def all_inputs(t, op, count, salt=0):
    return [inputs(t, op, r, count, salt) for r in range(n)]


def check_all_gather(t, count, in_place):
    tag = f"all_gather_overlap {t} count {count}{' in place' if in_place else ''}"
    per = all_inputs(t, "sum", count, salt=1)
    recv = empty(t, count * n)
    seen = []

    def on_block(src, block):
        seen.append(src)
        expect(len(block) == count, f"{tag}: block of {src} has {len(block)} elements")
        # The block is complete when it is handed over.
        expect_equal(f64(block), f64(make(t, per[src])), f"{tag}: block of rank {src} when handed over")
        if isinstance(block, np.ndarray) and count:
            expect_raises(ValueError, lambda: block.__setitem__(0, 0), f"{tag}: the block view is read-only")

    if in_place:
        recv[rank * count:(rank + 1) * count] = make(t, per[rank])
        out = comm.all_gather_overlap(None, recv, on_block)
    else:
        out = comm.all_gather_overlap(make(t, per[rank]), recv, on_block)
    expect(out is recv, f"{tag}: returns recv")
    expect(seen[:1] == [rank] and sorted(seen) == list(range(n)), f"{tag}: own block first, each once: {seen}")
    want = np.concatenate(per) if count else np.zeros(0)
    expect_equal(f64(recv), f64(make(t, want)), tag)


def check_reduce_scatter(t, op, count, mode):
    tag = f"reduce_scatter_overlap {t} {op} count {count} {mode}"
    per = all_inputs(t, op, count * n, salt=2)
    mine = make(t, per[rank])
    want = reference(t, op, per)[rank * count:(rank + 1) * count]
    asked = []

    def produce(dst, block):
        asked.append(dst)
        expect(len(block) == count, f"{tag}: block for {dst} has {len(block)} elements")
        block[:] = mine[dst * count:(dst + 1) * count]

    if mode == "in place":
        send = empty(t, count * n)
        comm.reduce_scatter_overlap(send, None, produce, op=hoccl_op(op))
        got = f64(send)[rank * count:(rank + 1) * count]
    else:
        recv = empty(t, count)
        send = None if mode == "own workspace" else empty(t, count * n)
        out = comm.reduce_scatter_overlap(send, recv, produce, op=hoccl_op(op))
        expect(out is recv, f"{tag}: returns recv")
        got = f64(recv)
    expect(asked[-1:] == [rank] and sorted(asked) == list(range(n)), f"{tag}: own block last, each once: {asked}")
    expect_equal(got, want, tag)


def check_ring_shift(t, count, k):
    tag = f"ring_shift {t} count {count} k {k}"
    per = all_inputs(t, "sum", count, salt=3)
    src = (rank - k) % n
    want = f64(make(t, per[src]))
    recv = empty(t, count)
    expect(comm.ring_shift(make(t, per[rank]), recv, k) is recv, f"{tag}: returns recv")
    expect_equal(f64(recv), want, tag)
    buf = make(t, per[rank])
    comm.ring_shift(buf, k=k)
    expect_equal(f64(buf), want, f"{tag} in place")
    recv = empty(t, count)
    send = make(t, per[rank])
    req = comm.ring_shift_start(send, recv, k)
    expect(req.pending, f"{tag}: a started request is pending")
    while not req.test():
        pass
    expect(req.wait() is recv and not req.pending, f"{tag}: wait returns recv")
    expect_equal(f64(recv), want, f"{tag} start/wait")
    expect(req.wait() is recv, f"{tag}: a second wait returns at once")


for t in ALL_TYPES:
    for count in COUNTS:
        check_all_gather(t, count, in_place=False)
        check_all_gather(t, count, in_place=True)
        for op in (OPS if count != 1 else ["sum"]):  # every op on the zero and the long odd count
            check_reduce_scatter(t, op, count, "out of place")
        check_reduce_scatter(t, "sum", count, "in place")
        if t in NUMPY_TYPES:
            check_reduce_scatter(t, "sum", count, "own workspace")
    for count in [0, 1003]:
        for k in (sorted({1, -1, 0, n + 1, -3}) if t in NUMPY_TYPES else [1]):
            check_ring_shift(t, count, k)

# A bytearray receive buffer: blocks come as read-only memoryviews of the element type.
recv = memoryview(bytearray(4 * 3 * n)).cast("i")
kinds = []
comm.all_gather_overlap(array.array("i", [rank] * 3), recv,
                        lambda src, block: kinds.append((type(block), block.readonly, list(block) == [src] * 3)))
expect(kinds == [(memoryview, True, True)] * n, f"all_gather_overlap into a memoryview: blocks {kinds}")
# A request used as a context manager waits on exit.
x, y = np.full(9, rank, dtype=np.int64), np.zeros(9, dtype=np.int64)
with comm.ring_shift_start(x, y, 1):
    pass
expect_equal(y, np.full(9, (rank - 1) % n), "ring_shift_start as a context manager")

# Bad input: refused before any C call, nothing changed.
send, recv = np.ones(4, dtype=np.float32), np.zeros(4 * n, dtype=np.float32)
expect_raises(TypeError, lambda: comm.all_gather_overlap(send, recv, None), "on_block None", "callable")
expect_raises(ValueError, lambda: comm.all_gather_overlap(send, recv[:-1], print), "short recv", "needs")
expect_raises(TypeError, lambda: comm.reduce_scatter_overlap(recv, send.astype(np.int32), print), "mixed types")
expect_raises(ValueError, lambda: comm.ring_shift(recv[:4], recv[2:6]), "partly overlapping ring shift", "overlap")
expect_raises(TypeError, lambda: comm.ring_shift(send, k=1.5), "k not an int", "int")

# Inside a group: refused by the library (HocclError, hocclInvalidUsage) on every rank, the group and the
# communicator stay usable.
with hoccl.group():
    e = expect_raises(hoccl.HocclError, lambda: comm.all_gather_overlap(send, recv, lambda s, b: None),
                      "all_gather_overlap inside a group", "group")
    expect(e is not None and e.code_name == "hocclInvalidUsage", f"inside a group: {e}")
    e = expect_raises(hoccl.HocclError, lambda: comm.ring_shift_start(send, k=1), "ring_shift_start inside a group")
    z = np.full(3, 1.0)
    comm.all_reduce(z)
expect_equal(z, np.full(3, float(n)), "an all_reduce in the same group still ran")

# Raising callbacks, each on a communicator of its own (a failed overlap call breaks the communicator).
for kind in ("on_block", "produce"):
    sub = comm.split(0)
    count = 1001
    tag = f"a raising {kind}"

    calls = []

    def cb(peer, block):  # rank 0 raises in its second callback, while a transfer is in flight
        calls.append(peer)
        if rank == 0 and len(calls) == 2:
            raise KeyError(f"{kind} failed on purpose at block {peer}")
        if kind == "produce":
            block[:] = 1

    def call():
        if kind == "on_block":
            sub.all_gather_overlap(np.ones(count, dtype=np.float32), np.zeros(count * n, dtype=np.float32), cb)
        else:
            sub.reduce_scatter_overlap(None, np.zeros(count, dtype=np.float32), cb)

    if rank == 0:
        e = expect_raises(KeyError, call, f"{tag}: raised from the call on the raising rank", "on purpose")
        notes = " ".join(getattr(e, "__notes__", [])) if e is not None else ""
        expect("hocclInvalidUsage" in notes and "broken" in notes, f"{tag}: the note carries the library's error: "
                                                                    f"{notes!r}")
    else:
        def call_then_use():  # the failure reaches this rank in the call, or in its next one
            call()
            sub.barrier()
        e = expect_raises(hoccl.HocclError, call_then_use, f"{tag}: the other ranks get HocclError")
        expect(e is None or e.code_name == "hocclRemoteError", f"{tag}: other ranks: {e}")
    sub.abort()

# The world communicator is unharmed.
comm.barrier()
comm.close()
finish(rank)
