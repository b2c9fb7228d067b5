/// @file abi_layout.cc
/// Proves at compile time that src/shim/nccl_abi.h is ABI-identical to NVIDIA's nccl.h 2.32.3 and
/// nccl_device/core.h and host.h: same sizes, alignments, field offsets and enumerator values for every type, the same
/// constants, and for every function in HOCCL_NCCL_API_LIST the exact signature NVIDIA declares (for both the
/// nccl* and the pnccl* name). If this file compiles, the shim's declarations match; main() only reports it.
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdio>
#include <type_traits>

#define HOCCL_NCCL_ABI_NAMESPACE 1
#include "shim/nccl_abi.h"

namespace ours = hoccl_nccl_abi;

// Constants.
static_assert(HOCCL_NCCL_MAJOR == NCCL_MAJOR && HOCCL_NCCL_MINOR == NCCL_MINOR && HOCCL_NCCL_PATCH == NCCL_PATCH);
static_assert(HOCCL_NCCL_VERSION_CODE == NCCL_VERSION_CODE);
static_assert(HOCCL_NCCL_VERSION(2, 8, 4) == NCCL_VERSION(2, 8, 4) && HOCCL_NCCL_VERSION(2, 17, 1) == 21701);
static_assert(HOCCL_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES);
static_assert(HOCCL_NCCL_CONFIG_UNDEF_INT == NCCL_CONFIG_UNDEF_INT);
static_assert(HOCCL_NCCL_SHRINK_DEFAULT == NCCL_SHRINK_DEFAULT && HOCCL_NCCL_SHRINK_ABORT == NCCL_SHRINK_ABORT);
static_assert(HOCCL_NCCL_SUSPEND_MEM == NCCL_SUSPEND_MEM);
static_assert(HOCCL_NCCL_WIN_KNOWN_FLAGS ==
              (NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED));
static_assert(HOCCL_NCCL_CONFIG_MAGIC == NCCL_API_MAGIC);

