"""hoccl.Communicator: a hoccl communicator and its collectives on host buffers.

Every collective checks its buffers first (data types, contiguity, writable outputs, the sizes the collective needs
between this rank's send and receive buffers, overlaps that are not the in-place layout, root and peer ranges) and
raises TypeError or ValueError before any C call, changing nothing; what only the ranks together can see (sizes that
differ between ranks, a dead peer, a timeout) is raised by the library as HocclError with its message.

In place: all_reduce, broadcast, reduce and all_to_all leave out `recv`; all_gather leaves out `send` (the input is
this rank's block of `recv`), reduce_scatter leaves out `recv` (the result is this rank's block of `send`), gather
on the root leaves out `send` and scatter on the root leaves out `recv`. Views at those positions (as NCCL defines
in-place calls) work too. Calls on host buffers complete before they return; the GIL is released meanwhile.

Overlap (docs/overlap.md): all_gather_overlap and reduce_scatter_overlap call a Python callable per block while the
next transfer is in flight; ring_shift and ring_shift_start (a RingShiftRequest to wait on) send to rank + k.
"""

import ctypes
import threading
from contextlib import contextmanager

from hoccl import _native
from hoccl._buffers import acquire
from hoccl._overlap import BlockViews, RingShiftRequest, Trampoline, raise_callback_error
from hoccl._errors import check
from hoccl.types import SPLIT_NOCOLOR, PreMulSum, ReduceOp, encode_scalar, parse_op

__all__ = ["Communicator", "get_unique_id", "group", "version"]

_lib = _native.lib
_UID_BYTES = _native.UNIQUE_ID_BYTES


def version():
    """The library's version code (MAJOR*10000 + MINOR*100 + PATCH)."""
    v = ctypes.c_int(0)
    check("hocclGetVersion", _lib.hocclGetVersion(ctypes.byref(v)))
    return v.value


def get_unique_id():
    """Creates the job's unique id (on one rank, which then serves the bootstrap; pass the bytes to every rank)."""
    uid = _native.UniqueIdStruct()
    check("hocclGetUniqueId", _lib.hocclGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), _UID_BYTES)


def _uid_struct(uid):
    if not isinstance(uid, (bytes, bytearray, memoryview)):
        raise TypeError(f"unique id: {type(uid).__name__}; pass the bytes of hoccl.get_unique_id()")
    raw = bytes(uid)
    if len(raw) != _UID_BYTES:
        raise ValueError(f"unique id: {len(raw)} bytes; it must be the {_UID_BYTES} bytes of hoccl.get_unique_id()")
    s = _native.UniqueIdStruct()
    ctypes.memmove(ctypes.addressof(s), raw, _UID_BYTES)
    return s


class _GroupState(threading.local):
    """Per thread (as hocclGroupStart is): the open group's depth and what must outlive its hocclGroupEnd."""

    def __init__(self):
        self.depth = 0
        self.buffers = []
        self.ops = []  # (op, comm handle) of PreMulSum ops to destroy after the group


_group = _GroupState()


@contextmanager
def group():
    """Runs the collectives and point-to-point calls made inside the `with` block together (hocclGroupStart /
    hocclGroupEnd): send/recv pairs then never deadlock, whatever their order. The buffers stay borrowed until the
    group ends, and the results are there after the block."""
    check("hocclGroupStart", _lib.hocclGroupStart())
    _group.depth += 1
    try:
        yield
    finally:
        _group.depth -= 1
        result = _lib.hocclGroupEnd()
        if _group.depth == 0:
            _finish_deferred()
        check("hocclGroupEnd", result)


def _finish_deferred():
    buffers, ops = _group.buffers, _group.ops
    _group.buffers, _group.ops = [], []
    for b in buffers:
        b.release()
    for op, handle in ops:
        _lib.hocclRedOpDestroy(op, handle)


def _as_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


