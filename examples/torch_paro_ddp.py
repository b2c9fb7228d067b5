"""Data-parallel training with PaRO's IIG strategy on hoccl's PaRO groups, checked against plain DDP.

    HOCCL_HOSTID=... torchrun --nproc-per-node 4 examples/torch_paro_ddp.py [--group-size 2] [--steps 20]

hoccl.torch.paro_groups("IIG") gives two process groups per rank: intra (the m ranks of its group, a host) and
inter (one rank of each group, same local index). Each step every rank's full gradient (flattened, padded to a
multiple of N) is reduce-scattered inside the group (sum over the group, 1/m of the buffer), then across the groups
(sum over all ranks, 1/N): the optimizer (SGD with momentum, written out) updates only that 1/N shard and keeps
momentum only for it (OS sharded over all ranks: G), and the parameters are rebuilt by all-gathers, across groups
then inside the group. The same model trained by DistributedDataParallel must reach the same parameters.

On one machine, groups are emulated hosts: without HOCCL_HOSTID set, this script sets HOCCL_HOSTID=h<rank // m>
itself (m = --group-size) before the process group is made.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_ddp  # noqa: E402  (the model, the data and the DDP reference)

LR, MOMENTUM = 0.05, 0.9


def train_iig(groups, steps: int, seed: int = 0):
    """IIG training (see the module doc); returns the model and the losses."""
    rank, world = dist.get_rank(), dist.get_world_size()
    m = groups.group_size
    model = torch_ddp.make_model(seed)
    params = list(model.parameters())
    count = sum(p.numel() for p in params)
    padded = -(-count // world) * world
    shard = padded // world
    # This rank's 1/N of the flat buffer: the inter reduce-scatter's block `group` inside the intra block
    # `local_index`.
    offset = groups.local_index * (padded // m) + groups.group * shard
    momentum = torch.zeros(shard)
    losses = []
    for step in range(steps):
        x, y = torch_ddp.batch(rank, step)
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        losses.append(loss.item())
        grad = torch.zeros(padded)
        grad[:count] = torch.cat([p.grad.flatten() for p in params])
        in_group = torch.empty(padded // m)
        dist.reduce_scatter_tensor(in_group, grad, group=groups.intra)  # sum over the group
        mine = torch.empty(shard)
        dist.reduce_scatter_tensor(mine, in_group, group=groups.inter)  # sum over all ranks
        mine /= world  # DDP averages
        flat = torch.zeros(padded)
        flat[:count] = torch.cat([p.detach().flatten() for p in params])
        momentum.mul_(MOMENTUM).add_(mine)
        new_shard = flat[offset:offset + shard] - LR * momentum
        block = torch.empty(padded // m)
        dist.all_gather_into_tensor(block, new_shard, group=groups.inter)
        full = torch.empty(padded)
        dist.all_gather_into_tensor(full, block, group=groups.intra)
        with torch.no_grad():
            at = 0
            for p in params:
                p.copy_(full[at:at + p.numel()].view_as(p))
                at += p.numel()
    return model, losses


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    rank = int(os.environ["RANK"])
    os.environ.setdefault("HOCCL_HOSTID", f"h{rank // args.group_size}")
    import hoccl.torch

    dist.init_process_group("hoccl")
    groups = hoccl.torch.paro_groups("IIG", group_size=args.group_size)
    model, losses = train_iig(groups, args.steps)
    ref, ref_losses = torch_ddp.train(steps=args.steps)
    worst = max((a - b).abs().max().item() for a, b in zip(model.parameters(), ref.parameters()))
    ok = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(model.parameters(), ref.parameters()))
    if rank == 0:
        print(f"PaRO IIG on {dist.get_world_size()} ranks ({groups.ngroups} groups of {groups.group_size}), "
              f"{args.steps} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}; largest difference to plain DDP "
              f"{worst:.2e} ({'equal within fp32 round-off' if ok else 'DIFFERENT'})", flush=True)
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(f"rank {rank}: PaRO IIG parameters differ from DDP's by {worst:.3g}")


if __name__ == "__main__":
    main()
