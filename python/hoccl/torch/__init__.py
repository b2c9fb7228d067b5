"""hoccl.torch: hoccl as a torch.distributed (c10d) backend for CPU tensors.

``import hoccl.torch`` registers the backend ``"hoccl"``; then::

    torch.distributed.init_process_group("hoccl")          # or "cpu:hoccl,cuda:nccl"

runs every torch.distributed collective on CPU tensors through hoccl: all_reduce (every ReduceOp: SUM, PRODUCT,
MIN, MAX, AVG, PREMUL_SUM natively, BAND/BOR/BXOR through an all-gather), all_gather (list and into one tensor),
reduce_scatter (list and from one tensor), broadcast, reduce, all_to_all (list and single, with split sizes),
gather, scatter, send/recv (tag 0 only: hoccl matches messages per peer in call order; another tag raises
ValueError), barrier. Each process group owns one hoccl communicator and one worker thread; calls return a Work at
once (``async_op=True``) whose ``wait()`` and ``get_future()`` complete when the worker ran it.

* The communicator's unique id travels through the store torch gives the backend. ``split_group`` is
  ``hocclCommSplit`` of the parent. ``new_group`` is ``hocclCommSplit`` of the world's communicator when the world
  was made with ``init_process_group("hoccl", device_id=torch.device("cpu", 0))`` (torch then calls every rank of
  the world, as it does for NCCL's ncclCommSplit); otherwise torch calls only the new group's members, and the group
  gets a fresh communicator through the store. ``backend.origin`` names the call that made a group's communicator.
* The process group's timeout becomes ``HOCCL_TIMEOUT`` (whole seconds, rounded up) unless the environment sets
  it: hoccl reads it once per process, so the first group's timeout counts. ``Work.wait()`` without an argument
  waits at most the group's timeout.
* Bad input (a CUDA or non-contiguous tensor, a dtype hoccl lacks, sizes that disagree) raises ValueError or
  TypeError before anything is sent; a failure inside hoccl (a peer's mismatched call, a dead peer, a timeout)
  raises torch.distributed.DistBackendError (a RuntimeError) carrying hoccl's message.

``paro_groups(strategy)`` makes the PaRO group-mapper's communicators (hoccl/paro.h) usable as process groups.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = ["ParoGroups", "paro_groups", "BACKEND"]

#: The backend name to pass to torch.distributed.init_process_group / new_group.
BACKEND = "hoccl"


def _load_extension():
    """Imports _c10d from next to this file (installed), else from $HOCCL_BUILD_DIR/python/hoccl/torch/."""
    here = Path(__file__).resolve().parent
    places = [here]
    build = os.environ.get("HOCCL_BUILD_DIR")
    if build:
        places.append(Path(build) / "python" / "hoccl" / "torch")
    for place in places:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = place / f"_c10d{suffix}"
            if path.exists():
                spec = importlib.util.spec_from_file_location("hoccl.torch._c10d", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules["hoccl.torch._c10d"] = module
                return module
    raise ImportError(
        "hoccl.torch: the extension module _c10d was not found next to "
        f"{here} nor under $HOCCL_BUILD_DIR/python/hoccl/torch (HOCCL_BUILD_DIR={build!r}); build hoccl with torch "
        "installed (meson builds python/hoccl/torch when its python can import torch) or pip install the package"
    )


_c10d = _load_extension()
ProcessGroupHoccl = _c10d.ProcessGroupHoccl


def _create(opts, backend_options=None):
    """The creator torch.distributed calls for every group with backend "hoccl" (extended API: opts is a
    _DistributedBackendOptions).

    A new group is ``hocclCommSplit`` of the world's hoccl communicator when torch offers it as ``split_from`` (the
    default group was made with ``device_id=torch.device("cpu", 0)``; torch then also calls
    ``perform_nocolor_split`` on the ranks outside the new group) and every rank takes part: new_group's
    ``use_local_synchronization=True`` (a hashed group name, not torch's group counter) leaves the other ranks out, so
    such a group, and any group without ``split_from``, gets a fresh communicator through the store."""
    timeout = opts.timeout
    # hoccl reads HOCCL_TIMEOUT once per process: the first group's timeout, unless the environment set it.
    if "HOCCL_TIMEOUT" not in os.environ and timeout.total_seconds() > 0:
        os.environ["HOCCL_TIMEOUT"] = str(math.ceil(timeout.total_seconds()))
    parent, ranks = opts.split_from, list(opts.global_ranks_in_group)
    if isinstance(parent, ProcessGroupHoccl) and ranks and str(opts.group_id).isdigit():
        return _c10d.split(parent, ranks, timeout.total_seconds())
    return _c10d.create(opts.store, opts.group_rank, opts.group_size, timeout.total_seconds())


if "hoccl" not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])


@dataclass
class ParoGroups:
    """The process groups of a PaRO handle (hoccl/paro.h) and this rank's place in the layout."""

    strategy: str  #: canonical three letters (P, G, OS), e.g. "IIG"
    group_size: int  #: ranks per group (a host, or a switch)
    ngroups: int  #: number of groups
    group: int  #: this rank's group
    local_index: int  #: this rank's index inside its group
    intra: dist.ProcessGroup  #: the ranks of this rank's group, ordered by local index
    inter: dist.ProcessGroup  #: one rank per group (this rank's local index), ordered by group
    global_: dist.ProcessGroup | None  #: all ranks, when the strategy needs it (else None)
    intra_ranks: list[int]  #: global ranks of intra, in group-rank order
    inter_ranks: list[int]  #: global ranks of inter, in group-rank order


def _wrap(backend, name: str, global_ranks: list[int]) -> dist.ProcessGroup:
    """A torch ProcessGroup around a hoccl backend, registered so that collectives accept group=pg."""
    c10d = dist.distributed_c10d
    store = dist.PrefixStore(f"{name}/", c10d._get_default_store())
    pg = dist.ProcessGroup(store, backend.rank(), backend.size())
    btype = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(btype)
    pg._register_backend(torch.device("cpu"), btype, backend)
    pg._set_group_name(name)
    pg._set_group_desc(name)
    c10d._register_pg_in_world(
        pg,
        backend_name=BACKEND,
        store=store,
        group_name=name,
        backend_config="cpu:hoccl",
        rank_mapping={g: i for i, g in enumerate(global_ranks)},
    )
    return pg


_paro_count = 0


def paro_groups(strategy: str, group_size: int | None = None, level: str = "host",
                group: dist.ProcessGroup | None = None) -> ParoGroups:
    """The PaRO group-mapper's communicators as torch process groups (collective over ``group``, default: world).

    ``strategy``: three letters N/I/G for parameters, gradients and optimizer states, or an alias (ddp, zero1,
    zero2, zero3, mics, hsdp); see docs/paro.md. Groups are the ranks of one host (``level="host"``) or of one switch
    (``"switch"``) as hoccl sees them; ``group_size``, when given, must match that layout (on one machine, emulate
    hosts with ``HOCCL_HOSTID``, e.g. ``HOCCL_HOSTID=h$((RANK / 2))`` for groups of 2, set before the group is made).
    """
    global _paro_count
    if level not in ("host", "switch"):
        raise ValueError(f"hoccl paro_groups: level must be 'host' or 'switch', got {level!r}")
    parent_pg = group if group is not None else dist.distributed_c10d._get_default_group()
    parent = parent_pg._get_backend(torch.device("cpu"))
    if not isinstance(parent, ProcessGroupHoccl):
        raise ValueError(
            "hoccl paro_groups: the parent group's CPU backend is not hoccl "
            f"({type(parent).__name__}); init_process_group('hoccl') first"
        )
    made = _c10d.paro_create(parent, strategy, 0 if level == "host" else 1)
    if group_size is not None and made["group_size"] != group_size:
        raise ValueError(
            f"hoccl paro_groups: hoccl's layout has groups of {made['group_size']} ranks ({made['ngroups']} "
            f"{level}s), not {group_size}; to emulate hosts on one machine set HOCCL_HOSTID per rank before "
            "init_process_group (e.g. HOCCL_HOSTID=h$((RANK / group_size)))"
        )
    # Everyone's place in the layout gives the global ranks of each group.
    places = [None] * parent_pg.size()
    dist.all_gather_object(places, (dist.get_rank(), made["group"], made["local_index"]), group=parent_pg)
    intra_ranks = [g for g, grp, li in sorted(places, key=lambda p: p[2]) if grp == made["group"]]
    inter_ranks = [g for g, grp, li in sorted(places, key=lambda p: p[1]) if li == made["local_index"]]
    _paro_count += 1
    tag = f"hoccl_paro{_paro_count}_{made['strategy']}"
    intra = _wrap(made["intra"], f"{tag}_intra{made['group']}", intra_ranks)
    inter = _wrap(made["inter"], f"{tag}_inter{made['local_index']}", inter_ranks)
    glob = None
    if made["global"] is not None:
        glob = _wrap(made["global"], f"{tag}_global", sorted(g for g, _, _ in places))
    return ParoGroups(made["strategy"], made["group_size"], made["ngroups"], made["group"], made["local_index"],
                      intra, inter, glob, intra_ranks, inter_ranks)
