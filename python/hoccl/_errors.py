"""HocclError: a failed C call, with the result code and hoccl's own message."""

import ctypes

from hoccl._native import lib

__all__ = ["HocclError", "check"]

_CODE_NAMES = {0: "hocclSuccess", 1: "hocclUnhandledCudaError", 2: "hocclSystemError", 3: "hocclInternalError",
               4: "hocclInvalidArgument", 5: "hocclInvalidUsage", 6: "hocclRemoteError", 7: "hocclInProgress"}


class HocclError(RuntimeError):
    """A hoccl C call failed.

    Attributes: code (the hocclResult_t value), code_name ("hocclInvalidArgument", ...), function (the C function),
    message (hocclGetLastError: what failed, on which rank, with which peer), async_code (hocclCommGetAsyncError of
    the communicator after the failure, None when there was none or it could not be read).
    """

    def __init__(self, function, code, message, async_code=None):
        self.function = function
        self.code = code
        self.code_name = _CODE_NAMES.get(code, f"result {code}")
        self.message = message
        self.async_code = async_code
        text = f"{function} failed: {self.code_name} ({lib.hocclGetErrorString(code).decode(errors='replace')})"
        if message:
            text += f": {message}"
        if async_code not in (None, 0, code):
            text += f" [communicator state: {_CODE_NAMES.get(async_code, async_code)}]"
        super().__init__(text)


def check(function, result, comm=None):
    """Raises HocclError when result is not hocclSuccess; comm (a hocclComm_t or None) gives the async state."""
    if result == 0:
        return
    raw = lib.hocclGetLastError(comm)
    message = raw.decode(errors="replace") if raw else ""
    async_code = None
    if comm:
        state = ctypes.c_int(0)
        if lib.hocclCommGetAsyncError(comm, ctypes.byref(state)) == 0:
            async_code = state.value
    raise HocclError(function, result, message, async_code)
