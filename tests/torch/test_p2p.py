"""hoccl.torch: send/recv between 2 ranks, the tag rule, and the device check.

hoccl matches the messages between two ranks in call order and has no tags, so the backend accepts tag 0 only:
- several tag-0 messages (dtypes, sizes incl. 0 and odd counts; blocking send/recv and isend/irecv, either order)
  arrive intact and in order (checked against data each rank regenerates from the sender's seed);
- a send or recv with another tag (direct, and through batch_isend_irecv) raises ValueError naming the tag, the
  rank and the peer before anything is queued: the next tag-0 message still pairs with the right receive;
- the device check refuses a CUDA device naming hoccl's device path (through the check itself: no GPU here) and a
  meta tensor handed to the backend.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import spawn  # noqa: E402

MESSAGES = [(torch.float32, 1000), (torch.int64, 7), (torch.float64, 0), (torch.uint8, 4099), (torch.bfloat16, 33)]


def payload(seed: int, dtype, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=g) * 200 - 100).to(dtype) if dtype != torch.uint8 else \
        torch.randint(0, 256, (n,), generator=g, dtype=torch.uint8)


def expect_value_error(fn, needles, what):
    try:
        fn()
    except ValueError as e:
        for needle in needles:
            if needle not in str(e):
                raise AssertionError(f"{what}: message lacks {needle!r}: {e}")
        return
    raise AssertionError(f"{what}: no ValueError")


def run(rank, size):
    import hoccl.torch  # noqa: F401

    dist.init_process_group("hoccl", rank=rank, world_size=size)
    peer = 1 - rank
    # Blocking, in order: rank 0 sends all, rank 1 receives all.
    for i, (dt, n) in enumerate(MESSAGES):
        if rank == 0:
            dist.send(payload(i, dt, n), 1)
        else:
            out = torch.empty(n, dtype=dt)
            dist.recv(out, 0)
            assert torch.equal(out, payload(i, dt, n)), (i, dt)
    # Non-blocking, both directions, receives posted before sends on one rank and after on the other.
    outs = [torch.empty(n, dtype=dt) for dt, n in MESSAGES]
    sends = [lambda i=i, dt=dt, n=n: dist.isend(payload(100 * rank + i, dt, n), peer) for i, (dt, n) in
             enumerate(MESSAGES)]
    recvs = [lambda i=i: dist.irecv(outs[i], peer) for i in range(len(MESSAGES))]
    works = [f() for f in (recvs + sends if rank == 0 else sends + recvs)]
    for w in works:
        w.wait()
    for i, (dt, n) in enumerate(MESSAGES):
        assert torch.equal(outs[i], payload(100 * peer + i, dt, n)), (i, dt, "isend/irecv")

    # Tags other than 0 are refused on both sides, before anything is queued.
    t = torch.full((3,), 5.0)
    if rank == 0:
        expect_value_error(lambda: dist.send(t, 1, tag=7), ["tag 7 cannot be honoured", "send on rank 0 (peer 1)"],
                           "send tag 7")
        expect_value_error(lambda: dist.isend(t, 1, tag=-1), ["tag -1 cannot be honoured"], "isend tag -1")
        expect_value_error(lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, t, 1, tag=3)]),
                           ["tag 3 cannot be honoured"], "batch_isend_irecv tag 3")
        dist.send(torch.full((3,), 1.0), 1)  # the message rank 1 must get
    else:
        expect_value_error(lambda: dist.recv(t, 0, tag=7), ["tag 7 cannot be honoured", "recv on rank 1 (peer 0)"],
                           "recv tag 7")
        expect_value_error(lambda: dist.irecv(t, 0, tag=2), ["tag 2 cannot be honoured"], "irecv tag 2")
        assert torch.equal(t, torch.full((3,), 5.0)), "a refused receive changed its tensor"
        dist.recv(t, 0)
        assert torch.equal(t, torch.full((3,), 1.0)), f"a refused send was sent after all: got {t}"

    # The device check: CUDA is refused naming hoccl's device path (checked directly: no GPU here); a meta tensor
    # handed to the backend is refused before anything is queued.
    hoccl.torch._c10d._check_device("cpu")
    expect_value_error(lambda: hoccl.torch._c10d._check_device("cuda:0"),
                       ["got one on cuda:0", "device path", "docs/cuda.md", "cpu:hoccl,cuda:nccl"], "cuda device")
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    expect_value_error(lambda: backend.send([torch.ones(3, device="meta")], peer, 0), ["serves CPU tensors", "meta"],
                       "meta tensor")
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"hoccl.torch p2p: {len(MESSAGES)} messages each way in order, tags other than 0 refused on send and "
              "recv, CUDA and meta devices refused", flush=True)


if __name__ == "__main__":
    spawn(run, 2, timeout_s=100)
