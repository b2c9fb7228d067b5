"""The Python side of the overlap calls (docs/overlap.md): block views handed to callbacks, the C trampolines that
call a Python callable and turn its exception into a non-zero return, and the request of a nonblocking ring shift.

Callbacks run on the thread that made the call (the library calls them from inside the C call; ctypes takes the
GIL for them and releases it again when they return, so the library's helper thread keeps the transfers moving
while Python computes).
"""

import ctypes
import threading

from hoccl import _native
from hoccl._errors import HocclError, check
from hoccl.types import DataType

__all__ = ["BlockViews", "Trampoline", "RingShiftRequest", "raise_callback_error"]

_lib = _native.lib
# struct letters of the types memoryview can hold (the others need numpy or torch objects).
_FORMATS = {DataType.INT8: "b", DataType.UINT8: "B", DataType.INT32: "i", DataType.UINT32: "I",
            DataType.INT64: "q", DataType.UINT64: "Q", DataType.FLOAT16: "e", DataType.FLOAT32: "f",
            DataType.FLOAT64: "d"}


def _is_numpy(obj):
    return type(obj).__module__ == "numpy" and hasattr(obj, "reshape") and hasattr(obj, "flags")


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "reshape")


class BlockViews:
    """Views of block i (`count` elements at element i * count) of a borrowed buffer, of the same kind as the object
    the caller passed: a numpy array for a numpy array (read-only when `readonly`), a torch tensor for a torch tensor
    (torch cannot mark it read-only), else a memoryview of the element type (valid during the call only)."""

    def __init__(self, buf, count, readonly):
        self._buf, self._count, self._readonly = buf, count, readonly
        obj = buf.obj
        if _is_numpy(obj) or _is_torch(obj):
            self._flat = obj.reshape(-1)
            self._memory = False
        elif buf.dtype in _FORMATS:
            self._flat = None
            self._memory = True
        else:
            raise TypeError(f"{buf.what}: blocks of {buf.dtype.name.lower()} can be handed to a callback only as "
                            "numpy arrays or torch tensors; pass one of those")

    def address(self, i):
        return self._buf.element(i * self._count)

    def __call__(self, i):
        lo, hi = i * self._count, (i + 1) * self._count
        if not self._memory:
            view = self._flat[lo:hi]
            if self._readonly and _is_numpy(view):
                view = view.view()
                view.flags.writeable = False
            return view
        fmt = _FORMATS[self._buf.dtype]
        nbytes = self._count * self._buf.dtype.itemsize
        if nbytes == 0:
            raw = memoryview(b"" if self._readonly else bytearray())
        else:
            raw = memoryview((ctypes.c_char * nbytes).from_address(self.address(i))).cast("B")
            if self._readonly:
                raw = raw.toreadonly()
        return raw.cast(fmt)


class Trampoline:
    """A C callback (ctype: BLOCK_CALLBACK or PRODUCE_CALLBACK) that calls fn(rank, views(rank)). An exception from
    fn (any BaseException, KeyboardInterrupt too) is kept in .error and the callback returns 1, which stops the
    operation; nothing propagates through the C frames."""

    def __init__(self, ctype, fn, views, what):
        self.error = None
        self._fn, self._views, self._what = fn, views, what
        self.c = ctype(self._call)

    def _call(self, _user, rank, ptr, count):
        try:
            if count and ptr != self._views.address(rank):
                raise RuntimeError(f"hoccl: {self._what} got block {rank} at {ptr:#x}, expected "
                                   f"{self._views.address(rank):#x} (a bug in hoccl)")
            self._fn(rank, self._views(rank))
            return 0
        except BaseException as e:  # noqa: B902 - everything must stop here, never unwind through C
            self.error = e
            return 1


def raise_callback_error(trampoline, function, result, handle):
    """After a call whose callback raised: re-raises the callback's own exception (so `except ValueError` works),
    with a note carrying the library's error (what stopped, which block) and the communicator's state."""
    err = trampoline.error
    trampoline.error = None
    try:
        check(function, result, handle)
        note = f"hoccl: {function} returned success although the callback raised"
    except HocclError as lib_error:
        note = (f"hoccl: raised inside the callback of {function}; the operation stopped and the communicator is "
                f"broken (close it with abort()). Library: {lib_error}")
    err.add_note(note)
    raise err


class RingShiftRequest:
    """A ring shift in flight (Communicator.ring_shift_start). wait() finishes it and returns the receive buffer;
    test() says whether it has finished. Until wait() the send buffer must not be written, the receive buffer not
    touched and the communicator not used (except abort()). Used as a context manager it waits on exit; dropped
    without wait() it waits when it is garbage collected."""

    def __init__(self, comm, handle, request, buffers, result):
        self._comm = comm  # kept alive (and busy) until wait()
        self._handle = handle
        self._request = request
        self._buffers = buffers
        self._result = result
        self._lock = threading.Lock()

    @property
    def pending(self):
        """True until wait() has run."""
        return self._request is not None

    def test(self):
        """True once the transfer has finished (successfully or not: wait() says which)."""
        with self._lock:
            if self._request is None:
                return True
            done = ctypes.c_int(0)
            check("hocclTest", _lib.hocclTest(self._request, ctypes.byref(done)))
            return bool(done.value)

    def wait(self):
        """Waits for the shift (the GIL is released meanwhile), frees the request and returns the receive buffer;
        raises HocclError when the shift failed. A second wait() returns at once."""
        with self._lock:
            if self._request is None:
                return self._result
            request, self._request = self._request, None
            try:
                result = _lib.hocclWait(request)
            finally:
                for b in self._buffers:
                    b.release()
                self._buffers = []
            check("hocclWait", result, self._handle)
            return self._result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.wait()

    def __del__(self):
        if getattr(self, "_request", None) is not None:
            try:
                self.wait()
            except Exception:  # nowhere to report it from a finalizer
                pass

    def __repr__(self):
        return f"<hoccl.RingShiftRequest {'pending' if self.pending else 'finished'}>"
