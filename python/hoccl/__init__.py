"""hoccl for Python: communicators and collectives on host buffers (numpy arrays, torch CPU tensors, bytearray,
anything with the buffer protocol, DLPack or __array_interface__), over libhoccl's C API.

    import numpy as np, hoccl
    comm = hoccl.Communicator.from_env()          # under hoccl-run, mpirun, srun, ...
    x = np.full(4, comm.rank, dtype=np.float32)
    comm.all_reduce(x)                            # in place; all_reduce(x, y) writes y
    comm.close()

See hoccl.Communicator for every collective, hoccl.group() for grouped calls, Communicator.paro() for PaRO groups.
The library is found as hoccl._native describes (HOCCL_LIBRARY, HOCCL_BUILD_DIR, the installed package).
"""

from hoccl._errors import HocclError
from hoccl._native import library_path
from hoccl._overlap import RingShiftRequest
from hoccl.communicator import Communicator, get_unique_id, group, version
from hoccl.paro import Paro, parse_strategy
from hoccl.types import SPLIT_NOCOLOR, DataType, PreMulSum, ReduceOp, premul_sum

__version__ = "0.1.0"

__all__ = ["Communicator", "DataType", "HocclError", "Paro", "PreMulSum", "ReduceOp", "RingShiftRequest",
           "SPLIT_NOCOLOR", "get_unique_id", "group", "library_path", "parse_strategy", "premul_sum", "version"]
