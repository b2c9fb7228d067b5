"""Borrows the memory of a Python object for one hoccl call: the buffer protocol (numpy arrays, bytearray,
array.array, memoryview), DLPack (`__dlpack__`: torch tensors, and the types numpy lacks: bfloat16, fp8) or
`__array_interface__`, in that order.

Every check that can be made locally is made here, before any C call: the object is a contiguous (C order) host
buffer of a data type hoccl has, an output is writable. A Buffer holds the export (Py_buffer, DLPack capsule or the
object) until release(), so the memory stays valid while the C call (or the group it belongs to) uses it.
"""

import ctypes
import math
import sys

from hoccl.types import DataType

__all__ = ["Buffer", "acquire", "SUPPORTED"]

SUPPORTED = ("int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, and through DLPack (torch) "
             "bfloat16, float8_e4m3fn, float8_e5m2")


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (stable layout since Python 3.0)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)), ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


_api = ctypes.pythonapi
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_api.PyObject_GetBuffer.restype = ctypes.c_int
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_api.PyBuffer_Release.restype = None
_api.PyBuffer_IsContiguous.argtypes = [ctypes.POINTER(_PyBuffer), ctypes.c_char]
_api.PyBuffer_IsContiguous.restype = ctypes.c_int
_api.PyObject_CheckBuffer.argtypes = [ctypes.py_object]
_api.PyObject_CheckBuffer.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyBUF_RECORDS_RO = 0x1C  # PyBUF_STRIDES | PyBUF_FORMAT: any layout, with its format; contiguity checked here


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version_major", ctypes.c_uint32), ("version_minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", _DLTensor)]


_DL_READ_ONLY = 1
_DL_HOST_DEVICES = {1: "cpu", 3: "cuda pinned host memory"}  # kDLCPU, kDLCUDAHost
_DL_DEVICE_NAMES = {2: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm", 13: "cuda managed",
                    14: "oneapi", 17: "maia"}
# (DLDataTypeCode, bits) -> hoccl type. Codes: 0 int, 1 uint, 2 float, 4 bfloat, 10 float8_e4m3fn, 12 float8_e5m2.
_DL_TYPES = {(0, 8): DataType.INT8, (0, 32): DataType.INT32, (0, 64): DataType.INT64, (1, 8): DataType.UINT8,
             (1, 32): DataType.UINT32, (1, 64): DataType.UINT64, (2, 16): DataType.FLOAT16,
             (2, 32): DataType.FLOAT32, (2, 64): DataType.FLOAT64, (4, 16): DataType.BFLOAT16,
             (10, 8): DataType.FLOAT8_E4M3, (12, 8): DataType.FLOAT8_E5M2}
_DL_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat", 5: "complex", 6: "bool"}
# Buffer-protocol format letters (struct module) by signedness; the size comes from the itemsize.
_SIGNED = "bhilqn"
_UNSIGNED = "BHILQN"
_INTS = {(True, 1): DataType.INT8, (True, 4): DataType.INT32, (True, 8): DataType.INT64,
         (False, 1): DataType.UINT8, (False, 4): DataType.UINT32, (False, 8): DataType.UINT64}
_FLOATS = {"e": DataType.FLOAT16, "f": DataType.FLOAT32, "d": DataType.FLOAT64}
_NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"


def _type_name(obj):
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"


class Buffer:
    """A contiguous host buffer of one hoccl data type, borrowed from `obj` until release()."""

    __slots__ = ("obj", "address", "count", "dtype", "readonly", "_role", "_shape", "_hold", "_view")

    def __init__(self, obj, address, count, dtype, readonly, role, shape, hold=None, view=None):
        self.obj = obj
        self.address = address or 0
        self.count = count
        self.dtype = dtype
        self.readonly = readonly
        self._role = role
        self._shape = shape
        self._hold = hold
        self._view = view

    @property
    def what(self):
        """The buffer in messages: "send (numpy.ndarray float32 shape (4,))"."""
        return f"{self._role} ({_type_name(self.obj)} {self.dtype.name.lower()} shape {self._shape})"

    @property
    def nbytes(self):
        return self.count * self.dtype.itemsize

    def element(self, index):
        """The address of element `index`."""
        return self.address + index * self.dtype.itemsize

    def release(self):
        if self._view is not None:
            _api.PyBuffer_Release(ctypes.byref(self._view))
            self._view = None
        self._hold = None  # a DLPack capsule: dropping it runs the producer's deleter

    def __del__(self):
        self.release()


