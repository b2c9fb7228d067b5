/// @file nccl_abi.h
/// Declarations with the binary interface of NVIDIA's nccl.h 2.32.3 (and the host functions of nccl_device/*.h),
/// written for hoccl's libnccl.so.2 shim so that the shim needs no CUDA header. Every type has NCCL's name, size,
/// layout and enumerator values; every function has NCCL's name and signature. tests/abi/abi_layout.cc compiles this
/// header next to NVIDIA's own and proves both facts with static_asserts.
///
/// Test mode: with HOCCL_NCCL_ABI_NAMESPACE defined, the types are declared inside namespace hoccl_nccl_abi and no
/// function is declared, so that the header can sit beside NVIDIA's nccl.h in one translation unit.
#ifndef HOCCL_SHIM_NCCL_ABI_H_
#define HOCCL_SHIM_NCCL_ABI_H_

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// The NCCL version hoccl's shim is compatible with, and the code ncclGetVersion returns.
#define HOCCL_NCCL_MAJOR 2
#define HOCCL_NCCL_MINOR 32
#define HOCCL_NCCL_PATCH 3
/// NCCL's version code formula: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
#define HOCCL_NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
/// 23203 for 2.32.3.
#define HOCCL_NCCL_VERSION_CODE HOCCL_NCCL_VERSION(HOCCL_NCCL_MAJOR, HOCCL_NCCL_MINOR, HOCCL_NCCL_PATCH)
/// ncclConfig_t.magic of a config set up with NCCL_CONFIG_INITIALIZER.
#define HOCCL_NCCL_CONFIG_MAGIC 0xcafebeefu
/// ncclSimInfo_t.magic of a sim info set up with NCCL_SIM_INFO_INITIALIZER.
#define HOCCL_NCCL_SIM_INFO_MAGIC 0x74685283u
/// Bytes in an ncclUniqueId.
#define HOCCL_NCCL_UNIQUE_ID_BYTES 128
/// "Not set" value of an int config field.
#define HOCCL_NCCL_CONFIG_UNDEF_INT INT_MIN
/// ncclCommSuspend flag: release dynamic (GPU) memory.
#define HOCCL_NCCL_SUSPEND_MEM 0x01
/// ncclCommWindowRegister flags known to 2.32 (NCCL_WIN_COLL_SYMMETRIC, _STRICT_ORDERING, _GIN_ONLY, _CFT_COUNTED).
#define HOCCL_NCCL_WIN_KNOWN_FLAGS 0x0f
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
/// A CUDA event (same definition as the CUDA runtime's).
typedef struct CUevent_st* cudaEvent_t;

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
  ncclTimeout = 8,  ///< since 2.32
  ncclNumResults = 9
} ncclResult_t;

/// Communicator configuration as of 2.31/2.32 (read by the library according to its size and version fields).
typedef struct ncclConfig_v23100 {
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
  int graphUsageMode;       ///< since 2.29
  int numRmaCtx;            ///< since 2.29
  int maxP2pPeers;          ///< since 2.30
  int graphStreamOrdering;  ///< since 2.30
  int launchOrderImplicit;  ///< since 2.30
  int numRmaSig;            ///< since 2.31
  int rmaEagerInit;         ///< since 2.31
  int hostCftMode;          ///< since 2.31
  int nvlsHostMode;         ///< since 2.31
} ncclConfig_t;

/// One vendor option of a per-collective config (a linked list; NVIDIA's library ignores every one, so does hoccl).
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;  ///< next option, NULL at the end
  struct {
    int vendorId;  ///< the vendor's own number
    int optionId;  ///< the option within the vendor
  } key;           ///< which option
  union {
    int i;
    const char* s;
    void* raw;
  } val;  ///< its value
} ncclConfigExt_t;

