"""hoccl.Paro: the PaRO group-mapper (include/hoccl/paro.h) over a communicator.

A strategy is three letters for parameters, gradients and optimizer states, each N (replicated), I (sharded within
a group: a host or a switch) or G (sharded over all ranks), or an alias (ddp, zero1, zero2, zero3, mics, hsdp).
The handle splits the communicator into the intra-group, inter-group and (when the strategy needs one) global
communicators; they are exposed as Communicator objects that live as long as the handle.
"""

import ctypes

from hoccl import _native
from hoccl._errors import check

__all__ = ["Paro", "parse_strategy"]

_lib = _native.lib
_LEVELS = {"host": 0, "switch": 1}
_STATES = {"params": 0, "p": 0, "grads": 1, "g": 1, "optim": 2, "os": 2}


def parse_strategy(strategy):
    """The canonical three letters of a strategy name ("zero2" -> "NGG"); ValueError for anything else."""
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a str, not {type(strategy).__name__}")
    out = (ctypes.c_char * 4)()
    result = _lib.hocclParoStrategyParse(strategy.encode(), out)
    if result == 4:  # hocclInvalidArgument: the library's message says why
        raise ValueError(_lib.hocclGetLastError(None).decode(errors="replace"))
    check("hocclParoStrategyParse", result)
    return out.value.decode()


class Paro:
    """A PaRO handle (collective: every rank of comm creates it with the same strategy and level)."""

    def __init__(self, comm, strategy, level="host"):
        if level not in _LEVELS:
            raise ValueError(f"level {level!r}: use 'host' or 'switch'")
        self.strategy = parse_strategy(strategy)
        self._comm = comm  # kept alive: the handle's communicators were split from it
        h = comm._live()
        handle = ctypes.c_void_p()
        check("hocclParoCreate", _lib.hocclParoCreate(h, strategy.encode(), _LEVELS[level], ctypes.byref(handle)), h)
        self._handle = handle.value
        m, g, grp, local = (ctypes.c_int(0) for _ in range(4))
        check("hocclParoGetLayout", _lib.hocclParoGetLayout(self._handle, ctypes.byref(m), ctypes.byref(g),
                                                            ctypes.byref(grp), ctypes.byref(local)))
        self.group_size, self.ngroups, self.group, self.local_index = m.value, g.value, grp.value, local.value
        self.intra = self._get(0)
        self.inter = self._get(1)
        self.global_comm = self._get(2)

    def _get(self, which):
        c = ctypes.c_void_p()
        check("hocclParoGetComm", _lib.hocclParoGetComm(self._handle, which, ctypes.byref(c)))
        # The class of the communicator it was made from (hoccl.Communicator, or a subclass): this module needs no
        # import of communicator.py, which imports this one for Communicator.paro().
        return type(self._comm)._wrap(c.value, owner=self) if c.value else None

    @property
    def closed(self):
        return self._handle is None

    def _live(self):
        if self._handle is None:
            raise ValueError("the PaRO handle is closed")
        return self._handle

    def padded_count(self, count):
        """count rounded up to a multiple of the rank count: the size of a full buffer."""
        out = ctypes.c_size_t(0)
        check("hocclParoPaddedCount", _lib.hocclParoPaddedCount(self._live(), count, ctypes.byref(out)))
        return out.value

    def shard_range(self, state, count):
        """(offset, length) of this rank's shard of state ("params", "grads" or "optim") in the padded buffer."""
        if state not in _STATES:
            raise ValueError(f"state {state!r}: use 'params', 'grads' or 'optim'")
        off, length = ctypes.c_size_t(0), ctypes.c_size_t(0)
        check("hocclParoShardRange", _lib.hocclParoShardRange(self._live(), _STATES[state], count, ctypes.byref(off),
                                                              ctypes.byref(length)))
        return off.value, length.value

    def predict_bytes(self, count, elem_bytes, micro_steps=1):
        """Bytes each rank sends in one training step (what counters() should read after it)."""
        out = ctypes.c_ulonglong(0)
        check("hocclParoPredictBytes",
              _lib.hocclParoPredictBytes(self._live(), count, elem_bytes, micro_steps, ctypes.byref(out)))
        return out.value

    def counters(self):
        """The byte counters summed over the handle's communicators (as Communicator.counters())."""
        c = _native.CountersStruct()
        check("hocclParoGetCounters", _lib.hocclParoGetCounters(self._live(), ctypes.byref(c)))
        return {"sent": list(c.bytesSent), "received": list(c.bytesReceived)}

    def reset_counters(self):
        check("hocclParoResetCounters", _lib.hocclParoResetCounters(self._live()))

    def _step(self, fname, src, src_state, dst, dst_state, count):
        """One training-step call: src and dst must be of the sizes paro.h gives for count."""
        from hoccl._buffers import acquire

        def size_of(state):
            return self.padded_count(count) if state == "full" else self.shard_range(state, count)[1]

        h = self._live()
        s = acquire(src, "input", False)
        try:
            d = acquire(dst, "output", True)
        except BaseException:
            s.release()
            raise
        try:
            if s.dtype != d.dtype:
                raise TypeError(f"{s.what} and {d.what} have different data types")
            for b, state in ((s, src_state), (d, dst_state)):
                need = size_of(state)
                if b.count != need:
                    kind = "the padded full buffer" if state == "full" else f"this rank's {state} shard"
                    raise ValueError(f"{b.what} has {b.count} elements; {fname} with count {count} needs {need} "
                                     f"({kind})")
            check(fname, getattr(_lib, fname)(h, s.address, d.address, count, int(s.dtype), None))
        finally:
            s.release()
            d.release()
        return dst

    def gather_params(self, param_shard, full_params, count):
        """Gathers the full (padded) parameters from this rank's parameter shard."""
        return self._step("hocclParoGatherParams", param_shard, "params", full_params, "full", count)

    def reduce_grads(self, full_grad, grad_shard, count):
        """Reduces this rank's full (padded) gradient into its gradient shard (sum over the group or all ranks)."""
        return self._step("hocclParoReduceGrads", full_grad, "full", grad_shard, "grads", count)

    def sync_grads(self, grad_shard, optim_grad, count):
        """Turns the accumulated gradient shard into the optimizer-state shard of the gradient summed over all
        ranks."""
        return self._step("hocclParoSyncGrads", grad_shard, "grads", optim_grad, "optim", count)

    def rebuild_params(self, optim_params, param_shard, count):
        """Rebuilds this rank's parameter shard from the updated parameters of its optimizer-state shard."""
        return self._step("hocclParoRebuildParams", optim_params, "optim", param_shard, "params", count)

    def close(self):
        """Destroys the handle and its communicators (collective)."""
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        check("hocclParoDestroy", _lib.hocclParoDestroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        pass  # collective: never destroyed from the garbage collector; call close() on every rank

    def __repr__(self):
        return (f"<hoccl.Paro {self.strategy} group {self.group} of {self.ngroups} (size {self.group_size}), "
                f"local index {self.local_index}>")
