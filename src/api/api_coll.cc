// Collectives, point-to-point, groups and reduction ops at the C edge: validate everything, then enqueue.
// Nothing is sent when an argument is bad.
#include <limits>

#include "api/guard.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "comm/proxy.h"
#include "comm/redop.h"
#include "base/log.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/device.h"
#include "kernels/memory.h"
#include "kernels/registrations.h"
#include "kernels/shared_mem.h"

using namespace hoccl;
using hoccl::api::guarded;
using hoccl::api::liveComm;
using sched::Coll;

namespace {

// What a call needs checked: buffers required on this rank, element count multiplier, root.
struct Check {
  bool needSend;  // sendbuff must be non-null (when count > 0)
  bool needRecv;  // recvbuff must be non-null (when count > 0)
  size_t blocks;  // the larger buffer holds count x blocks elements
  bool rooted;
  bool reduces;
};

Check checkFor(Coll coll, int rank, int root, int nranks) {
  const bool isRoot = rank == root;
  const size_t n = static_cast<size_t>(nranks);
  switch (coll) {
    case Coll::AllReduce: return {true, true, 1, false, true};
    case Coll::Broadcast: return {isRoot, true, 1, true, false};
    case Coll::Reduce: return {true, isRoot, 1, true, true};
    case Coll::AllGather: return {true, true, n, false, false};
    case Coll::ReduceScatter: return {true, true, n, false, true};
    case Coll::AlltoAll: return {true, true, n, false, false};
    case Coll::Gather: return {true, isRoot, n, true, false};
    case Coll::Scatter: return {isRoot, true, n, true, false};
  }
  return {true, true, 1, false, false};
}

void checkType(hocclDataType_t dt) {
  if (static_cast<int>(dt) < 0 || dt >= hocclNumTypes)
    throwInvalidArgument("datatype " + std::to_string(static_cast<int>(dt)) + " is not a valid hocclDataType_t (0.." +
                         std::to_string(hocclNumTypes - 1) + ")");
}

// Where the buffers of a call live (each classified once): both of one kind, or one absent (null, or not used on this
// rank). Mixed host and device buffers are refused naming the device one. Device memory needs a device in this
// process (the CUDA driver sees device memory even when HOCCL_DEVICE=none).
// The shared blocks and registrations a call's buffers lie in stay put until the op has run (Op::pins): freeing or
// deregistering them meanwhile (from another thread, or inside a group) is hocclInvalidUsage, not a crash.
struct CallPins {
  CallPins(Communicator& c, const void* send, const void* recv)
      : sendBlock(send), recvBlock(recv), sendReg(c.registrations(), send, 1), recvReg(c.registrations(), recv, 1) {}
  kernels::SharedPin sendBlock, recvBlock;
  kernels::Registrations::Pin sendReg, recvReg;
};

void pinBuffers(Op& o, Communicator& c) {
  if (o.sendKind == kernels::MemoryKind::HostShared || o.recvKind == kernels::MemoryKind::HostShared ||
      c.registrations().size() > 0)
    o.pins = std::make_shared<CallPins>(c, o.sendbuf, o.recvbuf);
}

void classifyBuffers(Op& o, const void* sendbuff, const void* recvbuff) {
  o.sendKind = kernels::classify(sendbuff);
  o.recvKind = kernels::classify(recvbuff);
  if (!sendbuff) o.sendKind = o.recvKind;
  if (!recvbuff) o.recvKind = o.sendKind;
  const bool sendDev = o.sendKind == kernels::MemoryKind::Device, recvDev = o.recvKind == kernels::MemoryKind::Device;
  if (sendDev != recvDev)
    throwInvalidArgument(fmt::format(
        "{} {} is device memory but {} {} is host memory: hoccl does not mix host and device buffers in one call; "
        "pass two device buffers or two host buffers",
        sendDev ? "sendbuff" : "recvbuff", sendDev ? sendbuff : static_cast<const void*>(recvbuff),
        sendDev ? "recvbuff" : "sendbuff", sendDev ? static_cast<const void*>(recvbuff) : sendbuff));
  if (sendDev && !device::current())
    throwInvalidArgument(
        fmt::format("{} is CUDA device memory but this process uses no device (HOCCL_DEVICE=none, or "
                    "the CUDA device could not be opened); pass host buffers",
                    sendbuff ? sendbuff : static_cast<const void*>(recvbuff)));
  if (sendDev && !device::current()->simulated()) {
    const int own = device::current()->ordinal();
    for (const void* p : {sendbuff, static_cast<const void*>(recvbuff)}) {
      const int where = cuda::pointerDevice(p);
      if (where >= 0 && where != own)
        throwInvalidArgument(fmt::format(
            "{} {} is memory of CUDA device {}, but hoccl uses CUDA device {} in this process (the device current "
            "when hoccl first needed one); make device {} current (cudaSetDevice, torch.cuda.set_device) before "
            "creating the communicator, or give each rank one GPU with CUDA_VISIBLE_DEVICES",
            p == sendbuff ? "sendbuff" : "recvbuff", p, where, own, where));
    }
  }
}

// The stream argument: refused when it is certainly not a stream (the device does not know it; or there is no
// device and no CUDA driver, so no stream can exist).
// A stream being captured into a CUDA graph is refused too: the proxy would run the collective once, now, and the
// graph would hold only the stream's wait for it, so every replay would communicate nothing (docs/cuda.md).
void checkStream(hocclStream_t stream) {
  device::refuseCapture(stream);
  if (!stream) return;
  if (device::Device* d = device::current()) {
    if (!d->validStream(stream))
      throwInvalidArgument(fmt::format("stream {} is not a live stream of {}", static_cast<void*>(stream), d->name()));
    return;
  }
  if (!cuda::driverLoaded())
    throwInvalidArgument(
        fmt::format("stream {} cannot be a stream: this process has no device and no CUDA driver; "
                    "pass NULL",
                    static_cast<void*>(stream)));
}

// The communicator's stream-ordered part failed earlier: the call fails with that error.
void checkProxy(Communicator& c) {
  if (Proxy* p = c.proxyIfAny()) p->throwIfFailed();
}

void checkCount(size_t count, size_t blocks, hocclDataType_t dt) {
  const size_t elem = kernels::typeSize(dt);
  const size_t limit = std::numeric_limits<size_t>::max() / 4;
  if (count > limit / elem / blocks)
    throwInvalidArgument("count " + std::to_string(count) + " of " + kernels::typeName(dt) + " x " +
                         std::to_string(blocks) + " overflows the addressable size");
}

hocclResult_t collective(const char* fn, Coll coll, const void* sendbuff, void* recvbuff, size_t count,
                         hocclDataType_t dt, hocclRedOp_t op, int root, hocclComm_t comm, hocclStream_t stream) {
  return guarded(fn, [&] {
    Communicator& c = liveComm(comm);
    checkProxy(c);
    checkType(dt);
    checkStream(stream);
    Check k = checkFor(coll, c.rank(), root, c.nranks());
    if (k.rooted && (root < 0 || root >= c.nranks()))
      throwInvalidArgument(fmt::format("root {} is outside 0..{} ({})", root, c.nranks() - 1, c.describe()));
    if (k.reduces && !validOp(op, dt, &c))
      throwInvalidArgument(
          fmt::format("op {} is not valid here: use hocclSum/Prod/Max/Min/Avg or a PreMulSum op "
                      "created on this communicator for datatype {}",
                      static_cast<int>(op), kernels::typeName(dt)));
    checkCount(count, k.blocks, dt);
    if (count > 0 && k.needSend && !sendbuff)
      throwInvalidArgument(fmt::format("sendbuff is NULL with count {}", count));
    if (count > 0 && k.needRecv && !recvbuff)
      throwInvalidArgument(fmt::format("recvbuff is NULL with count {}", count));
    Op o;
    classifyBuffers(o, k.needSend ? sendbuff : nullptr, k.needRecv ? recvbuff : nullptr);
    if (count == 0) return hocclSuccess;  // as NCCL: a valid empty collective moves nothing and costs nothing
    o.stream = stream;
    o.kind = Op::Kind::Collective;
    o.comm = &c;
    o.coll = coll;
    o.sendbuf = sendbuff;
    o.recvbuf = recvbuff;
    o.count = count;
    o.dtype = dt;
    o.op = k.reduces ? op : hocclSum;
    o.root = k.rooted ? root : 0;
    if (o.onDevice() && o.op >= hocclNumOps)
      if (auto pm = findPreMulSum(o.op)) o.premul = std::make_shared<const PreMulSumOp>(*pm);
    pinBuffers(o, c);
    HOCCL_TRACE(kCall, "{}: {}", c.describe(), fn);
    enqueue(o);
    return hocclSuccess;
  });
}

hocclResult_t pointToPoint(const char* fn, Op::Kind kind, const void* sendbuff, void* recvbuff, size_t count,
                           hocclDataType_t dt, int peer, hocclComm_t comm, hocclStream_t stream) {
  return guarded(fn, [&] {
    Communicator& c = liveComm(comm);
    checkProxy(c);
    checkType(dt);
    checkStream(stream);
    if (peer < 0 || peer >= c.nranks())
      throwInvalidArgument(fmt::format("peer {} is outside 0..{} ({})", peer, c.nranks() - 1, c.describe()));
    checkCount(count, 1, dt);
    if (count > 0 && kind == Op::Kind::Send && !sendbuff) throwInvalidArgument("sendbuff is NULL with count > 0");
    if (count > 0 && kind == Op::Kind::Recv && !recvbuff) throwInvalidArgument("recvbuff is NULL with count > 0");
    Op o;
    classifyBuffers(o, sendbuff, recvbuff);
    o.stream = stream;
    o.kind = kind;
    o.comm = &c;
    o.sendbuf = sendbuff;
    o.recvbuf = recvbuff;
    o.count = count;
    o.dtype = dt;
    o.peer = peer;
    pinBuffers(o, c);
    enqueue(o);
    return hocclSuccess;
  });
}

}  // namespace

