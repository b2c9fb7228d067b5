"""Bad input to hoccl.Communicator raises a clear exception before any C call and changes nothing; errors of the C
library come back as hoccl.HocclError with its message. Run under hoccl-run with 2 ranks."""

import numpy as np

import hoccl
from common import expect, expect_raises, finish, torch

comm = hoccl.Communicator.from_env()
rank, n = comm.rank, comm.size

f32 = lambda k, v=7.0: np.full(k, v, dtype=np.float32)  # noqa: E731


def unchanged(what, buffers, fn, exc, contains=None):
    """fn() must raise exc (with `contains` in its message) and leave every buffer as it was."""
    before = [np.array(b, copy=True) if isinstance(b, np.ndarray) else b.clone() for b in buffers]
    expect_raises(exc, fn, what, contains)
    for b, old in zip(buffers, before):
        same = np.array_equal(b, old) if isinstance(b, np.ndarray) else bool((b == old).all())
        expect(same, f"{what}: a buffer changed")


send, recv = f32(4, 1.0), f32(5, 2.0)
unchanged("all_reduce size mismatch", [send, recv], lambda: comm.all_reduce(send, recv), ValueError, "needs 4")
unchanged("all_reduce dtype mismatch", [send], lambda: comm.all_reduce(send, np.zeros(4)), TypeError, "same data type")
strided = np.zeros((4, 2), np.float32)[:, 0]
unchanged("non-contiguous send", [send], lambda: comm.all_reduce(strided, send), ValueError, "not contiguous")
reverse = np.arange(4, dtype=np.float32)[::-1]
unchanged("negative stride", [reverse], lambda: comm.all_reduce(reverse), ValueError, "not contiguous")
fortran = np.asfortranarray(np.zeros((3, 4), np.float32))
unchanged("Fortran order", [fortran], lambda: comm.all_reduce(fortran), ValueError, "not contiguous")
ro = f32(4)
ro.flags.writeable = False
unchanged("read-only output", [send], lambda: comm.all_reduce(send, ro), ValueError, "read-only")
unchanged("read-only in place", [], lambda: comm.all_reduce(ro), ValueError, "read-only")
unchanged("read-only bytes output", [], lambda: comm.broadcast(bytes(16), root=0), ValueError, "read-only")
unchanged("int16 (hoccl has none)", [], lambda: comm.all_reduce(np.zeros(4, np.int16)), TypeError, "no data type")
unchanged("bool", [], lambda: comm.all_reduce(np.zeros(4, bool)), TypeError, "no data type")
unchanged("complex", [], lambda: comm.all_reduce(np.zeros(4, np.complex64)), TypeError, "no data type")
unchanged("big-endian", [], lambda: comm.all_reduce(np.zeros(4, ">f4")), TypeError, "byte order")
unchanged("not a buffer", [], lambda: comm.all_reduce([1.0, 2.0]), TypeError, "not a buffer")
unchanged("None as the buffer", [], lambda: comm.all_reduce(None), TypeError)
unchanged("all_gather recv size", [send], lambda: comm.all_gather(send, f32(4 * n + 1)), ValueError, "needs")
unchanged("reduce_scatter send size", [recv], lambda: comm.reduce_scatter(f32(5 * n + 1), recv), ValueError, "needs")
odd = f32(n * 3 + 1)
unchanged("reduce_scatter in place, uneven", [odd], lambda: comm.reduce_scatter(odd), ValueError, "equal blocks")
unchanged("all_to_all uneven", [odd], lambda: comm.all_to_all(odd), ValueError, "equal blocks")
unchanged("gather recv size on the root", [send],
          lambda: comm.gather(send, f32(4 * n - 1), root=rank), ValueError, "needs")
unchanged("scatter send size on the root", [recv],
          lambda: comm.scatter(f32(5 * n - 1), recv, root=rank), ValueError, "needs")
unchanged("broadcast root out of range", [send], lambda: comm.broadcast(send, root=n), ValueError, "outside")
unchanged("reduce root negative", [send], lambda: comm.reduce(send, root=-1), ValueError, "outside")
unchanged("send peer out of range", [send], lambda: comm.send(send, n), ValueError, "outside")
unchanged("unknown op", [send], lambda: comm.all_reduce(send, op="mean"), ValueError, "unknown reduction op")
unchanged("op of a wrong type", [send], lambda: comm.all_reduce(send, op=2.5), TypeError)
ints = np.arange(4, dtype=np.int32)
unchanged("premul_sum scalar not integral for int32", [ints],
          lambda: comm.all_reduce(ints, op=hoccl.premul_sum(0.5)), ValueError, "not an integer")
