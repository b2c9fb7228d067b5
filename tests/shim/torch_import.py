"""`import torch` (the CUDA build from PyPI, which links libtorch_cuda.so against libnccl.so.2) with hoccl's
libnccl.so.2 preloaded, on a machine without a GPU:
- the import succeeds (every NCCL symbol torch binds is exported by the shim);
- torch's NCCL symbols bind to the shim: ProcessGroupNCCL.get_runtime_nccl_version() (which calls ncclGetVersion at
  run time) equals the shim's ncclGetVersion, read independently through ctypes. torch.cuda.nccl.version() is the
  version torch was compiled against, not a run-time query, so it is only printed;
- torch.distributed's NCCL backend reports itself available."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_util  # noqa: E402

client_util.require("torch", "tools/install-deps --torch installs it (about 5.3 GB)")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import ProcessGroupNCCL  # noqa: E402

c = client_util.Checks("torch")
shim = client_util.shim_path()
version = ctypes.c_int(0)
c.check(ctypes.CDLL(shim).ncclGetVersion(ctypes.byref(version)) == 0, "ncclGetVersion through ctypes")
want = (version.value // 10000, version.value // 100 % 100, version.value % 100)
runtime = tuple(ProcessGroupNCCL.get_runtime_nccl_version())
print(f"torch {torch.__version__}: runtime NCCL {runtime} (the shim says {want}), built against "
      f"{torch.cuda.nccl.version()}; libnccl files mapped: {sorted(client_util.loaded_ncclLibraries())}")
c.check(runtime == want and want[:2] >= (2, 32), f"torch's runtime NCCL version {runtime} is the shim's {want}")
c.check(dist.is_available() and dist.is_nccl_available(), "torch.distributed reports the NCCL backend available")
c.check(dist.Backend("nccl") == dist.Backend.NCCL, "the nccl backend name resolves")
c.check(shim in client_util.loaded_ncclLibraries(), f"{shim} is mapped into the process")
c.finish()
