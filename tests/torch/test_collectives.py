"""hoccl.torch against gloo: every collective, dtype and ReduceOp of the "hoccl" backend, in 4 processes (2 with
--size 2).

Each rank makes the world group with backend "hoccl" and a second group over the same ranks with "gloo". Inputs are
small integers (exact in every dtype, fp8 included, and their sums and products too), so results must be equal.
The reference is gloo's result on the same inputs widened to float64 (int64 for integer and bool dtypes, uint32 and
uint64 included, which gloo lacks), cast back; AVG is gloo's SUM divided by the group size (truncated for integers, as hoccl's integer AVG does), PREMUL_SUM
gloo's SUM of the pre-multiplied inputs (factor as a Python number and as a tensor), a bool SUM/PRODUCT gloo's
MAX/MIN (logical or/and). Also: async Work and futures (an async call returns before its peers arrive; a synchronous
call behind async ones keeps the order; two groups in crossed order do not hang), new_group, split_group
(hocclCommSplit), and bad input (ValueError/TypeError/DistBackendError, then the communicator still works).

The 4-rank run makes the world with device_id=cpu:0, so new_group is hocclCommSplit of the world (torch then calls
the ranks outside the group too), except with use_local_synchronization=True (a fresh communicator); the 2-rank run
makes it without, so new_group makes a fresh communicator through the store. Each group's backend.origin says which.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import spawn  # noqa: E402

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.uint32, torch.int64, torch.uint64, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2}


def wide(dt):
    return torch.float64 if dt in FLOATS else torch.int64


def inputs(dt, rank, n, op=None):
    """Small integers, different on each rank: {1,2} for PRODUCT, {0,1} for bool, {0,1,2} for fp8, else 0..4."""
    base = torch.arange(n, dtype=torch.int64) * 7 + rank * 3
    if dt == torch.bool:
        v = base % 2
    elif op == R.PRODUCT:
        v = base % 2 + 1
    elif dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        v = base % 3
    else:
        v = base % 5
    return v.to(dt)


def same(got, want, what):
    g, w = got.to(torch.float64), want.to(torch.float64)
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(g, w):
        raise AssertionError(f"{what}: hoccl gave {got.dtype} {list(got.shape)} {g.flatten()[:12].tolist()}, "
                             f"gloo {want.dtype} {list(want.shape)} {w.flatten()[:12].tolist()}")


def ref_op(op, dt):
    """The op gloo runs on the widened data, and how to finish its result."""
    if dt == torch.bool and op == R.SUM:
        return R.MAX
    if dt == torch.bool and op == R.PRODUCT:
        return R.MIN
    if op == R.AVG:
        return R.SUM
    return op


def finish(x, op, dt, size):
    if op == R.AVG:
        x = x / size if dt in FLOATS else torch.div(x, size, rounding_mode="trunc")
    return x.to(dt)


def ops_for(dt):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dt != torch.bool:
        ops += [R.AVG, "premul", "premul_tensor"]
    if dt not in FLOATS:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def check_dtype(dt, rank, size, hoc, gloo):
    n = 11
    # all_reduce, every op, half of them asynchronous (wait() and the future's value).
    for i, op in enumerate(ops_for(dt)):
        x = inputs(dt, rank, n, op)
        xw = x.to(wide(dt))
        if op in ("premul", "premul_tensor"):
            f = 0.5 if dt in FLOATS else 2  # the factor in the tensor's dtype
            factor = torch.tensor([f], dtype=torch.float64) if op == "premul_tensor" else f
            hop, xw, gop = dist._make_nccl_premul_sum(factor), xw * f, R.SUM
        else:
            hop, gop = op, ref_op(op, dt)
        a = x.clone()
        if i % 2:
            work = dist.all_reduce(a, op=hop, group=hoc, async_op=True)
            work.wait()
            same(work.get_future().value()[0], a, f"{dt} all_reduce future")
        else:
            dist.all_reduce(a, op=hop, group=hoc)
        dist.all_reduce(xw, op=gop, group=gloo)
        same(a, finish(xw, op, dt, size), f"{dt} all_reduce {op}")
    # all_reduce_coalesced: two tensors of different shapes in one call.
    if hasattr(dist, "all_reduce_coalesced"):
        a, b = inputs(dt, rank, 5), inputs(dt, rank + 1, 6).reshape(2, 3)
        ra, rb = a.to(wide(dt)), b.to(wide(dt))
        dist.all_reduce_coalesced([a, b], op=R.MAX, group=hoc)
        dist.all_reduce(ra, op=R.MAX, group=gloo)
        dist.all_reduce(rb, op=R.MAX, group=gloo)
        same(a, ra.to(dt), f"{dt} all_reduce_coalesced[0]")
        same(b, rb.to(dt), f"{dt} all_reduce_coalesced[1]")
    # reduce to the last rank.
    for op in (R.SUM, R.MAX):
        x = inputs(dt, rank, n)
        a, xw = x.clone(), x.to(wide(dt))
        dist.reduce(a, dst=size - 1, op=op, group=hoc)
        dist.reduce(xw, dst=size - 1, op=ref_op(op, dt), group=gloo)
        if rank == size - 1:
            same(a, xw.to(dt), f"{dt} reduce {op}")
    # reduce_scatter: one tensor and a list.
    for op in (R.SUM, R.MIN) + ((R.AVG,) if dt != torch.bool else ()):
        x = inputs(dt, rank, 3 * size)
        out = torch.empty(3, dtype=dt)
        dist.reduce_scatter_tensor(out, x, op=op, group=hoc)
        ref = torch.empty(3, dtype=wide(dt))
        dist.reduce_scatter_tensor(ref, x.to(wide(dt)), op=ref_op(op, dt), group=gloo)
        same(out, finish(ref, op, dt, size), f"{dt} reduce_scatter_tensor {op}")
    xs = [inputs(dt, rank + r, 4) for r in range(size)]
    out = torch.empty(4, dtype=dt)
    dist.reduce_scatter(out, xs, op=R.MAX, group=hoc)
    ref = torch.empty(4, dtype=wide(dt))
    dist.reduce_scatter(ref, [x.to(wide(dt)) for x in xs], op=R.MAX, group=gloo)
    same(out, ref.to(dt), f"{dt} reduce_scatter list")
    # all_gather: into one tensor, and into a list.
    x = inputs(dt, rank, n)
    out = torch.empty(size * n, dtype=dt)
    dist.all_gather_into_tensor(out, x, group=hoc)
    ref = torch.empty(size * n, dtype=wide(dt))
    dist.all_gather_into_tensor(ref, x.to(wide(dt)), group=gloo)
    same(out, ref.to(dt), f"{dt} all_gather_into_tensor")
    outs = [torch.empty(n, dtype=dt) for _ in range(size)]
    dist.all_gather(outs, x, group=hoc)
    same(torch.cat(outs), ref.to(dt), f"{dt} all_gather list")
    # broadcast from rank 1.
    a, xw = x.clone(), x.to(wide(dt))
    dist.broadcast(a, src=1, group=hoc)
    dist.broadcast(xw, src=1, group=gloo)
    same(a, xw.to(dt), f"{dt} broadcast")
    # all_to_all: equal blocks, split sizes (rank r sends r+p+1 rows... to p), and lists.
    x = inputs(dt, rank, 2 * size)
    out, ref = torch.empty(2 * size, dtype=dt), torch.empty(2 * size, dtype=wide(dt))
    dist.all_to_all_single(out, x, group=hoc)
    dist.all_to_all_single(ref, x.to(wide(dt)), group=gloo)
    same(out, ref.to(dt), f"{dt} all_to_all_single")
    in_splits = [(rank + p) % 3 + 1 for p in range(size)]
    out_splits = [(p + rank) % 3 + 1 for p in range(size)]
    x = inputs(dt, rank, sum(in_splits) * 2).reshape(-1, 2)
    out = torch.empty(sum(out_splits), 2, dtype=dt)
    ref = torch.empty(sum(out_splits), 2, dtype=wide(dt))
    dist.all_to_all_single(out, x, out_splits, in_splits, group=hoc)
    dist.all_to_all_single(ref, x.to(wide(dt)), out_splits, in_splits, group=gloo)
    same(out, ref.to(dt), f"{dt} all_to_all_single with splits")
    ins = [inputs(dt, rank * size + p, p + 1) for p in range(size)]
    outs = [torch.empty(rank + 1, dtype=dt) for _ in range(size)]
    dist.all_to_all(outs, ins, group=hoc)
    for p in range(size):
        same(outs[p], inputs(dt, p * size + rank, rank + 1), f"{dt} all_to_all list from {p}")
    # gather to rank 2 (1 on 2 ranks), scatter from rank 1.
    x = inputs(dt, rank, 5)
    dst = min(2, size - 1)
    outs = [torch.empty(5, dtype=dt) for _ in range(size)] if rank == dst else None
    dist.gather(x, outs, dst=dst, group=hoc)
    refs = [torch.empty(5, dtype=wide(dt)) for _ in range(size)] if rank == dst else None
    dist.gather(x.to(wide(dt)), refs, dst=dst, group=gloo)
    if rank == dst:
        same(torch.cat(outs), torch.cat(refs).to(dt), f"{dt} gather")
    out = torch.empty(5, dtype=dt)
    ins = [inputs(dt, 10 + p, 5) for p in range(size)] if rank == 1 else None
    dist.scatter(out, ins, src=1, group=hoc)
    same(out, inputs(dt, 10 + rank, 5), f"{dt} scatter")
    # send/recv around the ring, receive posted after send on every rank (one hoccl group on the worker).
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    out = torch.empty(n, dtype=dt)
    reqs = [dist.isend(inputs(dt, rank, n), nxt, group=hoc), dist.irecv(out, prv, group=hoc)]
    for r in reqs:
        r.wait()
    same(out, inputs(dt, prv, n), f"{dt} isend/irecv")


def bad_input(rank, size, hoc):
    def expect(exc, needle, fn, what):
        try:
            fn()
        except exc as e:
            if needle not in str(e):
                raise AssertionError(f"{what}: message lacks {needle!r}: {e}")
            return
        raise AssertionError(f"{what}: no {exc.__name__}")

    expect(ValueError, "not contiguous", lambda: dist.all_reduce(torch.ones(4, 4)[:, 1], group=hoc), "strided")
    expect(TypeError, "not one hoccl has", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16), group=hoc),
           "int16")
    # A tensor on another device (no GPU here: a meta tensor, handed to the backend itself since torch.distributed
    # treats meta tensors as no-ops).
    backend = hoc._get_backend(torch.device("cpu"))
    expect(ValueError, "serves CPU tensors",
           lambda: backend.broadcast([torch.ones(3, device="meta")], dist.BroadcastOptions()), "meta device")
    expect(ValueError, "bitwise", lambda: dist.all_reduce(torch.ones(3), op=R.BAND, group=hoc), "float BAND")
    expect(ValueError, "elements", lambda: dist.all_gather_into_tensor(torch.empty(5), torch.ones(2), group=hoc),
           "all_gather output size")
    # Sizes that disagree across ranks (on a communicator of their own): hoccl's mismatch check refuses the call on
    # every rank with a message naming both calls; nothing was written.
    mm = dist.new_group(backend="hoccl")
    x = torch.ones(3 + rank)
    expect(dist.DistBackendError, "AllReduce(count=", lambda: dist.all_reduce(x, group=mm), "rank mismatch")
    assert torch.equal(x, torch.ones(3 + rank)), "the refused call changed the buffer"
    # The world's communicator still works.
    y = torch.full((4,), float(rank))
    dist.all_reduce(y, group=hoc)
    assert torch.equal(y, torch.full((4,), float(sum(range(size))))), y


def async_semantics(rank, size, hoc):
    """Asynchronous calls stay asynchronous while a synchronous call's wait() may run its job on the caller's thread
    (ProcessGroupHoccl): call order kept, and one group's waiting caller never holds up another group."""
    # An async call returns before its peers arrive (the last rank is 1 s late) and completes later.
    x = torch.full((8,), float(rank))
    if rank == size - 1:
        time.sleep(1.0)
    t0 = time.monotonic()
    w = dist.all_reduce(x, group=hoc, async_op=True)
    issued, done_early = time.monotonic() - t0, w.is_completed()
    if rank != size - 1:
        assert issued < 0.5 and not done_early, f"async all_reduce returned after {issued:.3f} s, done {done_early}"
    w.wait()
    assert torch.equal(x, torch.full((8,), float(sum(range(size))))), x
    # A synchronous call queued behind two async ones: all three complete, in order, with the right sums.
    a, b, c = (torch.full((5,), float(rank + k)) for k in range(3))
    wa = dist.all_reduce(a, group=hoc, async_op=True)
    wb = dist.all_reduce(b, op=R.MAX, group=hoc, async_op=True)
    dist.all_reduce(c, group=hoc)
    assert wa.is_completed() and wb.is_completed(), "a later synchronous call returned before earlier async ones"
    total = float(sum(range(size)))
    assert torch.equal(a, torch.full((5,), total)) and torch.equal(b, torch.full((5,), float(size))), (a, b)
    assert torch.equal(c, torch.full((5,), total + 2 * size)), c
    # Two groups in crossed order: even ranks start hoc asynchronously and wait synchronously on `other`, odd ranks
    # the reverse. Each group's job runs on its own worker or on the waiting caller; inline async calls would hang.
    other = dist.new_group(backend="hoccl")
    y, z = torch.full((3,), float(rank)), torch.full((3,), float(rank))
    first, second = (hoc, other) if rank % 2 == 0 else (other, hoc)
    w = dist.all_reduce(y, group=first, async_op=True)
    dist.all_reduce(z, group=second)
    w.wait()
    assert torch.equal(y, torch.full((3,), total)) and torch.equal(z, torch.full((3,), total)), (y, z)


