/// @file shim_coll.cc
/// NCCL's collectives (also the nccl*Config variants of 2.32 with a per-call ncclCollConfig_t), point-to-point calls,
/// groups and PreMulSum ops on top of hoccl. Each call checks that its communicator is not suspended. Calls on device
/// buffers (a GPU's, or the simulated device's) go to hoccl with the caller's stream and are stream-ordered there, as
/// in NCCL; calls on host buffers order themselves after the work queued on a non-null stream and then run
/// synchronously in hoccl with a null stream.
#include <cstring>

#include <fmt/format.h>

#include "base/log.h"
#include "comm/group.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

// Communicator, buffer and stream checks shared by every data-moving call; returns the stream to hand to hoccl
// (streamForCall: the caller's stream for device buffers, null for host buffers after the stream's earlier work).
hocclStream_t prepare(ncclComm_t comm, const void* sendbuff, const void* recvbuff, cudaStream_t stream) {
  requireNotSuspended(comm);
  requireUsableBuffer("sendbuff", sendbuff);
  if (recvbuff != sendbuff) requireUsableBuffer("recvbuff", recvbuff);
  return streamForCall(sendbuff, recvbuff, stream);
}

// The bytes of an ncclCollConfig_t that every version has: size, magic, version.
constexpr size_t kCollConfigHeader = offsetof(ncclCollConfig_t, ext);

// Checks a per-call config read by its size (a NULL config is the plain call). hoccl has one way to run each
// collective on host memory: the GPU launch fields (CTA counts, cluster size, CTA policy) have nothing to tune, vendor
// extensions and the profiler tag are ignored as NVIDIA's library ignores them; an algorithm selection that must be
// honoured and a launch-completion event cannot be, and are refused with a text that says why.
void checkCollConfig(const ncclCollConfig_t* user) {
  if (!user) return;
  ncclCollConfig_t c;
  std::memset(&c, 0, sizeof c);
  std::memcpy(&c, user, kCollConfigHeader);
  if (c.magic != HOCCL_NCCL_CONFIG_MAGIC) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("ncclCollConfig_t has magic {:#x} instead of {:#x}: set it up with "
                                   "`ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;`",
                                   c.magic, HOCCL_NCCL_CONFIG_MAGIC));
  }
  if (c.size < kCollConfigHeader) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("ncclCollConfig_t.size is {} bytes, smaller than its {}-byte header: set it up "
                                   "with NCCL_COLLCONFIG_INITIALIZER",
                                   c.size, kCollConfigHeader));
  }
  c.forceAlgSelection = 1;
  std::memcpy(&c, user, c.size < sizeof c ? c.size : sizeof c);
  const bool hasAlg = c.size >= offsetof(ncclCollConfig_t, algSelection) + sizeof(const char*) && c.algSelection &&
                      *c.algSelection;
  if (hasAlg) {
    if (c.forceAlgSelection) {
      unsupported(fmt::format(
          "ncclCollConfig_t.algSelection \"{}\" with forceAlgSelection = 1: hoccl chooses its algorithm per process "
          "(HOCCL_ALGO / NCCL_ALGO, names ring, ho_ring, direct), not per call. Leave algSelection NULL, or set "
          "forceAlgSelection = 0 to let hoccl choose.",
          c.algSelection));
    }
    HOCCL_INFO(kColl, "ncclCollConfig_t.algSelection \"{}\" is not forced and hoccl chooses the algorithm itself",
               c.algSelection);
  }
  if (c.size >= offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof(cudaEvent_t) && c.launchCompletionEvent) {
    unsupported(
        "ncclCollConfig_t.launchCompletionEvent is a CUDA event recorded at kernel launch; hoccl's libnccl.so.2 "
        "runs on host memory and launches no kernel (it needs a GPU build). Pass NULL: the call has completed when "
        "it returns.");
  }
}

}  // namespace

extern "C" {

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllReduce", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclAllReduce(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(op), toHoccl(comm), s),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllReduce)

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclBroadcast", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclBroadcast(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), s),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclBroadcast)

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return guarded("ncclBcast", [&] {
    const hocclStream_t s = prepare(comm, buff, buff, stream);
    return fromHoccl(hocclBroadcast(buff, buff, count, toHoccl(datatype), root, toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclBcast)

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduce", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclReduce(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(op), root, toHoccl(comm), s),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduce)

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllGather", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclAllGather(sendbuff, recvbuff, sendcount, toHoccl(datatype), toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllGather)

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduceScatter", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclReduceScatter(sendbuff, recvbuff, recvcount, toHoccl(datatype), toHoccl(op), toHoccl(comm),
                                        s),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduceScatter)

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
  return guarded("ncclAlltoAll", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclAlltoAll(sendbuff, recvbuff, count, toHoccl(datatype), toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAlltoAll)

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclGather", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclGather(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGather)

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclScatter", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, recvbuff, stream);
    return fromHoccl(hocclScatter(sendbuff, recvbuff, count, toHoccl(datatype), root, toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclScatter)

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return guarded("ncclSend", [&] {
    const hocclStream_t s = prepare(comm, sendbuff, sendbuff, stream);
    return fromHoccl(hocclSend(sendbuff, count, toHoccl(datatype), peer, toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclSend)

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return guarded("ncclRecv", [&] {
    const hocclStream_t s = prepare(comm, recvbuff, recvbuff, stream);
    return fromHoccl(hocclRecv(recvbuff, count, toHoccl(datatype), peer, toHoccl(comm), s), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclRecv)

// The nccl*Config calls of 2.32: the plain call after the per-call config is checked.

ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                  const ncclCollConfig_t* config) {
  return guarded("ncclAllReduceConfig", [&] {
    checkCollConfig(config);
    return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllReduceConfig)

ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return guarded("ncclBroadcastConfig", [&] {
    checkCollConfig(config);
    return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclBroadcastConfig)

ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                               const ncclCollConfig_t* config) {
  return guarded("ncclReduceConfig", [&] {
    checkCollConfig(config);
    return pncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduceConfig)

ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return guarded("ncclAllGatherConfig", [&] {
    checkCollConfig(config);
    return pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAllGatherConfig)

ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                      const ncclCollConfig_t* config) {
  return guarded("ncclReduceScatterConfig", [&] {
    checkCollConfig(config);
    return pncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclReduceScatterConfig)

ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return guarded("ncclAlltoAllConfig", [&] {
    checkCollConfig(config);
    return pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclAlltoAllConfig)

ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return guarded("ncclGatherConfig", [&] {
    checkCollConfig(config);
    return pncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGatherConfig)

ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return guarded("ncclScatterConfig", [&] {
    checkCollConfig(config);
    return pncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclScatterConfig)

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
    requireUsableBuffer("scalar", scalar);
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