/// Per-collective configuration of the nccl*Config calls (2.32; read by its size and version, like ncclConfig_t).
typedef struct ncclCollConfig_v23200 {
  size_t size;                        ///< sizeof(ncclCollConfig_t) of the caller's header
  unsigned int magic;                 ///< HOCCL_NCCL_CONFIG_MAGIC
  unsigned int version;               ///< NCCL_VERSION_CODE of the caller's header
  ncclConfigExt_t* ext;               ///< vendor options
  int minCTAs;                        ///< GPU launch bound
  int maxCTAs;                        ///< GPU launch bound
  int nvlsCTAs;                       ///< GPU launch bound
  int cgaClusterSize;                 ///< GPU launch shape
  const char* algSelection;           ///< which algorithm(s) the call may use; NULL or "" = automatic
  int forceAlgSelection;              ///< 1 (default): an unsatisfiable selection is an error
  int CTAPolicy;                      ///< NCCL_CTA_POLICY_* bits
  uint64_t userProfilerTag;           ///< opaque tag for profiler plugins
  cudaEvent_t launchCompletionEvent;  ///< CUDA event recorded when the kernel is launched
} ncclCollConfig_t;

/// Result of ncclGroupSimulateEnd.
typedef struct ncclSimInfo_v22200 {
  size_t size;           ///< sizeof(ncclSimInfo_t) of the caller's header
  unsigned int magic;    ///< HOCCL_NCCL_SIM_INFO_MAGIC
  unsigned int version;  ///< NCCL_VERSION_CODE of the caller's header
  float estimatedTime;   ///< predicted time of the group (filled by the library)
} ncclSimInfo_t;

/// One entry of ncclWaitSignal's list: wait for opCnt signals from peer on (sigIdx, ctx).
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/// ncclEncryptionConfig_t.mode.
typedef enum { NCCL_ENCRYPTION_MODE_NONE = 0, NCCL_ENCRYPTION_MODE_PSK = 1 } ncclEncryptionMode_t;

/// Argument of ncclSetEncryption.
typedef struct ncclEncryptionConfig_v23200 {
  size_t size;           ///< sizeof(ncclEncryptionConfig_t) of the caller's header
  unsigned int magic;    ///< HOCCL_NCCL_CONFIG_MAGIC
  unsigned int version;  ///< NCCL_VERSION_CODE of the caller's header
  int mode;              ///< an ncclEncryptionMode_t
  const char* psk;       ///< pre-shared key for NCCL_ENCRYPTION_MODE_PSK
} ncclEncryptionConfig_t;

/// Opaque handle of a parameter (ncclParamBind).
typedef struct ncclParamHandle* ncclParamHandle_t;

/// What ncclCommMemStats reports.
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

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
/// Device-API enums (nccl_device/core.h).
typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
  NCCL_GIN_CONNECTION_CUSTOM_STRIDE
} ncclGinConnectionType_t;
typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
  NCCL_GIN_TYPE_EFA_GDA = 5,
  NCCL_GIN_MAX_TYPES = 6
} ncclGinType_t;
typedef enum { NCCL_CFT_TEAM_FLAT, NCCL_CFT_TEAM_HIER_MULTIMEM, NCCL_CFT_TEAM_HIER_LSA } ncclCftTeamMode_t;
/// A CFT "LE" id (nccl_device/core.h).
typedef uint32_t ncclCftLeId;

/// What ncclCommQueryProperties reports (nccl_device/host.h; read and written by its size).
typedef struct ncclCommProperties {
  size_t size;           ///< sizeof(ncclCommProperties_t) of the caller's header
  unsigned int magic;    ///< HOCCL_NCCL_CONFIG_MAGIC
  unsigned int version;  ///< NCCL_VERSION_CODE of the caller's header
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
  uint64_t commHash;
  int ginMinStride;
  ncclGinConnectionType_t ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
} ncclCommProperties_t;

/// Opaque device-API types: the shim only passes pointers to them.
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
/// A multimem handle (passed by value to ncclGetMultimemDevicePointer).
struct ncclMultimemHandle {
  void* mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
/// GIN scratch handles: only pointers to them pass (declared by NVIDIA's headers for Windows builds only).
struct ncclGinOutboxHandle;
struct ncclGinInboxA2AHandle;

#ifdef HOCCL_NCCL_ABI_NAMESPACE
}  // namespace hoccl_nccl_abi
#endif

