// Collectives, point-to-point, groups and reduction ops at the C edge: validate everything, then enqueue.
// Nothing is sent when an argument is bad.
#include <limits>

#include "api/guard.h"
#include "comm/group.h"
#include "comm/redop.h"
#include "base/log.h"
#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"

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

// Where a buffer lives (classified once per call); device memory has no copy/reduce operations in this build.
kernels::MemoryKind memoryKindOf(const char* name, const void* buf) {
  const kernels::MemoryKind kind = kernels::classify(buf);
  if (kind == kernels::MemoryKind::Device)
    throwInvalidArgument(
        fmt::format("{} {} is CUDA device memory: this build of hoccl copies and reduces host memory "
                    "only (the CUDA device path is not built yet); pass host buffers",
                    name, buf));
  return kind;
}

void checkCount(size_t count, size_t blocks, hocclDataType_t dt) {
  const size_t elem = kernels::typeSize(dt);
  const size_t limit = std::numeric_limits<size_t>::max() / 4;
  if (count > limit / elem / blocks)
    throwInvalidArgument("count " + std::to_string(count) + " of " + kernels::typeName(dt) + " x " +
                         std::to_string(blocks) + " overflows the addressable size");
}

hocclResult_t collective(const char* fn, Coll coll, const void* sendbuff, void* recvbuff, size_t count,
                         hocclDataType_t dt, hocclRedOp_t op, int root, hocclComm_t comm) {
  return guarded(fn, [&] {
    Communicator& c = liveComm(comm);
    checkType(dt);
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
    if (count == 0) return hocclSuccess;  // as NCCL: a valid empty collective moves nothing and costs nothing
    Op o;
    o.sendKind = memoryKindOf("sendbuff", sendbuff);
    o.recvKind = memoryKindOf("recvbuff", recvbuff);
    o.kind = Op::Kind::Collective;
    o.comm = &c;
    o.coll = coll;
    o.sendbuf = sendbuff;
    o.recvbuf = recvbuff;
    o.count = count;
    o.dtype = dt;
    o.op = k.reduces ? op : hocclSum;
    o.root = k.rooted ? root : 0;
    HOCCL_TRACE(kCall, "{}: {}", c.describe(), fn);
    enqueue(o);
    return hocclSuccess;
  });
}

hocclResult_t pointToPoint(const char* fn, Op::Kind kind, const void* sendbuff, void* recvbuff, size_t count,
                           hocclDataType_t dt, int peer, hocclComm_t comm) {
  return guarded(fn, [&] {
    Communicator& c = liveComm(comm);
    checkType(dt);
    if (peer < 0 || peer >= c.nranks())
      throwInvalidArgument(fmt::format("peer {} is outside 0..{} ({})", peer, c.nranks() - 1, c.describe()));
    checkCount(count, 1, dt);
    if (count > 0 && kind == Op::Kind::Send && !sendbuff) throwInvalidArgument("sendbuff is NULL with count > 0");
    if (count > 0 && kind == Op::Kind::Recv && !recvbuff) throwInvalidArgument("recvbuff is NULL with count > 0");
    Op o;
    o.sendKind = memoryKindOf("sendbuff", sendbuff);
    o.recvKind = memoryKindOf("recvbuff", recvbuff);
    o.kind = kind;
    o.comm = &c;
    o.sendbuf = sendbuff;
    o.recvbuf = recvbuff;
    o.count = count;
    o.dtype = dt;
    o.peer = peer;
    enqueue(o);
    return hocclSuccess;
  });
}

}  // namespace

extern "C" {

hocclResult_t hocclAllReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                             hocclRedOp_t op, hocclComm_t comm, hocclStream_t) {
  return collective("hocclAllReduce", Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm);
}

hocclResult_t hocclBroadcast(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                             hocclComm_t comm, hocclStream_t) {
  return collective("hocclBroadcast", Coll::Broadcast, sendbuff, recvbuff, count, datatype, hocclSum, root, comm);
}

hocclResult_t hocclReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, hocclRedOp_t op,
                          int root, hocclComm_t comm, hocclStream_t) {
  return collective("hocclReduce", Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm);
}

hocclResult_t hocclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                             hocclComm_t comm, hocclStream_t) {
  return collective("hocclAllGather", Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, hocclSum, 0, comm);
}

hocclResult_t hocclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, hocclDataType_t datatype,
                                 hocclRedOp_t op, hocclComm_t comm, hocclStream_t) {
  return collective("hocclReduceScatter", Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm);
}

hocclResult_t hocclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                            hocclComm_t comm, hocclStream_t) {
  return collective("hocclAlltoAll", Coll::AlltoAll, sendbuff, recvbuff, count, datatype, hocclSum, 0, comm);
}

hocclResult_t hocclGather(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                          hocclComm_t comm, hocclStream_t) {
  return collective("hocclGather", Coll::Gather, sendbuff, recvbuff, count, datatype, hocclSum, root, comm);
}

hocclResult_t hocclScatter(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                           hocclComm_t comm, hocclStream_t) {
  return collective("hocclScatter", Coll::Scatter, sendbuff, recvbuff, count, datatype, hocclSum, root, comm);
}

hocclResult_t hocclSend(const void* sendbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t) {
  return pointToPoint("hocclSend", Op::Kind::Send, sendbuff, nullptr, count, datatype, peer, comm);
}

hocclResult_t hocclRecv(void* recvbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t) {
  return pointToPoint("hocclRecv", Op::Kind::Recv, nullptr, recvbuff, count, datatype, peer, comm);
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