def origin(group):
    return group._get_backend(torch.device("cpu")).origin


def run(rank, size):
    import hoccl.torch  # noqa: F401  (registers "hoccl")

    bound = size == 4  # see the module doc
    dist.init_process_group("hoccl", rank=rank, world_size=size,
                            device_id=torch.device("cpu", 0) if bound else None)
    hoc = dist.group.WORLD
    assert origin(hoc) == "hocclCommInitRank", origin(hoc)
    gloo = dist.new_group(backend="gloo")
    for dt in DTYPES:
        check_dtype(dt, rank, size, hoc, gloo)
    dist.barrier()
    # barrier waits for every rank: the last one arrives 1 s late.
    if rank == size - 1:
        time.sleep(1.0)
    t0 = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - t0
    assert rank == size - 1 or waited > 0.5, f"barrier returned after {waited:.3f} s, before the last rank came"
    async_semantics(rank, size, hoc)
    # new_group over ranks 1.. (rank 0 is not a member): hocclCommSplit of the world when the world is bound to a
    # device, else a fresh communicator. Ranks given out of order: group ranks follow the sorted global ranks.
    sub = dist.new_group(list(range(size - 1, 0, -1)), backend="hoccl")
    if rank != 0:
        assert origin(sub) == ("hocclCommSplit" if bound else "hocclCommInitRank"), origin(sub)
        assert sub.rank() == rank - 1 and sub.size() == size - 1, (sub.rank(), sub.size())
        y = torch.tensor([float(rank)])
        dist.all_reduce(y, group=sub)
        assert y.item() == float(sum(range(1, size))), y
        y = torch.tensor([float(rank)])
        dist.broadcast(y, src=1, group=sub)  # global rank 1 is the group's rank 0
        assert y.item() == 1.0, y
    else:
        assert sub == dist.GroupMember.NON_GROUP_MEMBER, sub
    # new_group with use_local_synchronization: only the members call it, so it cannot split the world.
    if rank < 2:
        local = dist.new_group([0, 1], backend="hoccl", use_local_synchronization=True)
        assert origin(local) == "hocclCommInitRank", origin(local)
        y = torch.tensor([float(rank + 1)])
        dist.all_reduce(y, group=local)
        assert y.item() == 3.0, y
    # split_group: hocclCommSplit of the world's communicator into the even and the odd ranks.
    evens, odds = list(range(0, size, 2)), list(range(1, size, 2))
    half = dist.split_group(split_ranks=[evens, odds])
    assert origin(half) == "hocclCommSplit", origin(half)
    y = torch.tensor([float(rank)])
    dist.all_reduce(y, group=half)
    assert y.item() == float(sum(evens if rank % 2 == 0 else odds)), y
    assert half.size() == len(evens if rank % 2 == 0 else odds) and half.rank() == rank // 2
    bad_input(rank, size, hoc)
    dist.destroy_process_group()
    if rank == 0:
        print(f"hoccl.torch: {len(DTYPES)} dtypes x every collective and op equal to gloo on {size} ranks; "
              "new_group, split_group and bad input OK", flush=True)


if __name__ == "__main__":
    spawn(run, int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 4, timeout_s=250)