unchanged("premul_sum scalar out of range", [ints],
          lambda: comm.all_reduce(np.zeros(4, np.int8), op=hoccl.premul_sum(300)), ValueError, "does not fit")
big = f32(8)
unchanged("partial overlap", [big], lambda: comm.all_reduce(big[0:4], big[2:6]), ValueError, "overlap")
unchanged("split color", [], lambda: comm.split(-5), ValueError)
unchanged("paro strategy", [], lambda: comm.paro("XYZ"), ValueError)
if torch is not None:
    t = torch.zeros(4, 3).t()
    unchanged("non-contiguous torch tensor", [t], lambda: comm.all_reduce(t), ValueError, "contiguous()")
    g = torch.zeros(4, requires_grad=True)
    unchanged("torch tensor that requires grad", [], lambda: comm.all_reduce(g), ValueError, "detach")
    unchanged("torch int16", [], lambda: comm.all_reduce(torch.zeros(4, dtype=torch.int16)), TypeError, "int16")
    unchanged("torch bool", [], lambda: comm.all_reduce(torch.zeros(4, dtype=torch.bool)), TypeError, "bool")
    unchanged("torch/numpy type mismatch", [send],
              lambda: comm.all_reduce(send, torch.zeros(4, dtype=torch.bfloat16)), TypeError, "same data type")

# The library's own errors: HocclError with the result code and hoccl's message.
e = expect_raises(hoccl.HocclError, lambda: hoccl.Communicator(2, b"\0" * 128, 0), "unique id of zeros")
if e is not None:
    expect(e.code == 4 and e.code_name == "hocclInvalidArgument", f"unique id of zeros: code {e.code}")
    expect(len(e.message) > 10 and e.message in str(e), f"unique id of zeros: message {e.message!r}")
expect_raises(ValueError, lambda: hoccl.Communicator(2, b"short", 0), "unique id of 5 bytes", "128 bytes")
expect_raises(ValueError, lambda: hoccl.Communicator(2, hoccl.get_unique_id(), 2), "rank out of range", "outside")

# Sizes that differ between ranks: the library's mismatch check (HOCCL_CHECK_MISMATCH, on for the first calls of a
# communicator) fails the call on every rank with hocclInvalidUsage, naming each rank's call.
sub = comm.split(0)
e = expect_raises(hoccl.HocclError, lambda: sub.all_reduce(f32(4 + rank)), "counts that differ between ranks")
if e is not None:
    expect(e.code == 5 and "count" in e.message, f"counts that differ between ranks: {e}")
comm.barrier()  # both ranks are past the failed call: an abort while the other still checks would fail it instead
sub.abort()

# from_env() without a launcher's environment: HocclError from hocclCommInitFromEnv (in a child process).
if rank == 0:
    import os
    import subprocess
    import sys
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("HOCCL_RANK", "HOCCL_WORLD", "HOCCL_LOCAL", "HOCCL_COMM_ID", "OMPI_", "PMI",
                                  "SLURM_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    code = ("import hoccl\ntry:\n    hoccl.Communicator.from_env()\nexcept hoccl.HocclError as e:\n"
            "    print('HocclError', e.code, e.message)\n")
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=60)
    expect(out.stdout.startswith("HocclError") and len(out.stdout) > 20,
           f"from_env without a launcher: {out.stdout!r} {out.stderr[-300:]!r}")

# A 1-rank communicator of this process, then its use after close().
solo = hoccl.Communicator(1, hoccl.get_unique_id(), 0)
x = f32(3, 1.0)
solo.all_reduce(x)
expect(np.array_equal(x, f32(3, 1.0)), "1-rank all_reduce leaves the data as it is")
solo.close()
expect_raises(ValueError, lambda: solo.all_reduce(x), "use after close", "closed")
solo.close()  # closing twice is harmless

# The job still works after all of that.
y = np.full(3, rank + 1, dtype=np.int64)
comm.all_reduce(y)
expect(np.array_equal(y, np.full(3, n * (n + 1) // 2)), "all_reduce after the bad calls")
comm.close()
finish(rank)