_NO_TYPE = object()
_format_types = {}  # (format bytes, itemsize) -> DataType, or the error text for a format hoccl cannot take


def _format_type(raw_fmt, itemsize):
    """The hoccl type of a buffer-protocol format (cached), or a str saying why there is none."""
    key = (raw_fmt, itemsize)
    found = _format_types.get(key, _NO_TYPE)
    if found is not _NO_TYPE:
        return found
    fmt = (raw_fmt or b"B").decode("ascii", "replace")
    order, letter = (fmt[0], fmt[1:]) if fmt[:1] in ("@", "=", "<", ">", "!") else ("@", fmt)
    dtype = None
    if order in "<>!" and order != _NATIVE_ORDER and not (order == "!" and _NATIVE_ORDER == ">"):
        dtype = (f"format {fmt!r} is not in the machine's byte order; convert it first "
                 "(e.g. numpy: x.astype(x.dtype.newbyteorder('=')))")
    elif len(letter) == 1:
        if letter in _FLOATS:
            dtype = _FLOATS[letter]
        elif letter in _SIGNED or letter in _UNSIGNED:
            dtype = _INTS.get((letter in _SIGNED, itemsize))
    if dtype is None or (not isinstance(dtype, str) and dtype.itemsize != itemsize):
        dtype = f"hoccl has no data type for format {fmt!r} ({itemsize} bytes per element); it has {SUPPORTED}"
    _format_types[key] = dtype
    return dtype


