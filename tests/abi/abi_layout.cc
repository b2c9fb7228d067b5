/// @file abi_layout.cc
/// Proves at compile time that src/shim/nccl_abi.h is ABI-identical to NVIDIA's nccl.h 2.28.9 and
/// nccl_device/core.h: same sizes, alignments, field offsets and enumerator values for every type, the same
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
static_assert(std::is_same_v<std::underlying_type_t<ours::ncclRedOp_t>, std::underlying_type_t<::ncclRedOp_t>>);
static_assert(std::is_same_v<std::underlying_type_t<ours::ncclResult_t>, std::underlying_type_t<::ncclResult_t>>);

// Struct fields: same offset and same size.
#define SAME_FIELD(T, F)                                                                 \
  static_assert(offsetof(ours::T, F) == offsetof(::T, F), #T "." #F ": offset differs"); \
  static_assert(sizeof(ours::T::F) == sizeof(::T::F), #T "." #F ": size differs");
SAME_FIELD(ncclUniqueId, internal)
SAME_FIELD(ncclConfig_t, size)
SAME_FIELD(ncclConfig_t, magic) SAME_FIELD(ncclConfig_t, version) SAME_FIELD(ncclConfig_t, blocking)
    SAME_FIELD(ncclConfig_t, cgaClusterSize) SAME_FIELD(ncclConfig_t, minCTAs) SAME_FIELD(ncclConfig_t, maxCTAs)
        SAME_FIELD(ncclConfig_t, netName) SAME_FIELD(ncclConfig_t, splitShare) SAME_FIELD(ncclConfig_t, trafficClass)
            SAME_FIELD(ncclConfig_t, commName) SAME_FIELD(ncclConfig_t, collnetEnable)
                SAME_FIELD(ncclConfig_t, CTAPolicy) SAME_FIELD(ncclConfig_t, shrinkShare)
                    SAME_FIELD(ncclConfig_t, nvlsCTAs) SAME_FIELD(ncclConfig_t, nChannelsPerNetPeer)
                        SAME_FIELD(ncclConfig_t, nvlinkCentricSched) SAME_FIELD(ncclSimInfo_t, size)
                            SAME_FIELD(ncclSimInfo_t, magic) SAME_FIELD(ncclSimInfo_t, version)
                                SAME_FIELD(ncclSimInfo_t, estimatedTime) SAME_FIELD(ncclTeam_t, nRanks)
                                    SAME_FIELD(ncclTeam_t, rank) SAME_FIELD(ncclTeam_t, stride)

    // The magic numbers, read from NVIDIA's initializers.
    constexpr ::ncclConfig_t kNvConfig = NCCL_CONFIG_INITIALIZER;
static_assert(kNvConfig.magic == HOCCL_NCCL_CONFIG_MAGIC && kNvConfig.version == HOCCL_NCCL_VERSION_CODE);
constexpr ::ncclSimInfo_t kNvSim = NCCL_SIM_INFO_INITIALIZER;
static_assert(kNvSim.magic == HOCCL_NCCL_SIM_INFO_MAGIC);

// Every enumerator.
#define SAME_ENUM(E) static_assert(static_cast<long long>(ours::E) == static_cast<long long>(::E), #E);
SAME_ENUM(ncclSuccess)
SAME_ENUM(ncclUnhandledCudaError) SAME_ENUM(ncclSystemError) SAME_ENUM(ncclInternalError) SAME_ENUM(ncclInvalidArgument)
    SAME_ENUM(ncclInvalidUsage) SAME_ENUM(ncclRemoteError) SAME_ENUM(ncclInProgress) SAME_ENUM(ncclNumResults)
        SAME_ENUM(ncclSum) SAME_ENUM(ncclProd) SAME_ENUM(ncclMax) SAME_ENUM(ncclMin) SAME_ENUM(ncclAvg)
            SAME_ENUM(ncclNumOps) SAME_ENUM(ncclMaxRedOp) SAME_ENUM(ncclNumOps_dummy) SAME_ENUM(ncclInt8)
                SAME_ENUM(ncclChar) SAME_ENUM(ncclUint8) SAME_ENUM(ncclInt32) SAME_ENUM(ncclInt) SAME_ENUM(ncclUint32)
                    SAME_ENUM(ncclInt64) SAME_ENUM(ncclUint64) SAME_ENUM(ncclFloat16) SAME_ENUM(ncclHalf)
                        SAME_ENUM(ncclFloat32) SAME_ENUM(ncclFloat) SAME_ENUM(ncclFloat64) SAME_ENUM(ncclDouble)
                            SAME_ENUM(ncclBfloat16) SAME_ENUM(ncclFloat8e4m3) SAME_ENUM(ncclFloat8e5m2)
                                SAME_ENUM(ncclNumTypes) SAME_ENUM(ncclScalarDevice) SAME_ENUM(ncclScalarHostImmediate)

// Every exported function: the parameter and return types of the list, resolved against NVIDIA's declarations
// (global scope), must select NVIDIA's function exactly. static_cast to a function-pointer type only compiles for
// an exact match (it also picks the host overload where nccl_device.h adds a C++ one).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit is deprecated in nccl.h
#define SAME_SIGNATURE(ret, name, params) \
  [[maybe_unused]] constexpr auto kSig_##name = static_cast<ret(*) params>(&::name);
#define SAME_P_SIGNATURE(ret, name, params) \
  [[maybe_unused]] constexpr auto kPSig_##name = static_cast<ret(*) params>(&::p##name);
                                    HOCCL_NCCL_API_LIST(SAME_SIGNATURE)
                                        HOCCL_NCCL_HOST_API_LIST(SAME_P_SIGNATURE)  // nccl_device.h declares no p-names

#define COUNT_ONE(ret, name, params) +1
    constexpr int kListed = 0 HOCCL_NCCL_API_LIST(COUNT_ONE);
static_assert(kListed == 52, "NCCL 2.28.9 exports 52 weak nccl* names (plus ncclResetDebugInitInternal)");

int main() {
  std::printf("nccl_abi.h matches nccl.h %d.%d.%d: %d functions, every type, field and enumerator\n", NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH, kListed);
  std::printf("1 passed, 0 failed\n");
  return 0;
}
