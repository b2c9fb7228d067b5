"""hoccl.torch: a timeout is a Python exception, and PaRO groups work as process groups.

--timeout (2 ranks): the group's timeout (3 s) becomes HOCCL_TIMEOUT; rank 1 never calls the all_reduce, so rank 0
gets torch.distributed.DistBackendError carrying hoccl's message within the timeout plus a margin, and the
interpreter survives. Then, on a second group, Work.wait(timeout) of 0.5 s on an async all_reduce that cannot finish
raises DistBackendError after about 0.5 s (not the group's 3 s) naming that timeout; the same Work's wait() then
raises hoccl's own timeout error, and so does its future.
--paro (4 ranks, emulated hosts of 2 via HOCCL_HOSTID): hoccl.torch.paro_groups("IIG", 2) yields intra/inter groups
of the expected ranks, all_reduce over each sums the expected ranks, and examples/torch_paro_ddp.py's IIG training
equals plain DDP's parameters.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "examples"))
from common import spawn  # noqa: E402


def run_timeout(rank, size):
    import hoccl.torch  # noqa: F401

    dist.init_process_group("hoccl", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=3))
    assert os.environ.get("HOCCL_TIMEOUT") == "3", os.environ.get("HOCCL_TIMEOUT")
    other = dist.new_group(backend="hoccl")
    dist.barrier()
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(8))
        except dist.DistBackendError as e:
            took = time.monotonic() - t0
            assert "hoccl" in str(e) and took < 20, (took, str(e))
            print(f"timeout: rank 0 got DistBackendError after {took:.1f} s: {str(e)[:300]}", flush=True)
        else:
            raise AssertionError("all_reduce without a peer did not fail")
        t0 = time.monotonic()
        w = dist.all_reduce(torch.ones(8), group=other, async_op=True)
        try:
            w.wait(datetime.timedelta(seconds=0.5))
        except dist.DistBackendError as e:
            took = time.monotonic() - t0
            assert "did not complete within 500 ms" in str(e) and took < 10, (took, str(e))
            print(f"timeout: Work.wait(0.5 s) raised after {took:.1f} s: {str(e)[:200]}", flush=True)
        else:
            raise AssertionError("Work.wait(0.5 s) on an all_reduce without a peer returned")
        try:
            w.wait()
        except dist.DistBackendError as e:
            took = time.monotonic() - t0
            assert "hoccl" in str(e) and "did not complete within" not in str(e) and took < 20, (took, str(e))
        else:
            raise AssertionError("Work.wait() on an all_reduce without a peer returned")
        try:
            w.get_future().wait()
        except Exception as e:  # the future's error is hoccl's
            assert "hoccl" in str(e), str(e)
        else:
            raise AssertionError("the future of a failed all_reduce completed without an error")
        print(f"timeout: Work.wait() then raised hoccl's error after {time.monotonic() - t0:.1f} s", flush=True)
    else:
        time.sleep(20)  # never joins; exits after rank 0 gave up
    os._exit(0)  # the world communicator is broken on purpose: no collective teardown


def run_paro(rank, size):
    os.environ["HOCCL_HOSTID"] = f"h{rank // 2}"
    import hoccl.torch
    import torch_paro_ddp

    dist.init_process_group("hoccl", rank=rank, world_size=size)
    g = hoccl.torch.paro_groups("iig", group_size=2)
    assert g.intra._get_backend(torch.device("cpu")).origin == "hocclParoCreate"
    assert (g.strategy, g.group_size, g.ngroups) == ("IIG", 2, 2), g
    assert g.intra_ranks == [rank - rank % 2, rank - rank % 2 + 1], g.intra_ranks
    assert g.inter_ranks == [rank % 2, rank % 2 + 2], g.inter_ranks
    for pg, ranks in ((g.intra, g.intra_ranks), (g.inter, g.inter_ranks)):
        y = torch.tensor([float(rank)])
        dist.all_reduce(y, group=pg)
        assert y.item() == float(sum(ranks)), (y, ranks)
    try:
        hoccl.torch.paro_groups("IIG", group_size=4)
    except ValueError as e:
        assert "HOCCL_HOSTID" in str(e), e
    else:
        raise AssertionError("a group size that contradicts the layout was accepted")
    model, _ = torch_paro_ddp.train_iig(g, steps=10)
    ref, _ = torch_paro_ddp.torch_ddp.train(steps=10)
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()
    dist.destroy_process_group()
    if rank == 0:
        print("paro: IIG groups as process groups OK; IIG training equals DDP after 10 steps", flush=True)


if __name__ == "__main__":
    if "--timeout" in sys.argv:
        spawn(run_timeout, 2, timeout_s=200)
    else:
        spawn(run_paro, 4, timeout_s=250)
