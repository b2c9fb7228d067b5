"""DDP training of a small MLP with torch.distributed's backend "hoccl" (CPU tensors).

    torchrun --nproc-per-node 2 examples/torch_ddp.py [--steps 50] [--backend hoccl|gloo]

Every rank trains on its own shard of a synthetic regression problem; DistributedDataParallel all-reduces the
gradients through hoccl. At the end every rank checks that its parameters equal rank 0's (DDP keeps the replicas
identical) and rank 0 prints the loss curve. In a build tree, run with PYTHONPATH=<src>/python and
HOCCL_BUILD_DIR=<build dir>; after `pip install .` nothing is needed.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 1))


def batch(rank: int, step: int, size: int = 16):
    """This rank's batch of step: inputs and targets of a fixed random linear map plus noise."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(size, 32, generator=g)
    w = torch.linspace(-1, 1, 32)
    return x, (x @ w).unsqueeze(1) + 0.01 * torch.randn(size, 1, generator=g)


def train(group=None, steps: int = 50, seed: int = 0) -> tuple[torch.nn.Module, list[float]]:
    """Trains a DDP model over group (default: the world); returns the inner model and the losses."""
    rank = dist.get_rank()
    model = DDP(make_model(seed), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model.module, losses


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--backend", default="hoccl")
    args = p.parse_args()
    if args.backend == "hoccl":
        import hoccl.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    model, losses = train(steps=args.steps)
    flat = torch.cat([q.detach().flatten() for q in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    if not torch.equal(flat, ref):
        raise SystemExit(f"rank {rank}: parameters differ from rank 0's by {(flat - ref).abs().max():.3g}")
    if rank == 0:
        print(f"{args.backend}: {size} ranks, {args.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"parameters identical on every rank (local rank {os.environ.get('LOCAL_RANK', '?')})")
        if not losses[-1] < losses[0]:
            raise SystemExit("the loss did not decrease")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
