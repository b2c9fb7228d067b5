/// @file nccl_abi.h
/// Declarations with the binary interface of NVIDIA's nccl.h 2.28.9 (and the host functions of nccl_device/*.h),
/// written for hoccl's libnccl.so.2 shim so that the shim needs no CUDA header. Every type has NCCL's name, size,
/// layout and enumerator values; every function has NCCL's name and signature. tests/abi/abi_layout.cc compiles this
/// header next to NVIDIA's own and proves both facts with static_asserts.
///
/// Test mode: with HOCCL_NCCL_ABI_NAMESPACE defined, the types are declared inside namespace hoccl_nccl_abi and no
/// function is declared, so that the header can sit beside NVIDIA's nccl.h in one translation unit.
#ifndef HOCCL_SHIM_NCCL_ABI_H_
#define HOCCL_SHIM_NCCL_ABI_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/// The NCCL version hoccl's shim is compatible with, and the code ncclGetVersion returns.
#define HOCCL_NCCL_MAJOR 2
#define HOCCL_NCCL_MINOR 28
#define HOCCL_NCCL_PATCH 9
/// NCCL's version code formula: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
#define HOCCL_NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
/// 22809 for 2.28.9.
#define HOCCL_NCCL_VERSION_CODE HOCCL_NCCL_VERSION(HOCCL_NCCL_MAJOR, HOCCL_NCCL_MINOR, HOCCL_NCCL_PATCH)
/// ncclConfig_t.magic of a config set up with NCCL_CONFIG_INITIALIZER.
#define HOCCL_NCCL_CONFIG_MAGIC 0xcafebeefu
/// ncclSimInfo_t.magic of a sim info set up with NCCL_SIM_INFO_INITIALIZER.
#define HOCCL_NCCL_SIM_INFO_MAGIC 0x74685283u
/// Bytes in an ncclUniqueId.
#define HOCCL_NCCL_UNIQUE_ID_BYTES 128
/// "Not set" value of an int config field.
#define HOCCL_NCCL_CONFIG_UNDEF_INT INT_MIN
/// ncclCommShrink flags.
#define HOCCL_NCCL_SHRINK_DEFAULT 0x00
#define HOCCL_NCCL_SHRINK_ABORT 0x01