extern "C" {

hocclResult_t hocclAllReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                             hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclAllReduce", Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

hocclResult_t hocclBroadcast(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                             hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclBroadcast", Coll::Broadcast, sendbuff, recvbuff, count, datatype, hocclSum, root, comm,
                    stream);
}

hocclResult_t hocclReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, hocclRedOp_t op,
                          int root, hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclReduce", Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

hocclResult_t hocclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                             hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclAllGather", Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, hocclSum, 0, comm,
                    stream);
}

hocclResult_t hocclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, hocclDataType_t datatype,
                                 hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclReduceScatter", Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                    stream);
}

hocclResult_t hocclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                            hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclAlltoAll", Coll::AlltoAll, sendbuff, recvbuff, count, datatype, hocclSum, 0, comm, stream);
}

hocclResult_t hocclGather(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                          hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclGather", Coll::Gather, sendbuff, recvbuff, count, datatype, hocclSum, root, comm, stream);
}

hocclResult_t hocclScatter(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                           hocclComm_t comm, hocclStream_t stream) {
  return collective("hocclScatter", Coll::Scatter, sendbuff, recvbuff, count, datatype, hocclSum, root, comm, stream);
}

hocclResult_t hocclSend(const void* sendbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream) {
  return pointToPoint("hocclSend", Op::Kind::Send, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

hocclResult_t hocclRecv(void* recvbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream) {
  return pointToPoint("hocclRecv", Op::Kind::Recv, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

hocclResult_t hocclGroupStart(void) {
  return guarded("hocclGroupStart", [] {
    groupStart();
    return hocclSuccess;
  });
}

hocclResult_t hocclGroupEnd(void) {
  return guarded("hocclGroupEnd", [] {
    groupEnd();
    return hocclSuccess;
  });
}

hocclResult_t hocclRedOpCreatePreMulSum(hocclRedOp_t* op, void* scalar, hocclDataType_t datatype,
                                        hocclScalarResidence_t residence, hocclComm_t comm) {
  return guarded("hocclRedOpCreatePreMulSum", [&] {
    Communicator& c = liveComm(comm);
    if (!op) throwInvalidArgument("op is NULL");
    if (!scalar) throwInvalidArgument("scalar is NULL");
    checkType(datatype);
    if (residence != hocclScalarDevice && residence != hocclScalarHostImmediate)
      throwInvalidArgument("residence must be hocclScalarDevice (0) or hocclScalarHostImmediate (1)");
    PreMulSumOp p;
    p.dtype = datatype;
    p.residence = residence;
    p.comm = &c;
    if (residence == hocclScalarHostImmediate) {
      const char* s = static_cast<const char*>(scalar);
      p.value.assign(s, s + kernels::typeSize(datatype));
    } else {
      p.pointer = scalar;
    }
    *op = createPreMulSum(p);
    return hocclSuccess;
  });
}

hocclResult_t hocclRedOpDestroy(hocclRedOp_t op, hocclComm_t comm) {
  return guarded("hocclRedOpDestroy", [&] {
    destroyPreMulSum(op, &liveComm(comm, true));
    return hocclSuccess;
  });
}

}  // extern "C"
