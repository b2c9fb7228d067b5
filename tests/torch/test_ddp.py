"""DDP with hoccl equals DDP with gloo: examples/torch_ddp.py's training, 2 ranks, 20 steps, once per backend in the
same processes (world = hoccl, a second group = gloo); the parameters must agree within fp32 round-off (the sums
are reduced in different orders) and the loss must fall. With --torchrun: the example itself under
`torchrun --nproc-per-node 2` (the issue's "done when")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "examples"))
from common import free_port, spawn  # noqa: E402


def run(rank, size):
    import hoccl.torch  # noqa: F401
    import torch_ddp

    dist.init_process_group("hoccl", rank=rank, world_size=size)
    gloo = dist.new_group(backend="gloo")
    m_hoccl, l_hoccl = torch_ddp.train(steps=20)
    m_gloo, l_gloo = torch_ddp.train(group=gloo, steps=20)
    for (name, a), (_, b) in zip(m_hoccl.named_parameters(), m_gloo.named_parameters()):
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"rank {rank}: {name} differs from gloo's by {(a - b).abs().max().item():.3g}")
    if not l_hoccl[-1] < 0.5 * l_hoccl[0]:
        raise AssertionError(f"the loss did not fall: {l_hoccl[0]} -> {l_hoccl[-1]}")
    dist.destroy_process_group()
    if rank == 0:
        print(f"DDP 20 steps: hoccl's parameters equal gloo's within fp32 round-off; loss {l_hoccl[0]:.4f} -> "
              f"{l_hoccl[-1]:.4f} (gloo {l_gloo[-1]:.4f})", flush=True)


def torchrun() -> None:
    torchrun_bin = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun_bin), "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
           str(free_port()), str(ROOT / "examples" / "torch_ddp.py"), "--steps", "10"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=250, env=os.environ.copy())
    sys.stdout.write(r.stdout)
    if r.returncode != 0 or "parameters identical on every rank" not in r.stdout:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"torchrun examples/torch_ddp.py failed (exit {r.returncode})")


if __name__ == "__main__":
    if "--torchrun" in sys.argv:
        torchrun()
    else:
        spawn(run, 2, timeout_s=250)