// Types: size and alignment.
#define SAME_SHAPE(T)                                                             \
  static_assert(sizeof(ours::T) == sizeof(::T), #T ": size differs from nccl.h"); \
  static_assert(alignof(ours::T) == alignof(::T), #T ": alignment differs from nccl.h");
SAME_SHAPE(ncclComm_t)
SAME_SHAPE(ncclWindow_t)
SAME_SHAPE(cudaStream_t)
SAME_SHAPE(ncclUniqueId)
SAME_SHAPE(ncclResult_t)
SAME_SHAPE(ncclConfig_t)
SAME_SHAPE(ncclSimInfo_t)
SAME_SHAPE(ncclRedOp_t)
SAME_SHAPE(ncclDataType_t)
SAME_SHAPE(ncclScalarResidence_t)
SAME_SHAPE(ncclTeam_t)
SAME_SHAPE(cudaEvent_t)
SAME_SHAPE(ncclConfigExt_t)
SAME_SHAPE(ncclCollConfig_t)
SAME_SHAPE(ncclWaitSignalDesc_t)
SAME_SHAPE(ncclEncryptionMode_t)
SAME_SHAPE(ncclEncryptionConfig_t)
SAME_SHAPE(ncclParamHandle_t)
SAME_SHAPE(ncclCommMemStat_t)
SAME_SHAPE(ncclGinConnectionType_t)
SAME_SHAPE(ncclGinType_t)
SAME_SHAPE(ncclCftTeamMode_t)
SAME_SHAPE(ncclCftLeId)
SAME_SHAPE(ncclCommProperties_t)
SAME_SHAPE(ncclMultimemHandle_t)
static_assert(std::is_same_v<std::underlying_type_t<ours::ncclRedOp_t>, std::underlying_type_t<::ncclRedOp_t>>);
static_assert(std::is_same_v<std::underlying_type_t<ours::ncclResult_t>, std::underlying_type_t<::ncclResult_t>>);

// Struct fields: same offset and same size.
#define SAME_FIELD(T, F)                                                                 \
  static_assert(offsetof(ours::T, F) == offsetof(::T, F), #T "." #F ": offset differs"); \
  static_assert(sizeof(ours::T::F) == sizeof(::T::F), #T "." #F ": size differs");
SAME_FIELD(ncclUniqueId, internal)
#define CONFIG_FIELDS(F)                                                                                           \
  F(size)                                                                                                          \
  F(magic) F(version) F(blocking) F(cgaClusterSize) F(minCTAs) F(maxCTAs) F(netName) F(splitShare) F(trafficClass) \
      F(commName) F(collnetEnable) F(CTAPolicy) F(shrinkShare) F(nvlsCTAs) F(nChannelsPerNetPeer)                  \
          F(nvlinkCentricSched) F(graphUsageMode) F(numRmaCtx) F(maxP2pPeers) F(graphStreamOrdering)               \
              F(launchOrderImplicit) F(numRmaSig) F(rmaEagerInit) F(hostCftMode) F(nvlsHostMode)
#define CONFIG_FIELD(F) SAME_FIELD(ncclConfig_t, F)
CONFIG_FIELDS(CONFIG_FIELD)
#define COLL_CONFIG_FIELD(F) SAME_FIELD(ncclCollConfig_t, F)
COLL_CONFIG_FIELD(size)
COLL_CONFIG_FIELD(magic)
COLL_CONFIG_FIELD(version)
COLL_CONFIG_FIELD(ext)
COLL_CONFIG_FIELD(minCTAs)
COLL_CONFIG_FIELD(maxCTAs)
COLL_CONFIG_FIELD(nvlsCTAs)
COLL_CONFIG_FIELD(cgaClusterSize)
COLL_CONFIG_FIELD(algSelection)
COLL_CONFIG_FIELD(forceAlgSelection)
COLL_CONFIG_FIELD(CTAPolicy)
COLL_CONFIG_FIELD(userProfilerTag)
COLL_CONFIG_FIELD(launchCompletionEvent)
SAME_FIELD(ncclConfigExt_t, next)
SAME_FIELD(ncclConfigExt_t, key)
SAME_FIELD(ncclConfigExt_t, val)
SAME_FIELD(ncclSimInfo_t, size)
SAME_FIELD(ncclSimInfo_t, magic)
SAME_FIELD(ncclSimInfo_t, version)
SAME_FIELD(ncclSimInfo_t, estimatedTime)
SAME_FIELD(ncclTeam_t, nRanks)
SAME_FIELD(ncclTeam_t, rank)
SAME_FIELD(ncclTeam_t, stride)
SAME_FIELD(ncclWaitSignalDesc_t, opCnt)
SAME_FIELD(ncclWaitSignalDesc_t, peer)
SAME_FIELD(ncclWaitSignalDesc_t, sigIdx)
SAME_FIELD(ncclWaitSignalDesc_t, ctx)
SAME_FIELD(ncclEncryptionConfig_t, size)
SAME_FIELD(ncclEncryptionConfig_t, magic)
SAME_FIELD(ncclEncryptionConfig_t, version)
SAME_FIELD(ncclEncryptionConfig_t, mode)
SAME_FIELD(ncclEncryptionConfig_t, psk)
SAME_FIELD(ncclMultimemHandle_t, mcBasePtr)
#define PROPS_FIELD(F) SAME_FIELD(ncclCommProperties_t, F)
PROPS_FIELD(size)
PROPS_FIELD(magic)
PROPS_FIELD(version)
PROPS_FIELD(rank)
PROPS_FIELD(nRanks)
PROPS_FIELD(cudaDev)
PROPS_FIELD(nvmlDev)
PROPS_FIELD(deviceApiSupport)
PROPS_FIELD(multimemSupport)
PROPS_FIELD(ginType)
PROPS_FIELD(nLsaTeams)
PROPS_FIELD(hostRmaSupport)
PROPS_FIELD(railedGinType)
PROPS_FIELD(commHash)
PROPS_FIELD(ginMinStride)
PROPS_FIELD(ginConnectionType)
PROPS_FIELD(ginSupport)
PROPS_FIELD(devCommRuntimeVersionSize)
PROPS_FIELD(cftSupport)
PROPS_FIELD(cftMulticastSupport)
PROPS_FIELD(cftCountedSupport)

// The magic numbers, read from NVIDIA's initializers.
constexpr ::ncclConfig_t kNvConfig = NCCL_CONFIG_INITIALIZER;
static_assert(kNvConfig.magic == HOCCL_NCCL_CONFIG_MAGIC && kNvConfig.version == HOCCL_NCCL_VERSION_CODE);
constexpr ::ncclSimInfo_t kNvSim = NCCL_SIM_INFO_INITIALIZER;
static_assert(kNvSim.magic == HOCCL_NCCL_SIM_INFO_MAGIC);
constexpr ::ncclCollConfig_t kNvCollConfig = NCCL_COLLCONFIG_INITIALIZER;
static_assert(kNvCollConfig.magic == HOCCL_NCCL_CONFIG_MAGIC && kNvCollConfig.forceAlgSelection == 1);

// Every enumerator.
#define SAME_ENUM(E) static_assert(static_cast<long long>(ours::E) == static_cast<long long>(::E), #E);
SAME_ENUM(ncclSuccess)
SAME_ENUM(ncclUnhandledCudaError)
SAME_ENUM(ncclSystemError) SAME_ENUM(ncclInternalError) SAME_ENUM(ncclInvalidArgument) SAME_ENUM(ncclInvalidUsage)
    SAME_ENUM(ncclRemoteError) SAME_ENUM(ncclInProgress) SAME_ENUM(ncclTimeout) SAME_ENUM(ncclNumResults) SAME_ENUM(
        ncclSum) SAME_ENUM(ncclProd) SAME_ENUM(ncclMax) SAME_ENUM(ncclMin) SAME_ENUM(ncclAvg) SAME_ENUM(ncclNumOps)
        SAME_ENUM(ncclMaxRedOp) SAME_ENUM(ncclNumOps_dummy) SAME_ENUM(ncclInt8) SAME_ENUM(ncclChar) SAME_ENUM(ncclUint8)
            SAME_ENUM(ncclInt32) SAME_ENUM(ncclInt) SAME_ENUM(ncclUint32) SAME_ENUM(ncclInt64) SAME_ENUM(ncclUint64)
                SAME_ENUM(ncclFloat16) SAME_ENUM(ncclHalf) SAME_ENUM(ncclFloat32) SAME_ENUM(ncclFloat)
                    SAME_ENUM(ncclFloat64) SAME_ENUM(ncclDouble) SAME_ENUM(ncclBfloat16) SAME_ENUM(ncclFloat8e4m3)
                        SAME_ENUM(ncclFloat8e5m2) SAME_ENUM(ncclNumTypes) SAME_ENUM(ncclScalarDevice) SAME_ENUM(
                            ncclScalarHostImmediate) SAME_ENUM(NCCL_ENCRYPTION_MODE_NONE)
                            SAME_ENUM(NCCL_ENCRYPTION_MODE_PSK) SAME_ENUM(ncclStatGpuMemSuspend) SAME_ENUM(
                                ncclStatGpuMemSuspended) SAME_ENUM(ncclStatGpuMemPersist) SAME_ENUM(ncclStatGpuMemTotal)
                                SAME_ENUM(NCCL_GIN_CONNECTION_NONE) SAME_ENUM(NCCL_GIN_CONNECTION_FULL)
                                    SAME_ENUM(NCCL_GIN_CONNECTION_RAIL) SAME_ENUM(NCCL_GIN_CONNECTION_CUSTOM_STRIDE)
                                        SAME_ENUM(NCCL_GIN_TYPE_NONE) SAME_ENUM(NCCL_GIN_TYPE_PROXY) SAME_ENUM(
                                            NCCL_GIN_TYPE_GDAKI) SAME_ENUM(NCCL_GIN_TYPE_GPI)
                                            SAME_ENUM(NCCL_GIN_TYPE_EFA_GDA) SAME_ENUM(NCCL_GIN_MAX_TYPES) SAME_ENUM(
                                                NCCL_CFT_TEAM_FLAT) SAME_ENUM(NCCL_CFT_TEAM_HIER_MULTIMEM)
                                                SAME_ENUM(NCCL_CFT_TEAM_HIER_LSA)

// Every exported function: the parameter and return types of the list, resolved against NVIDIA's declarations
// (global scope), must select NVIDIA's function exactly. static_cast to a function-pointer type only compiles for
// an exact match (it also picks the host overload where nccl_device.h adds a C++ one).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit is deprecated in nccl.h
#define SAME_SIGNATURE(ret, name, params) \
  [[maybe_unused]] constexpr auto kSig_##name = static_cast<ret(*) params>(&::name);
#define SAME_P_SIGNATURE(ret, name, params) \
  [[maybe_unused]] constexpr auto kPSig_##name = static_cast<ret(*) params>(&::p##name);
                                                    HOCCL_NCCL_HOST_API_LIST(SAME_SIGNATURE)
                                                        HOCCL_NCCL_DEVICE_API_LIST(SAME_SIGNATURE)
                                                            HOCCL_NCCL_HOST_API_LIST(
                                                                SAME_P_SIGNATURE)  // nccl_device.h declares no p-names
// HOCCL_NCCL_UNDECLARED_API_LIST: NVIDIA declares those two for Windows builds only; nothing to compare with here.

#define COUNT_ONE(ret, name, params) +1
    constexpr int kListed = 0 HOCCL_NCCL_API_LIST(COUNT_ONE);
static_assert(kListed == 96, "NCCL 2.32.3 exports 96 weak nccl* names (plus ncclResetDebugInitInternal)");

int main() {
  std::printf("nccl_abi.h matches nccl.h %d.%d.%d: %d functions, every type, field and enumerator\n", NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH, kListed);
  std::printf("1 passed, 0 failed\n");
  return 0;
}