/// Every function the shim exports as X(return type, name, (parameter types)), each both as nccl<Name> (weak) and
/// pnccl<Name> (strong). The type names resolve against whichever declarations are in scope, which is how the ABI
/// test checks them against NVIDIA's headers. ncclResetDebugInitInternal (strong, no p-alias) is listed apart.
#define HOCCL_NCCL_API_LIST(X) \
  HOCCL_NCCL_HOST_API_LIST(X) HOCCL_NCCL_DEVICE_API_LIST(X) HOCCL_NCCL_UNDECLARED_API_LIST(X)
/// The functions of nccl.h (which declares both the nccl* and the pnccl* names).
#define HOCCL_NCCL_HOST_API_LIST(X)                                                                                    \
  X(ncclResult_t, ncclMemAlloc, (void**, size_t))                                                                      \
  X(ncclResult_t, ncclMemFree, (void*))                                                                                \
  X(ncclResult_t, ncclGetVersion, (int*))                                                                              \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))                                                                    \
  X(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))                        \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))                                             \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))                                                     \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t))                                                                      \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t))                                                                       \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t))                                                                         \
  X(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))                                                                   \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))                                   \
  X(ncclResult_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))                            \
  X(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t, ncclUniqueId*))                                                    \
  X(ncclResult_t, ncclCommGrow, (ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*))               \
  X(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))                \
  X(const char*, ncclGetErrorString, (ncclResult_t))                                                                   \
  X(const char*, ncclGetLastError, (ncclComm_t))                                                                       \
  X(void, ncclResetDebugInit, ())                                                                                      \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))                                                  \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))                                                             \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))                                                          \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))                                                          \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))                                         \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))                                                       \
  X(ncclResult_t, ncclCommSuspend, (ncclComm_t, int))                                                                  \
  X(ncclResult_t, ncclCommResume, (ncclComm_t))                                                                        \
  X(ncclResult_t, ncclCommMemStats, (ncclComm_t, ncclCommMemStat_t, uint64_t*))                                        \
  X(ncclResult_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int))                             \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))                                                \
  X(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t, ncclWindow_t, void**))                                               \
  X(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))  \
  X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))                                                         \
  X(ncclResult_t, ncclReduce,                                                                                          \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))                          \
  X(ncclResult_t, ncclBcast, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                           \
  X(ncclResult_t, ncclBroadcast, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))          \
  X(ncclResult_t, ncclAllReduce, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))  \
  X(ncclResult_t, ncclReduceScatter,                                                                                   \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                               \
  X(ncclResult_t, ncclAllGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))               \
  X(ncclResult_t, ncclAlltoAll, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))                \
  X(ncclResult_t, ncclGather, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))             \
  X(ncclResult_t, ncclScatter, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))            \
  X(ncclResult_t, ncclAllReduceConfig,                                                                                 \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))      \
  X(ncclResult_t, ncclBroadcastConfig,                                                                                 \
    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))              \
  X(ncclResult_t, ncclReduceConfig,                                                                                    \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*)) \
  X(ncclResult_t, ncclAllGatherConfig,                                                                                 \
    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))                   \
  X(ncclResult_t, ncclReduceScatterConfig,                                                                             \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))      \
  X(ncclResult_t, ncclAlltoAllConfig,                                                                                  \
    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))                   \
  X(ncclResult_t, ncclGatherConfig,                                                                                    \
    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))              \
  X(ncclResult_t, ncclScatterConfig,                                                                                   \
    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))              \
  X(ncclResult_t, ncclSend, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                      \
  X(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                            \
  X(ncclResult_t, ncclPutSignal,                                                                                       \
    (const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int, ncclComm_t,               \
     cudaStream_t))                                                                                                    \
  X(ncclResult_t, ncclSignal, (int, int, int, unsigned int, ncclComm_t, cudaStream_t))                                 \
  X(ncclResult_t, ncclWaitSignal, (int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t))                              \
  X(ncclResult_t, ncclGroupStart, ())                                                                                  \
  X(ncclResult_t, ncclGroupEnd, ())                                                                                    \
  X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))                                                              \
  X(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t*))                                                  \
  X(ncclResult_t, ncclParamBind, (ncclParamHandle_t*, const char*))                                                    \
  X(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t, int8_t*))                                                        \
  X(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t, int16_t*))                                                      \
  X(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t, int32_t*))                                                      \
  X(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t, int64_t*))                                                      \
  X(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t, uint8_t*))                                                       \
  X(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t, uint16_t*))                                                     \
  X(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t, uint32_t*))                                                     \
  X(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t, uint64_t*))                                                     \
  X(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t, const char**))                                                  \
  X(ncclResult_t, ncclParamGet, (ncclParamHandle_t, void*, int, int*))                                                 \
  X(ncclResult_t, ncclParamGetParameter, (const char*, const char**, int*))                                            \
  X(ncclResult_t, ncclParamGetAllParameterKeys, (const char***, int*))                                                 \
  X(void, ncclParamDumpAll, (void))