def _from_buffer_protocol(obj, role):
    view = _PyBuffer()
    try:
        _api.PyObject_GetBuffer(obj, ctypes.byref(view), _PyBUF_RECORDS_RO)
    except BufferError as e:
        raise ValueError(f"{role}: {_type_name(obj)} cannot export its memory: {e}") from None
    shape = tuple(view.shape[:view.ndim]) if view.shape else (view.len // max(view.itemsize, 1),)
    dtype = _format_type(view.format, view.itemsize)
    if isinstance(dtype, str):
        _api.PyBuffer_Release(ctypes.byref(view))
        raise TypeError(f"{role} ({_type_name(obj)} shape {shape}): {dtype}")
    # From here the Buffer owns the export: release() (or its garbage collection) gives it back once.
    buf = Buffer(obj, view.buf, view.len // view.itemsize, dtype, bool(view.readonly), role, shape, view=view)
    if view.ndim == 1:  # the common case, without a call into the C API
        contiguous = not view.strides or view.strides[0] == view.itemsize or view.len <= view.itemsize
    else:
        contiguous = view.ndim == 0 or bool(_api.PyBuffer_IsContiguous(ctypes.byref(view), b"C"))
    if not contiguous:
        what = buf.what
        buf.release()
        raise ValueError(f"{what} is not contiguous; pass a contiguous copy (numpy.ascontiguousarray(x))")
    return buf


def _c_contiguous(shape, strides_elems):
    if 0 in shape:
        return True  # empty: no element to place
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides_elems)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _from_dlpack(obj, role):
    kind = _type_name(obj)
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) not in _DL_HOST_DEVICES:
            name = _DL_DEVICE_NAMES.get(int(dev_type), f"DLPack device type {int(dev_type)}")
            raise ValueError(f"{role} ({kind}) lives on {name}:{dev_id}; the hoccl package serves host memory: "
                             "copy it to the CPU first (torch: x.cpu()), or use hoccl.torch for device tensors")
    try:
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__()
    except (BufferError, RuntimeError) as e:
        raise ValueError(f"{role} ({kind}) cannot export its memory through DLPack: {e}") from None
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(_api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"))
        readonly = bool(managed.flags & _DL_READ_ONLY)
    elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
        managed = _DLManagedTensor.from_address(_api.PyCapsule_GetPointer(capsule, b"dltensor"))
        readonly = False  # the unversioned protocol cannot say; its producers export writable memory only
    else:
        raise ValueError(f"{role} ({kind}): __dlpack__ returned {capsule!r}, not a DLPack capsule")
    t = managed.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    tname = f"{_DL_CODE_NAMES.get(code, f'code {code}')}{bits}" + (f"x{lanes}" if lanes != 1 else "")
    what = f"{role} ({kind} {tname} shape {shape})"
    dtype = _DL_TYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise TypeError(f"{what}: hoccl has no data type for DLPack {tname}; it has {SUPPORTED}")
    if t.device.device_type not in _DL_HOST_DEVICES:
        raise ValueError(f"{what} is not in host memory; the hoccl package serves host memory")
    if t.strides and not _c_contiguous(shape, [t.strides[i] for i in range(t.ndim)]):
        raise ValueError(f"{what} is not contiguous; pass a contiguous copy (torch: x.contiguous())")
    count = math.prod(shape)
    address = (t.data or 0) + t.byte_offset
    return Buffer(obj, address, count, dtype, readonly, role, shape, hold=capsule)


def _from_array_interface(obj, role):
    ai = obj.__array_interface__
    kind = _type_name(obj)
    typestr, shape = ai["typestr"], tuple(ai["shape"])
    what = f"{role} ({kind} typestr {typestr!r} shape {shape})"
    data = ai.get("data")
    if not isinstance(data, tuple):
        raise ValueError(f"{what}: __array_interface__ without a (pointer, read-only) data tuple is not supported")
    order, letter, size = typestr[0], typestr[1], int(typestr[2:] or 0)
    if order not in "|" + _NATIVE_ORDER:
        raise TypeError(f"{what} is not in the machine's byte order")
    dtype = {"i": _INTS.get((True, size)), "u": _INTS.get((False, size)),
             "f": {2: DataType.FLOAT16, 4: DataType.FLOAT32, 8: DataType.FLOAT64}.get(size)}.get(letter)
    if dtype is None:
        raise TypeError(f"{what}: hoccl has no data type for {typestr!r}; it has {SUPPORTED}")
    strides = ai.get("strides")
    if strides is not None and (any(s % size for s in strides) or
                                not _c_contiguous(shape, [s // size for s in strides])):
        raise ValueError(f"{what} is not contiguous; pass a contiguous copy")
    return Buffer(obj, data[0], math.prod(shape), dtype, bool(data[1]), role, shape, hold=obj)


def acquire(obj, role, writable=False):
    """Borrows obj's memory as a Buffer; role names it in messages ("send", "recv", ...). Raises TypeError or
    ValueError (nothing is borrowed then) when obj is not a contiguous host buffer of a hoccl type, or when
    writable is set and it is read-only."""
    if obj is None:
        raise TypeError(f"{role}: a buffer is needed here, got None")
    if _api.PyObject_CheckBuffer(obj):
        buf = _from_buffer_protocol(obj, role)
    elif hasattr(obj, "__dlpack__"):
        buf = _from_dlpack(obj, role)
    elif hasattr(obj, "__array_interface__"):
        buf = _from_array_interface(obj, role)
    else:
        raise TypeError(f"{role}: {_type_name(obj)} is not a buffer: pass an object with the buffer protocol "
                        "(numpy array, bytearray, array.array), __dlpack__ (torch tensor) or __array_interface__")
    if writable and buf.readonly:
        what = buf.what
        buf.release()
        raise ValueError(f"{what} is read-only; hoccl writes the result there: pass a writable buffer")
    return buf
