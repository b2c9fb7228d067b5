"""Finds and loads libhoccl, and declares the C functions the package calls.

Bindings: ctypes over the public C API (include/hoccl/hoccl.h, include/hoccl/paro.h) rather than a C extension. The
C API is small, plain C and ABI-stable (NCCL's enum values, opaque handles), so ctypes needs no compiler at install
time, no build against each Python version and no second native library beside libhoccl; ctypes.CDLL releases the
GIL around every call, so a collective that blocks on its peers does not block the interpreter's other threads. The
checks and the ctypes call cost tens of microseconds per call in CPython, small beside a collective between
processes; a C extension would save some of that but needs Python's headers at build time and a build per Python
version (or the limited API).

Where the library is looked for, first match wins:
  1. HOCCL_LIBRARY: the path of the library file itself;
  2. HOCCL_BUILD_DIR: a Meson build directory of this repository (tests run from the source tree with
     PYTHONPATH=<src>/python and this variable);
  3. next to the package: inside it, or the folder meson-python puts the project's shared libraries in
     (site-packages/.hoccl.mesonpy.libs, as `pip install .` installs it);
  4. the dynamic loader's search path (a `meson install` into a prefix, or LD_LIBRARY_PATH).
"""

import ctypes
import glob
import os

__all__ = ["lib", "library_path", "build_tree_dirs"]

_NAMES = ("libhoccl.so", "libhoccl.so.0")


def _candidates_in(folder):
    """Files in folder that may be libhoccl, the plainest name first."""
    found = [os.path.join(folder, n) for n in _NAMES if os.path.exists(os.path.join(folder, n))]
    found += sorted(p for p in glob.glob(os.path.join(folder, "libhoccl.so.*")) if p not in found)
    return found


