/// @file shim_coll.cc
/// NCCL's collectives, point-to-point calls, groups and PreMulSum ops on top of hoccl. Each call checks that its
/// buffers are host memory (hoccl's CUDA path is not built into the shim), orders itself after the work queued on a
/// non-null CUDA stream, and then runs synchronously in hoccl with a null stream.
#include <fmt/format.h>

#include "comm/group.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

// Buffer and stream checks shared by every data-moving call.
void prepare(const void* sendbuff, const void* recvbuff, cudaStream_t stream) {
  requireHostBuffer("sendbuff", sendbuff);
  if (recvbuff != sendbuff) requireHostBuffer("recvbuff", recvbuff);
  syncStream(stream);
}

}  // namespace

extern "C" {

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllReduce", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclAllReduce(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(op), toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllReduce)

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclBroadcast", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclBroadcast(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclBroadcast)

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return guarded("ncclBcast", [&] {
    prepare(buff, buff, stream);
    return fromHoccl(hocclBroadcast(buff, buff, count, toHoccl(datatype), root, toHoccl(comm), nullptr), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclBcast)

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduce", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclReduce(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(op), root, toHoccl(comm),
                                 nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduce)

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllGather", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclAllGather(sendbuff, recvbuff, sendcount, toHoccl(datatype), toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllGather)

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduceScatter", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclReduceScatter(sendbuff, recvbuff, recvcount, toHoccl(datatype), toHoccl(op), toHoccl(comm),
                                        nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduceScatter)

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
  return guarded("ncclAlltoAll", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclAlltoAll(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAlltoAll)

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclGather", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclGather(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGather)

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclScatter", [&] {
    prepare(sendbuff, recvbuff, stream);
    return fromHoccl(hocclScatter(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), nullptr),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclScatter)

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return guarded("ncclSend", [&] {
    prepare(sendbuff, sendbuff, stream);
    return fromHoccl(hocclSend(sendbuff, count, toHoccl(datatype), peer, toHoccl(comm), nullptr), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclSend)

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return guarded("ncclRecv", [&] {
    prepare(recvbuff, recvbuff, stream);
    return fromHoccl(hocclRecv(recvbuff, count, toHoccl(datatype), peer, toHoccl(comm), nullptr), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclRecv)

ncclResult_t pncclGroupStart() {
  return guarded("ncclGroupStart", [&] { return fromHoccl(hocclGroupStart()); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGroupStart)

ncclResult_t pncclGroupEnd() {
  return guarded("ncclGroupEnd", [&] { return fromHoccl(hocclGroupEnd()); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGroupEnd)

ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guarded("ncclGroupSimulateEnd", [&] {
    if (!simInfo || simInfo->magic != HOCCL_NCCL_SIM_INFO_MAGIC) {
      throw hoccl::Error(hocclInvalidArgument,
                         "simInfo is NULL or was not set up with NCCL_SIM_INFO_INITIALIZER (wrong magic)");
    }
    if (hoccl::groupDepth() == 0) {
      throw hoccl::Error(hocclInvalidUsage, "no group is open on this thread: call ncclGroupStart first");
    }
    // NCCL's estimate is in microseconds. The group is then closed without running, as NCCL does.
    const float seconds = hoccl::groupSimulatedSeconds();
    hoccl::groupDiscard();
    if (simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)) {
      simInfo->estimatedTime = seconds * 1e6f;
    }
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGroupSimulateEnd)

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&] {
    requireHostBuffer("scalar", scalar);
    return fromHoccl(hocclRedOpCreatePreMulSum(reinterpret_cast<hocclRedOp_t*>(op), scalar, toHoccl(datatype),
                                               static_cast<hocclScalarResidence_t>(residence), toHoccl(comm)),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy",
                 [&] { return fromHoccl(hocclRedOpDestroy(toHoccl(op), toHoccl(comm)), toHoccl(comm)); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclRedOpDestroy)

}  // extern "C"
