#!/usr/bin/env python3
"""PyTorch's own NCCL backend (ProcessGroupNCCL) on CUDA tensors, with hoccl's NCCL shim as libnccl.so.2, for
tools/gpu-check: the drop-in as a framework sees it. Run it with LD_PRELOAD naming the shim; it refuses to report a
pass unless the shim is mapped (/proc/self/maps) and answers ncclGetVersion at run time
(ProcessGroupNCCL.get_runtime_nccl_version(); torch.cuda.nccl.version() is the version torch was compiled with).

NPROCS processes (default 2) on CUDA device 0 (NVIDIA's NCCL refuses two ranks on one GPU; the shim does not),
torch.distributed.init_process_group("nccl") through a TCP store on 127.0.0.1. Every rank draws every rank's inputs
from seeded generators, so each checks its results against a float64 reference on the host: all_reduce (sum, max,
avg; float32, bfloat16, float16, int32), all_gather_into_tensor, reduce_scatter_tensor, broadcast,
all_to_all_single, send/recv in a ring, counts that do not divide evenly, in place; last, an all_reduce inside
torch.cuda.graph must be refused with hoccl's message. Prints one line per check and
"torch-nccl-shim: PASS" or exits 1.

Usage: LD_PRELOAD=/path/to/libnccl.so.2 torch_nccl_shim.py [NPROCS] [PORT]"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.int32: 0}


def inputs(rank, count, dtype, salt):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.int32:
        return torch.randint(-1000, 1000, (count,), generator=g, dtype=torch.int64).to(dtype)
    return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)


def close(got, want, dtype, what, rank):
    got64, want64 = got.detach().cpu().double(), want.double()
    err = (got64 - want64).abs().max().item() if got64.numel() else 0.0
    scale = max(1.0, want64.abs().max().item() if want64.numel() else 1.0)
    ok = got64.shape == want64.shape and err <= TOL[dtype] * scale * 8
    if not ok:
        raise AssertionError(f"rank {rank}: {what} {dtype}: max error {err} (scale {scale})")
    return ok


def worker(rank, n, port, failures):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    torch.cuda.set_device(0)
    dev = torch.device('cuda', 0)
    try:
        dist.init_process_group('nccl', device_id=dev)
        maps = open('/proc/self/maps').read()
        libs = sorted({line.split()[-1] for line in maps.splitlines() if 'libnccl' in line})
        from torch._C._distributed_c10d import ProcessGroupNCCL
        runtime = ProcessGroupNCCL.get_runtime_nccl_version()
        if rank == 0:
            print(f"libnccl mapped: {libs}; ncclGetVersion at run time: {runtime}", flush=True)
        if tuple(runtime)[:2] != (2, 32):
            raise AssertionError(f"rank {rank}: ncclGetVersion answered {runtime}, not the shim's 2.32")
        if not any('hoccl' in lib or 'shim' in lib or os.environ.get('LD_PRELOAD', '?') == lib for lib in libs):
            raise AssertionError(f"rank {rank}: the shim is not mapped ({libs}); nothing here would test hoccl")
        for count in (0, 1, 1000, 1 << 20, (1 << 22) + 3):
            for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
                all_in = [inputs(r, count, dtype, 1) for r in range(n)]
                for op, ref in ((dist.ReduceOp.SUM, lambda xs: sum(x.double() for x in xs)),
                                (dist.ReduceOp.MAX, lambda xs: torch.stack([x.double() for x in xs]).amax(0)),
                                (dist.ReduceOp.AVG, lambda xs: sum(x.double() for x in xs) / n)):
                    if op == dist.ReduceOp.AVG and dtype == torch.int32:
                        continue
                    t = all_in[rank].to(dev)
                    dist.all_reduce(t, op=op)
                    want = ref(all_in) if count else torch.zeros(0, dtype=torch.float64)
                    close(t, want, dtype, f"all_reduce {op} count {count}", rank)
            # all_gather_into_tensor / reduce_scatter_tensor (count per rank), broadcast from the last rank.
            x = inputs(rank, count, torch.float32, 2).to(dev)
            out = torch.empty(n * count, device=dev)
            dist.all_gather_into_tensor(out, x)
            close(out, torch.cat([inputs(r, count, torch.float32, 2) for r in range(n)]), torch.float32,
                  f"all_gather_into_tensor count {count}", rank)
            big = inputs(rank, n * count, torch.float32, 3).to(dev)
            part = torch.empty(count, device=dev)
            dist.reduce_scatter_tensor(part, big)
            want = sum(inputs(r, n * count, torch.float32, 3).double() for r in range(n))
            close(part, want[rank * count:(rank + 1) * count], torch.float32, f"reduce_scatter_tensor {count}", rank)
            b = inputs(rank, count, torch.float32, 4).to(dev)
            dist.broadcast(b, src=n - 1)
            close(b, inputs(n - 1, count, torch.float32, 4), torch.float32, f"broadcast count {count}", rank)
            a2a_in = inputs(rank, n * count, torch.float32, 5).to(dev)
            a2a_out = torch.empty(n * count, device=dev)
            dist.all_to_all_single(a2a_out, a2a_in)
            want = torch.cat([inputs(r, n * count, torch.float32, 5)[rank * count:(rank + 1) * count]
                              for r in range(n)])
            close(a2a_out, want, torch.float32, f"all_to_all_single count {count}", rank)
            # send/recv in a ring (batched, as DDP-style pipelines do).
            s = inputs(rank, count, torch.float32, 6).to(dev)
            r_buf = torch.empty(count, device=dev)
            ops = [dist.P2POp(dist.isend, s, (rank + 1) % n), dist.P2POp(dist.irecv, r_buf, (rank - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            close(r_buf, inputs((rank - 1) % n, count, torch.float32, 6), torch.float32, f"send/recv {count}", rank)
            if rank == 0:
                print(f"count {count}: all_reduce x3 ops x4 types, all_gather, reduce_scatter, broadcast, "
                      f"all_to_all, send/recv ok", flush=True)
        torch.cuda.synchronize()
        dist.barrier()
        # Last (it may leave the communicator unusable): an all_reduce captured into a CUDA graph is refused with
        # hoccl's message, never accepted into a graph whose replays would communicate nothing.
        graph, t = torch.cuda.CUDAGraph(), torch.ones(8, device=dev)
        try:
            with torch.cuda.graph(graph):
                dist.all_reduce(t)
            raise AssertionError(f"rank {rank}: an all_reduce inside torch.cuda.graph was accepted")
        except AssertionError:
            raise
        except Exception as exc:  # torch raises DistBackendError (or the capture's end fails after it)
            chain = f"{exc} {exc.__context__}"
            if 'captured into a CUDA graph' not in chain:
                raise AssertionError(f"rank {rank}: capture refused without hoccl's message: {chain[:500]}")
        if rank == 0:
            print("all_reduce inside torch.cuda.graph: refused with hoccl's message", flush=True)
        dist.destroy_process_group()
    except Exception as exc:  # report, then fail the run
        print(f"torch-nccl-shim: rank {rank}: FAILED: {exc}", flush=True)
        failures.put(rank)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 29517
    if not torch.cuda.is_available():
        sys.exit('torch-nccl-shim: no CUDA device visible to torch')
    ctx = mp.get_context('spawn')
    failures = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, n, port, failures)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        if p.is_alive():
            p.kill()
            print('torch-nccl-shim: a rank did not finish within 240 s', flush=True)
            sys.exit(1)
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad or not failures.empty():
        sys.exit('torch-nccl-shim: FAILED')
    print('torch-nccl-shim: PASS')


if __name__ == '__main__':
    main()
