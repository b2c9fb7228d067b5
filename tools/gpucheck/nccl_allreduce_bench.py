#!/usr/bin/env python3
"""All-reduce bus bandwidth through the NCCL API (CuPy's binding, cupy.cuda.nccl) on device buffers, one process per
GPU, for tools/gpu-check. Which libnccl.so.2 answers is the caller's choice: NVIDIA's (LD_LIBRARY_PATH to
.deps/nccl-2.32.3) or hoccl's NCCL shim (hoccl-nccl run); the program is the same, so the two columns of gpu-check's
table are measured by one tool.

Run as every rank of a job started by hoccl-run (HOCCL_RANK, HOCCL_WORLD_SIZE, HOCCL_LOCAL_RANK): rank r uses CUDA
device HOCCL_LOCAL_RANK; rank 0 writes the NCCL unique id to UIDFILE, the others read it. Rank 0 prints one line per
size: `bytes time_us algbw_GBs busbw_GBs wrong` (out of place, float32 sum, the median over ITERS timed calls after
WARMUP; busbw = algbw * 2(n-1)/n as nccl-tests computes it; wrong = elements differing from the expected sum).

Usage: nccl_allreduce_bench.py UIDFILE MIN_BYTES MAX_BYTES [ITERS] [WARMUP]"""
import os
import sys
import time

import cupy as cp
from cupy.cuda import nccl


def main():
    uid_file, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    iters = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    warmup = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    rank, n = int(os.environ['HOCCL_RANK']), int(os.environ['HOCCL_WORLD_SIZE'])
    cp.cuda.Device(int(os.environ.get('HOCCL_LOCAL_RANK', '0'))).use()
    if rank == 0:
        uid = nccl.get_unique_id()
        with open(uid_file + '.tmp', 'wb') as f:
            f.write(bytes(b & 0xff for b in uid))
        os.rename(uid_file + '.tmp', uid_file)
    else:
        deadline = time.time() + 60
        while not os.path.exists(uid_file):
            if time.time() > deadline:
                sys.exit('nccl_allreduce_bench: no unique id from rank 0 after 60 s')
            time.sleep(0.05)
        with open(uid_file, 'rb') as f:
            uid = tuple(b if b < 128 else b - 256 for b in f.read())
    comm = nccl.NcclCommunicator(n, uid, rank)
    stream = cp.cuda.Stream(non_blocking=True)
    size = lo
    while size <= hi:
        count = max(1, size // 4)
        send = cp.full(count, rank + 1, dtype=cp.float32)
        recv = cp.zeros(count, dtype=cp.float32)
        times = []
        for i in range(warmup + iters):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            comm.allReduce(send.data.ptr, recv.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
            end.record(stream)
            end.synchronize()
            if i >= warmup:
                times.append(cp.cuda.get_elapsed_time(start, end) * 1e3)  # microseconds
        wrong = int(cp.count_nonzero(recv != n * (n + 1) / 2))
        t = sorted(times)[len(times) // 2]
        alg = count * 4 / t / 1e3  # GB/s
        if rank == 0:
            print(f'{count * 4} {t:.2f} {alg:.2f} {alg * 2 * (n - 1) / n:.2f} {wrong}', flush=True)
        size *= 2
    comm.destroy()


if __name__ == '__main__':
    main()