/// The host functions of nccl_device/*.h (which declares only the nccl* names; the library exports both).
#define HOCCL_NCCL_DEVICE_API_LIST(X)                                                                     \
  X(ncclResult_t, ncclCommQueryProperties, (ncclComm_t, ncclCommProperties_t*))                           \
  X(ncclResult_t, ncclDevCommCreate, (ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*))      \
  X(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, ncclDevComm_t const*))                                 \
  X(ncclResult_t, ncclGetLsaMultimemDevicePointer, (ncclWindow_t, size_t, void**))                        \
  X(ncclResult_t, ncclGetMultimemDevicePointer, (ncclWindow_t, size_t, ncclMultimemHandle_t, void**))     \
  X(ncclResult_t, ncclGetLsaDevicePointer, (ncclWindow_t, size_t, int, void**))                           \
  X(ncclResult_t, ncclGetPeerDevicePointer, (ncclWindow_t, size_t, int, void**))                          \
  X(ncclResult_t, ncclGetMultimemDeviceLeInfo, (ncclWindow_t, size_t, ncclCftLeId*, size_t*))             \
  X(ncclResult_t, ncclGetCftDeviceLeInfo, (ncclWindow_t, size_t, int, ncclTeam_t, ncclCftLeId*, size_t*)) \
  X(ncclResult_t, ncclGetPeerDeviceLeInfo, (ncclWindow_t, size_t, int, ncclCftLeId*, size_t*))            \
  X(ncclTeam_t, ncclTeamWorld, (ncclComm_t))                                                              \
  X(ncclTeam_t, ncclTeamLsa, (ncclComm_t))                                                                \
  X(ncclTeam_t, ncclTeamCft, (ncclComm_t, ncclCftTeamMode_t))                                             \
  X(ncclTeam_t, ncclTeamCftMultimem, (ncclComm_t))                                                        \
  X(int, ncclTeamRankToWorld, (ncclComm_t, ncclTeam_t, int))                                              \
  X(int, ncclTeamRankToLsa, (ncclComm_t, ncclTeam_t, int))                                                \
  X(ncclTeam_t, ncclTeamRail, (ncclComm_t))                                                               \
  X(ncclResult_t, ncclLsaBarrierCreateRequirement,                                                        \
    (ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*))                           \
  X(ncclResult_t, ncclGinBarrierCreateRequirement,                                                        \
    (ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*))               \
  X(int, ncclLLA2ACalcSlots, (int, int))                                                                  \
  X(ncclResult_t, ncclLLA2ACreateRequirement, (int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*))
/// Exported by NVIDIA's Linux library but declared by its headers only for Windows builds: no signature to check.
#define HOCCL_NCCL_UNDECLARED_API_LIST(X)                                    \
  X(ncclResult_t, ncclGinOutboxCreateRequirement,                            \
    (int, int, struct ncclGinOutboxHandle*, ncclDevResourceRequirements_t*)) \
  X(ncclResult_t, ncclGinInboxA2ACreateRequirement,                          \
    (ncclTeam_t, int, int, struct ncclGinInboxA2AHandle*, ncclDevResourceRequirements_t*))

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