#ifdef HOCCL_NCCL_ABI_NAMESPACE
namespace hoccl_nccl_abi {
#elif defined(__cplusplus)
extern "C" {
#endif

/// Opaque communicator handle (hoccl's communicator handle in this shim).
typedef struct ncclComm* ncclComm_t;
/// Opaque memory-window handle.
typedef struct ncclWindow_vidmem* ncclWindow_t;
/// A CUDA stream (same definition as the CUDA runtime's).
typedef struct CUstream_st* cudaStream_t;

/// The job's unique id, passed by value.
typedef struct {
  char internal[HOCCL_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/// Result codes.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/// Communicator configuration as of 2.28 (read by the library according to its size and version fields).
typedef struct ncclConfig_v22800 {
  size_t size;              ///< sizeof(ncclConfig_t) of the caller's header
  unsigned int magic;       ///< HOCCL_NCCL_CONFIG_MAGIC
  unsigned int version;     ///< NCCL_VERSION_CODE of the caller's header
  int blocking;             ///< since 2.14
  int cgaClusterSize;       ///< since 2.17
  int minCTAs;              ///< since 2.17
  int maxCTAs;              ///< since 2.17
  const char* netName;      ///< since 2.17
  int splitShare;           ///< since 2.18
  int trafficClass;         ///< honoured from 2.25
  const char* commName;     ///< a name for logs
  int collnetEnable;        ///< since 2.27
  int CTAPolicy;            ///< since 2.27
  int shrinkShare;          ///< since 2.27
  int nvlsCTAs;             ///< since 2.27
  int nChannelsPerNetPeer;  ///< since 2.28
  int nvlinkCentricSched;   ///< since 2.28
} ncclConfig_t;

/// Result of ncclGroupSimulateEnd.
typedef struct ncclSimInfo_v22200 {
  size_t size;           ///< sizeof(ncclSimInfo_t) of the caller's header
  unsigned int magic;    ///< HOCCL_NCCL_SIM_INFO_MAGIC
  unsigned int version;  ///< NCCL_VERSION_CODE of the caller's header
  float estimatedTime;   ///< predicted time of the group (filled by the library)
} ncclSimInfo_t;

/// Helper enum that NCCL uses to size ncclRedOp_t.
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
/// Reduction operations; values >= ncclNumOps come from ncclRedOpCreatePreMulSum.
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/// Element types.
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/// Where the PreMulSum scalar lives.
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/// A team of the device API (nccl_device/core.h): nRanks ranks, this one at `rank`, world ranks `stride` apart.
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;
/// Opaque device-API types: the shim only passes pointers to them.
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

#ifdef HOCCL_NCCL_ABI_NAMESPACE
}  // namespace hoccl_nccl_abi
#endif

/// Every function the shim exports as X(return type, name, (parameter types)), each both as nccl<Name> (weak) and
/// pnccl<Name> (strong). The type names resolve against whichever declarations are in scope, which is how the ABI
/// test checks them against NVIDIA's headers. ncclResetDebugInitInternal (strong, no p-alias) is listed apart.
#define HOCCL_NCCL_API_LIST(X) HOCCL_NCCL_HOST_API_LIST(X) HOCCL_NCCL_DEVICE_API_LIST(X)
/// The functions of nccl.h (which declares both the nccl* and the pnccl* names).
#define HOCCL_NCCL_HOST_API_LIST(X)                                                                                   \
  X(ncclResult_t, ncclMemAlloc, (void**, size_t))                                                                     \
  X(ncclResult_t, ncclMemFree, (void*))                                                                               \
  X(ncclResult_t, ncclGetVersion, (int*))                                                                             \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))                                                                   \
  X(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))                       \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))                                            \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))                                                    \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t))                                                                     \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t))                                                                      \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t))                                                                        \
  X(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))                                                                  \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))                                  \
  X(ncclResult_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))                           \
  X(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))               \
  X(const char*, ncclGetErrorString, (ncclResult_t))                                                                  \
  X(const char*, ncclGetLastError, (ncclComm_t))                                                                      \
  X(void, ncclResetDebugInit, ())                                                                                     \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))                                                 \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))                                                            \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))                                                         \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))                                                         \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))                                        \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))                                                      \
  X(ncclResult_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int))                            \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))                                               \
  X(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t)) \
  X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))                                                        \
  X(ncclResult_t, ncclReduce,                                                                                         \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))                         \
  X(ncclResult_t, ncclBcast, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                          \
  X(ncclResult_t, ncclBroadcast, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))         \
  X(ncclResult_t, ncclAllReduce, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
  X(ncclResult_t, ncclReduceScatter,                                                                                  \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                              \
  X(ncclResult_t, ncclAllGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))              \
  X(ncclResult_t, ncclAlltoAll, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))               \
  X(ncclResult_t, ncclGather, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))            \
  X(ncclResult_t, ncclScatter, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))           \
  X(ncclResult_t, ncclSend, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                     \
  X(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                           \
  X(ncclResult_t, ncclGroupStart, ())                                                                                 \
  X(ncclResult_t, ncclGroupEnd, ())                                                                                   \
  X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))
/// The host functions of nccl_device/*.h (which declares only the nccl* names; the library exports both).
#define HOCCL_NCCL_DEVICE_API_LIST(X)                                                                \
  X(ncclResult_t, ncclDevCommCreate, (ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*)) \
  X(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, ncclDevComm_t const*))                            \
  X(ncclTeam_t, ncclTeamWorld, (ncclComm_t))                                                         \
  X(ncclTeam_t, ncclTeamLsa, (ncclComm_t))                                                           \
  X(ncclTeam_t, ncclTeamRail, (ncclComm_t))                                                          \
  X(int, ncclTeamRankToWorld, (ncclComm_t, ncclTeam_t, int))                                         \
  X(int, ncclTeamRankToLsa, (ncclComm_t, ncclTeam_t, int))                                           \
  X(ncclResult_t, ncclLsaBarrierCreateRequirement,                                                   \
    (ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*))                      \
  X(ncclResult_t, ncclGinBarrierCreateRequirement,                                                   \
    (ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*))          \
  X(int, ncclLLA2ACalcSlots, (int, int))                                                             \
  X(ncclResult_t, ncclLLA2ACreateRequirement, (int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*))

#ifndef HOCCL_NCCL_ABI_NAMESPACE
#define HOCCL_NCCL_DECLARE_(ret, name, params) \
  ret name params;                             \
  ret p##name params;
HOCCL_NCCL_API_LIST(HOCCL_NCCL_DECLARE_)
#undef HOCCL_NCCL_DECLARE_
/// Re-reads the logging environment (NCCL exports it, strong and without a p-alias; not in nccl.h).
void ncclResetDebugInitInternal(void);
#endif

#if defined(__cplusplus) && !defined(HOCCL_NCCL_ABI_NAMESPACE)
}  // extern "C"
#endif

#endif  // HOCCL_SHIM_NCCL_ABI_H_