class Communicator:
    """A hoccl communicator (hocclComm_t).

    Create it with Communicator(nranks, uid, rank) (uid from hoccl.get_unique_id() on one rank), or
    Communicator.from_env() under hoccl-run, mpirun, srun or another launcher hoccl knows. Close it with close() (or
    use it as a context manager); split() and paro() make more communicators from it.
    """

    def __init__(self, nranks, uid, rank):
        nranks = _as_int(nranks, "nranks")
        rank = _as_int(rank, "rank")
        if nranks < 1:
            raise ValueError(f"nranks is {nranks}; it must be at least 1")
        if not 0 <= rank < nranks:
            raise ValueError(f"rank {rank} is outside 0..{nranks - 1}")
        s = _uid_struct(uid)
        handle = ctypes.c_void_p()
        check("hocclCommInitRank", _lib.hocclCommInitRank(ctypes.byref(handle), nranks, s, rank))
        self._adopt(handle.value, owner=None)

    @classmethod
    def from_env(cls):
        """The communicator of the job the launcher started (hocclCommInitFromEnv: HOCCL_RANK/HOCCL_WORLD_SIZE with
        HOCCL_COMM_ID and HOCCL_AUTH_TOKEN, as hoccl-run sets them, or the launcher variables the library reads)."""
        handle = ctypes.c_void_p()
        rank, nranks = ctypes.c_int(-1), ctypes.c_int(0)
        check("hocclCommInitFromEnv",
              _lib.hocclCommInitFromEnv(ctypes.byref(handle), ctypes.byref(rank), ctypes.byref(nranks)))
        return cls._wrap(handle.value, owner=None)

    @classmethod
    def _wrap(cls, handle, owner):
        self = cls.__new__(cls)
        self._adopt(handle, owner)
        return self

    def _adopt(self, handle, owner):
        # owner: None when this object destroys the handle; else the object that owns it (a Paro).
        self._handle = handle
        self._owner = owner
        r, n = ctypes.c_int(-1), ctypes.c_int(0)
        check("hocclCommUserRank", _lib.hocclCommUserRank(handle, ctypes.byref(r)), handle)
        check("hocclCommCount", _lib.hocclCommCount(handle, ctypes.byref(n)), handle)
        self._rank, self._size = r.value, n.value

    # ----- life cycle and queries -----

    @property
    def rank(self):
        """This process's rank in the communicator."""
        return self._rank

    @property
    def size(self):
        """The number of ranks."""
        return self._size

    nranks = size

    @property
    def closed(self):
        return self._handle is None

    @property
    def handle(self):
        """The hocclComm_t as an int (for other bindings of the same libhoccl, e.g. hoccl.torch)."""
        return self._live()

    def _live(self):
        if self._handle is None:
            raise ValueError("the communicator is closed")
        if self._owner is not None and self._owner.closed:
            raise ValueError("the communicator belonged to a PaRO handle that is closed")
        return self._handle

    @property
    def device(self):
        """The ordinal of the process's device, -1 when it has none."""
        d = ctypes.c_int(-1)
        h = self._live()
        check("hocclCommCuDevice", _lib.hocclCommCuDevice(h, ctypes.byref(d)), h)
        return d.value

    def async_error(self):
        """hocclCommGetAsyncError: 0 while healthy, else the result code of the failure."""
        state = ctypes.c_int(0)
        h = self._live()
        check("hocclCommGetAsyncError", _lib.hocclCommGetAsyncError(h, ctypes.byref(state)), h)
        return state.value

    def peer_transport(self, peer):
        """The transport that carries traffic to peer ("shm", "tcp", "ucx", ...; "self" for this rank)."""
        name = ctypes.c_char_p()
        h = self._live()
        check("hocclCommPeerTransport", _lib.hocclCommPeerTransport(h, _as_int(peer, "peer"), ctypes.byref(name)), h)
        return name.value.decode()

    def rank_location(self, rank):
        """(host index, switch index) of rank."""
        host, switch = ctypes.c_int(-1), ctypes.c_int(-1)
        h = self._live()
        check("hocclCommRankLocation",
              _lib.hocclCommRankLocation(h, _as_int(rank, "rank"), ctypes.byref(host), ctypes.byref(switch)), h)
        return host.value, switch.value

    def counters(self):
        """Payload bytes moved since creation or reset_counters(): {"sent": [...], "received": [...]}, each indexed by
        link class (0 self, 1 intra-host, 2 intra-switch, 3 inter-switch)."""
        c = _native.CountersStruct()
        h = self._live()
        check("hocclCommGetCounters", _lib.hocclCommGetCounters(h, ctypes.byref(c)), h)
        return {"sent": list(c.bytesSent), "received": list(c.bytesReceived)}

    def reset_counters(self):
        h = self._live()
        check("hocclCommResetCounters", _lib.hocclCommResetCounters(h), h)

    def finalize(self):
        """Waits until every operation of the communicator has completed on every rank (collective)."""
        h = self._live()
        check("hocclCommFinalize", _lib.hocclCommFinalize(h), h)

    def close(self):
        """Frees the communicator (hocclCommDestroy). Communicators of a PaRO handle are freed with the handle."""
        if self._handle is None or self._owner is not None:
            self._handle = None
            return
        h, self._handle = self._handle, None
        check("hocclCommDestroy", _lib.hocclCommDestroy(h))

    def abort(self):
        """Stops every operation of the communicator and frees it (hocclCommAbort; safe from another thread)."""
        if self._handle is None or self._owner is not None:
            self._handle = None
            return
        h, self._handle = self._handle, None
        check("hocclCommAbort", _lib.hocclCommAbort(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and getattr(self, "_owner", 1) is None:
            try:
                _lib.hocclCommDestroy(self._handle)
            except Exception:  # interpreter shutdown
                pass
            self._handle = None

    def __repr__(self):
        state = "closed" if self._handle is None else f"rank {self._rank} of {self._size}"
        return f"<hoccl.Communicator {state}>"

    def split(self, color, key=None):
        """hocclCommSplit (collective): ranks with the same color form a new communicator ordered by key (default:
        this rank), then old rank. color None or hoccl.SPLIT_NOCOLOR leaves this rank out: it gets None."""
        color = SPLIT_NOCOLOR if color is None else _as_int(color, "color")
        if color < 0 and color != SPLIT_NOCOLOR:
            raise ValueError(f"color {color} is negative; use a color >= 0, or None to leave this rank out")
        key = self._rank if key is None else _as_int(key, "key")
        h = self._live()
        new = ctypes.c_void_p()
        check("hocclCommSplit", _lib.hocclCommSplit(h, color, key, ctypes.byref(new), None), h)
        return Communicator._wrap(new.value, owner=None) if new.value else None

    def paro(self, strategy, level="host"):
        """A PaRO group-mapper handle over this communicator (collective; see hoccl.Paro)."""
        from hoccl.paro import Paro
        return Paro(self, strategy, level)

    # ----- the calls -----

    def _run(self, fname, buffers, build_args, op=None, dtype=None):
        """Calls fname(*build_args(op_value)) with the buffers borrowed; inside a group they stay borrowed (and a
        PreMulSum op alive) until the group ends."""
        op_value, created, h = 0, False, None
        try:
            h = self._live()
            if isinstance(op, PreMulSum):
                op_value, created = self._create_premul(op, dtype, h), True
            elif op is not None:
                op_value = int(op)
            result = getattr(_lib, fname)(*build_args(op_value), h, None)
        except BaseException:
            for b in buffers:
                b.release()
            if created:
                _lib.hocclRedOpDestroy(op_value, h)
            raise
        if _group.depth > 0:
            _group.buffers.extend(buffers)
            if created:
                _group.ops.append((op_value, h))
        else:
            for b in buffers:
                b.release()
            if created:
                _lib.hocclRedOpDestroy(op_value, h)
        check(fname, result, h)

    def _create_premul(self, op, dtype, h):
        raw = encode_scalar(op.scalar, dtype)
        value = ctypes.create_string_buffer(raw, len(raw))
        out = ctypes.c_int(0)
        check("hocclRedOpCreatePreMulSum",
              _lib.hocclRedOpCreatePreMulSum(ctypes.byref(out), value, int(dtype), 1, h), h)  # 1: host immediate
        return out.value

    # ----- argument checks shared by the collectives -----

    def _root(self, root):
        root = _as_int(root, "root")
        if not 0 <= root < self._size:
            raise ValueError(f"root {root} is outside 0..{self._size - 1} (communicator of {self._size} ranks)")
        return root

    def _peer(self, peer):
        peer = _as_int(peer, "peer")
        if not 0 <= peer < self._size:
            raise ValueError(f"peer {peer} is outside 0..{self._size - 1} (communicator of {self._size} ranks)")
        return peer

    def _blocks(self, buf, what):
        if buf.count % self._size:
            raise ValueError(f"{buf.what}: {buf.count} elements do not split into {self._size} equal blocks "
                             f"(one per rank) for {what}")
        return buf.count // self._size

    @staticmethod
    def _same_type(a, b):
        if a.dtype != b.dtype:
            raise TypeError(f"{a.what} is {a.dtype.name.lower()} but {b.what} is {b.dtype.name.lower()}; both must "
                            "have the same data type")

    @staticmethod
    def _count_is(buf, count, why):
        if buf.count != count:
            raise ValueError(f"{buf.what} has {buf.count} elements; {why} needs {count}")

    @staticmethod
    def _no_stray_overlap(send, recv, send_at, recv_at, nbytes_send, nbytes_recv, in_place):
        """Refuses send and recv ranges that overlap unless the call is in place as the C API defines it."""
        if in_place or not nbytes_send or not nbytes_recv:
            return
        if send_at < recv_at + nbytes_recv and recv_at < send_at + nbytes_send:
            raise ValueError(f"{send.what} and {recv.what} overlap but the call is not in place; use separate buffers, "
                             "or the in-place form (see help(hoccl.Communicator))")

    def _acquire_all(self, specs):
        """Borrows every (object, role, writable) in order; on a failure releases those already borrowed."""
        got = []
        try:
            for obj, role, writable in specs:
                got.append(acquire(obj, role, writable))
        except BaseException:
            for b in got:
                b.release()
            raise
        return got

    def _checked(self, specs, check_fn):
        """Borrows the buffers and runs check_fn(*buffers) (which raises on bad input), releasing on failure."""
        bufs = self._acquire_all(specs)
        try:
            return bufs, check_fn(*bufs)
        except BaseException:
            for b in bufs:
                b.release()
            raise

    # ----- collectives -----

    def all_reduce(self, send, recv=None, op=ReduceOp.SUM):
        """Reduces send over all ranks into recv (in place into send when recv is None); returns the output."""
        op = parse_op(op)
        in_place = recv is None or recv is send
        specs = [(send, "send", in_place)] + ([] if in_place else [(recv, "recv", True)])

        def verify(s, r=None):
            r = s if r is None else r
            self._same_type(s, r)
            self._count_is(r, s.count, "all_reduce of the send buffer")
            self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == r.address)
            return r

        bufs, r = self._checked(specs, verify)
        s = bufs[0]
        self._run("hocclAllReduce", bufs, lambda o: (s.address, r.address, s.count, int(s.dtype), o), op, s.dtype)
        return send if in_place else recv

    def broadcast(self, send, recv=None, root=0):
        """Copies root's send into recv on every rank. In place (recv None): send is the buffer on every rank.
        Out of place, send is read on the root only (other ranks may pass None)."""
        root = self._root(root)
        in_place = recv is None
        if in_place:
            bufs, _ = self._checked([(send, "buffer", True)], lambda b: None)
            s = r = bufs[0]
        else:
            is_root = self._rank == root
            specs = [(recv, "recv", True)] + ([(send, "send", False)] if is_root else [])

            def verify(r, s=None):
                if s is not None:
                    self._same_type(s, r)
                    self._count_is(s, r.count, "broadcast into the recv buffer")
                    self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == r.address)

            bufs, _ = self._checked(specs, verify)
            r, s = bufs[0], (bufs[1] if is_root else None)
        send_at = s.address if s is not None else None
        self._run("hocclBroadcast", bufs, lambda o: (send_at, r.address, r.count, int(r.dtype), root))
        return send if in_place else recv

    def reduce(self, send, recv=None, op=ReduceOp.SUM, root=0):
        """Reduces send over all ranks into root's recv (in place into root's send when recv is None); recv is not
        used on the other ranks. Returns the output (None on other ranks)."""
        op = parse_op(op)
        root = self._root(root)
        is_root = self._rank == root
        in_place = recv is None or recv is send
        specs = [(send, "send", in_place and is_root)]
        if is_root and not in_place:
            specs.append((recv, "recv", True))

        def verify(s, r=None):
            if r is not None:
                self._same_type(s, r)
                self._count_is(r, s.count, "reduce of the send buffer")
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == r.address)

        bufs, _ = self._checked(specs, verify)
        s = bufs[0]
        recv_at = (s.address if in_place else bufs[1].address) if is_root else None
        self._run("hocclReduce", bufs, lambda o: (s.address, recv_at, s.count, int(s.dtype), o, root), op, s.dtype)
        if not is_root:
            return None
        return send if in_place else recv

    def all_gather(self, send, recv):
        """Gathers every rank's send into recv (rank r's at block r) on every rank. send None: in place, this rank's
        input is its block of recv. Returns recv."""
        if send is None:
            bufs, count = self._checked([(recv, "recv", True)], lambda r: self._blocks(r, "all_gather"))
            r = bufs[0]
            send_at = r.element(self._rank * count)
        else:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(r, s.count * self._size, f"all_gather of {s.count} elements on {self._size} ranks")
                at = r.element(self._rank * s.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == at)
                return s.count

            bufs, count = self._checked([(send, "send", False), (recv, "recv", True)], verify)
            r = bufs[1]
            send_at = bufs[0].address
        self._run("hocclAllGather", bufs, lambda o: (send_at, r.address, count, int(r.dtype)))
        return recv

    def reduce_scatter(self, send, recv=None, op=ReduceOp.SUM):
        """Reduces send (size ranks x n) over all ranks; rank r gets block r in recv (n elements). recv None: in
        place, the result is this rank's block of send. Returns the output (send in place)."""
        op = parse_op(op)
        if recv is None:
            bufs, count = self._checked([(send, "send", True)], lambda s: self._blocks(s, "reduce_scatter"))
            s = bufs[0]
            recv_at = s.element(self._rank * count)
        else:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(s, r.count * self._size,
                               f"reduce_scatter into {r.count} elements per rank on {self._size} ranks")
                at = s.element(self._rank * r.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, r.address == at)
                return r.count

            bufs, count = self._checked([(send, "send", False), (recv, "recv", True)], verify)
            s = bufs[0]
            recv_at = bufs[1].address
        self._run("hocclReduceScatter", bufs, lambda o: (s.address, recv_at, count, int(s.dtype), o), op, s.dtype)
        return send if recv is None else recv

    def all_to_all(self, send, recv=None):
        """Sends block j of send to rank j and receives rank j's block into block j of recv (in place into send
        when recv is None). Returns the output."""
        in_place = recv is None or recv is send
        specs = [(send, "send", in_place)] + ([] if in_place else [(recv, "recv", True)])

        def verify(s, r=None):
            r = s if r is None else r
            self._same_type(s, r)
            count = self._blocks(s, "all_to_all")
            self._count_is(r, s.count, "all_to_all of the send buffer")
            self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == r.address)
            return count

        bufs, count = self._checked(specs, verify)
        s, r = bufs[0], bufs[-1]
        self._run("hocclAlltoAll", bufs, lambda o: (s.address, r.address, count, int(s.dtype)))
        return send if in_place else recv

    def gather(self, send, recv=None, root=0):
        """Gathers every rank's send into root's recv (rank r's at block r); recv is not used on other ranks. On the
        root, send None is in place (its input is its block of recv). Returns recv on the root, None elsewhere."""
        root = self._root(root)
        is_root = self._rank == root
        if is_root and send is None:
            bufs, count = self._checked([(recv, "recv", True)], lambda r: self._blocks(r, "gather"))
            send_at, recv_at, dtype = bufs[0].element(root * count), bufs[0].address, bufs[0].dtype
        elif is_root:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(r, s.count * self._size, f"gather of {s.count} elements from {self._size} ranks")
                at = r.element(root * s.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == at)
                return s.count

            bufs, count = self._checked([(send, "send", False), (recv, "recv", True)], verify)
            send_at, recv_at, dtype = bufs[0].address, bufs[1].address, bufs[0].dtype
        else:
            bufs, _ = self._checked([(send, "send", False)], lambda s: None)
            count, send_at, recv_at, dtype = bufs[0].count, bufs[0].address, None, bufs[0].dtype
        self._run("hocclGather", bufs, lambda o: (send_at, recv_at, count, int(dtype), root))
        return recv if is_root else None

    def scatter(self, send, recv=None, root=0):
        """Sends block r of root's send to rank r's recv; send is not used on other ranks. On the root, recv None is
        in place (its block of send). Returns the output (root's send in place)."""
        root = self._root(root)
        is_root = self._rank == root
        if is_root and recv is None:
            bufs, count = self._checked([(send, "send", True)], lambda s: self._blocks(s, "scatter"))
            send_at, recv_at, dtype = bufs[0].address, bufs[0].element(root * count), bufs[0].dtype
        elif is_root:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(s, r.count * self._size, f"scatter of {r.count} elements to {self._size} ranks")
                at = s.element(root * r.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, r.address == at)
                return r.count

            bufs, count = self._checked([(send, "send", False), (recv, "recv", True)], verify)
            send_at, recv_at, dtype = bufs[0].address, bufs[1].address, bufs[0].dtype
        else:
            bufs, _ = self._checked([(recv, "recv", True)], lambda r: None)
            count, send_at, recv_at, dtype = bufs[0].count, None, bufs[0].address, bufs[0].dtype
        self._run("hocclScatter", bufs, lambda o: (send_at, recv_at, count, int(dtype), root))
        return send if (is_root and recv is None) else recv

    def send(self, buf, peer):
        """Sends buf to peer (matched with the peer's recv in call order; inside hoccl.group() with its pairs)."""
        peer = self._peer(peer)
        bufs, _ = self._checked([(buf, "send", False)], lambda b: None)
        b = bufs[0]
        self._run("hocclSend", bufs, lambda o: (b.address, b.count, int(b.dtype), peer))

    def recv(self, buf, peer):
        """Receives into buf from peer; returns buf."""
        peer = self._peer(peer)
        bufs, _ = self._checked([(buf, "recv", True)], lambda b: None)
        b = bufs[0]
        self._run("hocclRecv", bufs, lambda o: (b.address, b.count, int(b.dtype), peer))
        return buf

    def barrier(self):
        """Returns once every rank has called it (an all-reduce of one int32: the C API has no barrier)."""
        token = bytearray(4)
        self.all_reduce(memoryview(token).cast("i"))

    # ----- communication hidden behind compute (docs/overlap.md) -----

    def _run_overlap(self, fname, bufs, args, trampoline=None, op=None, dtype=None, request=None):
        """Calls fname(*args, [op,] comm, NULL stream, [callback, NULL user | request]) with the buffers borrowed
        and released after it (these calls cannot be part of a group: the library refuses them there). Raises the
        callback's own exception when it raised, else HocclError on failure."""
        op_value, created, h, result = 0, False, None, None
        try:
            h = self._live()
            if isinstance(op, PreMulSum):
                op_value, created = self._create_premul(op, dtype, h), True
            elif op is not None:
                op_value = int(op)
            tail = (trampoline.c, None) if trampoline is not None else ((request,) if request is not None else ())
            result = getattr(_lib, fname)(*args, *(() if op is None else (op_value,)), h, None, *tail)
        finally:
            if request is None or result != 0:  # a started request keeps them until its wait()
                for b in bufs:
                    b.release()
            if created:
                _lib.hocclRedOpDestroy(op_value, h)
        if trampoline is not None and trampoline.error is not None:
            raise_callback_error(trampoline, fname, result, h)
        check(fname, result, h)

    def all_gather_overlap(self, send, recv, on_block):
        """all_gather that calls on_block(src_rank, block) once per rank as its block of recv arrives: the own block
        first, then in the ring's order, each while the next block is in flight (CommFuse-style). block is a view of
        recv's block of the same kind as recv (numpy array: read-only; torch tensor; else a memoryview); it may be
        read, also later blocks handed over before, but recv must not be written during the call. send None: in
        place (this rank's input is its block of recv). An exception from on_block stops the call: it is raised
        from here, and the communicator is broken on every rank (close it with abort(); the other ranks get
        HocclError with hocclRemoteError). Returns recv."""
        if not callable(on_block):
            raise TypeError(f"on_block must be callable, not {type(on_block).__name__}")
        if send is None:
            bufs, count = self._checked([(recv, "recv", True)], lambda r: self._blocks(r, "all_gather_overlap"))
            r = bufs[0]
            send_at = r.element(self._rank * count)
        else:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(r, s.count * self._size,
                               f"all_gather_overlap of {s.count} elements on {self._size} ranks")
                at = r.element(self._rank * s.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == at)
                return s.count

            bufs, count = self._checked([(send, "send", False), (recv, "recv", True)], verify)
            r = bufs[1]
            send_at = bufs[0].address
        try:
            views = BlockViews(r, count, readonly=True)
        except BaseException:
            for b in bufs:
                b.release()
            raise
        tramp = Trampoline(_native.BLOCK_CALLBACK, on_block, views, "all_gather_overlap's on_block")
        self._run_overlap("hocclAllGatherOverlap", bufs, (send_at, r.address, count, int(r.dtype)), tramp)
        return recv

    def reduce_scatter_overlap(self, send, recv, produce, op=ReduceOp.SUM):
        """reduce_scatter whose input is produced block by block: produce(dst_rank, block) must write this rank's
        contribution to dst_rank's block into block (a writable view of send's block dst_rank, of the same kind as
        send), in the order that hides the transfers (the rank before this one on the ring first, the own block
        last); the library reduces the partials as they arrive and leaves this rank's reduced block in recv.
        send (size x len(recv) elements) is the workspace; None: a numpy workspace is allocated. recv None: in place
        (the result is this rank's block of send). Exceptions: as all_gather_overlap. Returns the output."""
        if not callable(produce):
            raise TypeError(f"produce must be callable, not {type(produce).__name__}")
        op = parse_op(op)
        if send is None:
            if recv is None:
                raise TypeError("reduce_scatter_overlap: pass recv (and send, or None for a numpy workspace)")
            send = _workspace_like(recv, self._size)
        if recv is None:
            bufs, count = self._checked([(send, "send", True)], lambda s: self._blocks(s, "reduce_scatter_overlap"))
            s = bufs[0]
            recv_at = s.element(self._rank * count)
        else:
            def verify(s, r):
                self._same_type(s, r)
                self._count_is(s, r.count * self._size,
                               f"reduce_scatter_overlap into {r.count} elements per rank on {self._size} ranks")
                at = s.element(self._rank * r.count)
                self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, r.address == at)
                return r.count

            bufs, count = self._checked([(send, "send", True), (recv, "recv", True)], verify)
            s = bufs[0]
            recv_at = bufs[1].address
        try:
            views = BlockViews(s, count, readonly=False)
        except BaseException:
            for b in bufs:
                b.release()
            raise
        tramp = Trampoline(_native.PRODUCE_CALLBACK, produce, views, "reduce_scatter_overlap's produce")
        self._run_overlap("hocclReduceScatterOverlap", bufs, (s.address, recv_at, count, int(s.dtype)), tramp,
                          op=op, dtype=s.dtype)
        return send if recv is None else recv

    def _ring_shift_args(self, send, recv, k):
        k = _as_int(k, "k") % self._size  # the library takes k modulo the size too; this keeps it in a C int
        in_place = recv is None or recv is send
        specs = [(send, "send", in_place)] + ([] if in_place else [(recv, "recv", True)])

        def verify(s, r=None):
            r = s if r is None else r
            self._same_type(s, r)
            self._count_is(r, s.count, "ring_shift of the send buffer")
            self._no_stray_overlap(s, r, s.address, r.address, s.nbytes, r.nbytes, s.address == r.address)
            return r

        bufs, r = self._checked(specs, verify)
        return bufs, (bufs[0].address, r.address, r.count, int(r.dtype), k), (send if in_place else recv)

    def ring_shift(self, send, recv=None, k=1):
        """Sends send to rank (rank + k) mod size and receives rank (rank - k) mod size's into recv (in place into
        send when recv is None); k may be negative. Returns the output."""
        bufs, args, out = self._ring_shift_args(send, recv, k)
        self._run_overlap("hocclRingShift", bufs, args)
        return out

    def ring_shift_start(self, send, recv=None, k=1):
        """Starts ring_shift in the background and returns a RingShiftRequest at once (compute meanwhile, then
        wait()). Until wait(): send not written, recv not touched, no other call on this communicator."""
        bufs, args, out = self._ring_shift_args(send, recv, k)
        request = ctypes.c_void_p()
        self._run_overlap("hocclRingShiftStart", bufs, args, request=ctypes.byref(request))
        return RingShiftRequest(self, self._handle, request.value, bufs, out)


def _workspace_like(recv, nranks):
    """A numpy array of nranks x len(recv) elements of recv's type (reduce_scatter_overlap without send)."""
    b = acquire(recv, "recv", True)
    try:
        dtype, count = b.dtype, b.count
    finally:
        b.release()
    import numpy as np
    name = dtype.name.lower()
    try:
        return np.empty(count * nranks, dtype=np.dtype(name))
    except TypeError:
        raise TypeError(f"reduce_scatter_overlap: numpy has no {name}; pass send (a workspace of "
                        f"{nranks} x {count} elements)") from None