def _locate():
    """Returns (how it was found, path or soname to load)."""
    explicit = os.environ.get("HOCCL_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise ImportError(f"hoccl: HOCCL_LIBRARY={explicit} is not a file; point it at libhoccl.so or unset it")
        return "HOCCL_LIBRARY", explicit
    build = os.environ.get("HOCCL_BUILD_DIR")
    if build:
        found = _candidates_in(build)
        if not found:
            raise ImportError(
                f"hoccl: HOCCL_BUILD_DIR={build} has no libhoccl.so; build it first (ninja -C {build}) or unset "
                "HOCCL_BUILD_DIR")
        return "HOCCL_BUILD_DIR", found[0]
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (here, os.path.join(os.path.dirname(here), ".hoccl.mesonpy.libs")):
        found = _candidates_in(folder)
        if found:
            return "package", found[0]
    return "loader", "libhoccl.so.0"


def _load():
    how, path = _locate()
    try:
        return path, ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        hint = ("install the package with `pip install .` from the repository, or set HOCCL_BUILD_DIR to a build "
                "directory (or HOCCL_LIBRARY to the library file)")
        raise ImportError(f"hoccl: cannot load libhoccl ({path}, found via {how}): {e}; {hint}") from e


library_path, lib = _load()


def build_tree_dirs(subpackage):
    """[<HOCCL_BUILD_DIR>/python/<subpackage>] when that folder exists, else []: where Meson puts the extension modules
    of a subpackage (e.g. "hoccl/torch") in the build tree, for its __path__ when it is imported from the sources."""
    build = os.environ.get("HOCCL_BUILD_DIR")
    folder = os.path.join(build, "python", subpackage) if build else None
    return [folder] if folder and os.path.isdir(folder) else []

_int = ctypes.c_int
_ptr = ctypes.c_void_p
_size = ctypes.c_size_t
_res = ctypes.c_int  # hocclResult_t
_pint = ctypes.POINTER(ctypes.c_int)
_psize = ctypes.POINTER(ctypes.c_size_t)
UNIQUE_ID_BYTES = 128


class UniqueIdStruct(ctypes.Structure):
    """hocclUniqueId: 128 opaque bytes, passed by value."""
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class CountersStruct(ctypes.Structure):
    """hocclCommCounters_t: payload bytes by link class (self, intra-host, intra-switch, inter-switch)."""
    _fields_ = [("bytesSent", ctypes.c_ulonglong * 4), ("bytesReceived", ctypes.c_ulonglong * 4)]


def _declare(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_declare("hocclGetVersion", _res, _pint)
_declare("hocclGetUniqueId", _res, ctypes.POINTER(UniqueIdStruct))
_declare("hocclCommInitRank", _res, ctypes.POINTER(_ptr), _int, UniqueIdStruct, _int)
_declare("hocclCommInitFromEnv", _res, ctypes.POINTER(_ptr), _pint, _pint)
_declare("hocclCommSplit", _res, _ptr, _int, _int, ctypes.POINTER(_ptr), _ptr)
_declare("hocclCommFinalize", _res, _ptr)
_declare("hocclCommDestroy", _res, _ptr)
_declare("hocclCommAbort", _res, _ptr)
_declare("hocclCommGetAsyncError", _res, _ptr, _pint)
_declare("hocclCommCount", _res, _ptr, _pint)
_declare("hocclCommCuDevice", _res, _ptr, _pint)
_declare("hocclCommUserRank", _res, _ptr, _pint)
_declare("hocclRedOpCreatePreMulSum", _res, _pint, _ptr, _int, _int, _ptr)
_declare("hocclRedOpDestroy", _res, _int, _ptr)
_declare("hocclAllReduce", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclBroadcast", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclReduce", _res, _ptr, _ptr, _size, _int, _int, _int, _ptr, _ptr)
_declare("hocclAllGather", _res, _ptr, _ptr, _size, _int, _ptr, _ptr)
_declare("hocclReduceScatter", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclAlltoAll", _res, _ptr, _ptr, _size, _int, _ptr, _ptr)
_declare("hocclGather", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclScatter", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclSend", _res, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclRecv", _res, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclGroupStart", _res)
_declare("hocclGroupEnd", _res)
_declare("hocclCommGetCounters", _res, _ptr, ctypes.POINTER(CountersStruct))
_declare("hocclCommResetCounters", _res, _ptr)
_declare("hocclCommRankLocation", _res, _ptr, _int, _pint, _pint)
_declare("hocclCommPeerTransport", _res, _ptr, _int, ctypes.POINTER(ctypes.c_char_p))
_declare("hocclGetErrorString", ctypes.c_char_p, _int)
_declare("hocclGetLastError", ctypes.c_char_p, _ptr)
_declare("hocclParoStrategyParse", _res, ctypes.c_char_p, ctypes.c_char * 4)
_declare("hocclParoCreate", _res, _ptr, ctypes.c_char_p, _int, ctypes.POINTER(_ptr))
_declare("hocclParoDestroy", _res, _ptr)
_declare("hocclParoGetLayout", _res, _ptr, _pint, _pint, _pint, _pint)
_declare("hocclParoGetComm", _res, _ptr, _int, ctypes.POINTER(_ptr))
_declare("hocclParoPaddedCount", _res, _ptr, _size, _psize)
_declare("hocclParoShardRange", _res, _ptr, _int, _size, _psize, _psize)
for _step in ("hocclParoGatherParams", "hocclParoReduceGrads", "hocclParoSyncGrads", "hocclParoRebuildParams"):
    _declare(_step, _res, _ptr, _ptr, _ptr, _size, _int, _ptr)
_declare("hocclParoPredictBytes", _res, _ptr, _size, _size, _int, ctypes.POINTER(ctypes.c_ulonglong))
_declare("hocclParoGetCounters", _res, _ptr, ctypes.POINTER(CountersStruct))
_declare("hocclParoResetCounters", _res, _ptr)

# Communication hidden behind compute (docs/overlap.md): the callback types and the calls that take them.
BLOCK_CALLBACK = ctypes.CFUNCTYPE(_int, _ptr, _int, _ptr, _size)  # hocclBlockCallback_t
PRODUCE_CALLBACK = ctypes.CFUNCTYPE(_int, _ptr, _int, _ptr, _size)  # hocclProduceCallback_t
_declare("hocclAllGatherOverlap", _res, _ptr, _ptr, _size, _int, _ptr, _ptr, BLOCK_CALLBACK, _ptr)
_declare("hocclReduceScatterOverlap", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr, PRODUCE_CALLBACK, _ptr)
_declare("hocclRingShift", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr)
_declare("hocclRingShiftStart", _res, _ptr, _ptr, _size, _int, _int, _ptr, _ptr, ctypes.POINTER(_ptr))
_declare("hocclTest", _res, _ptr, _pint)
_declare("hocclWait", _res, _ptr)
