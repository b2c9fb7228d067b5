/// @file shim_device_api.cc
/// The host side of NCCL's device API (nccl_device/*.h). Device communicators, barriers and LL all-to-all need
/// CUDA kernels, which this shim does not have: those calls fail with ncclInvalidUsage and a text. Teams are plain
/// arithmetic and are answered for what a host-only communicator is: every rank its own load/store-accessible
/// (LSA) team of one, so the rail team is the whole world.
#include <fmt/format.h>

#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

constexpr const char* kNoDeviceApi =
    "NCCL's device API needs CUDA kernels, and the CUDA path of hoccl is not built into this libnccl.so.2. Use the "
    "host collectives (ncclAllReduce, ...) or NVIDIA's libnccl.so.2.";

// The comm's size and rank, or {0, -1} (with a last-error text) for an invalid communicator.
ncclTeam_t worldOf(const char* fn, ncclComm_t comm) {
  ncclTeam_t t{0, -1, 1};
  const ncclResult_t r = guarded(fn, [&] {
    int n = 0, rank = 0;
    hocclComm_t h = toHoccl(comm);
    if (hocclCommCount(h, &n) != hocclSuccess || hocclCommUserRank(h, &rank) != hocclSuccess) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("invalid communicator {}: {}", static_cast<void*>(comm), hocclGetLastError(h)));
    }
    t = ncclTeam_t{n, rank, 1};
    return ncclSuccess;
  });
  (void)r;
  return t;
}

ncclResult_t noDeviceApi(const char* fn) {
  return guarded(fn, []() -> ncclResult_t { unsupported(kNoDeviceApi); });
}

}  // namespace

extern "C" {

ncclResult_t pncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  return noDeviceApi("ncclDevCommCreate");
}
HOCCL_NCCL_WEAK_ALIAS(ncclDevCommCreate)

ncclResult_t pncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) { return noDeviceApi("ncclDevCommDestroy"); }
HOCCL_NCCL_WEAK_ALIAS(ncclDevCommDestroy)

ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclLsaBarrierCreateRequirement");
}
HOCCL_NCCL_WEAK_ALIAS(ncclLsaBarrierCreateRequirement)

ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclGinBarrierCreateRequirement");
}
HOCCL_NCCL_WEAK_ALIAS(ncclGinBarrierCreateRequirement)

ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclLLA2ACreateRequirement");
}
HOCCL_NCCL_WEAK_ALIAS(ncclLLA2ACreateRequirement)

int pncclLLA2ACalcSlots(int, int) {
  // Returns a count, not a result: 0 slots, and the reason in ncclGetLastError.
  (void)noDeviceApi("ncclLLA2ACalcSlots");
  return 0;
}
HOCCL_NCCL_WEAK_ALIAS(ncclLLA2ACalcSlots)

ncclTeam_t pncclTeamWorld(ncclComm_t comm) { return worldOf("ncclTeamWorld", comm); }
HOCCL_NCCL_WEAK_ALIAS(ncclTeamWorld)

ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  const ncclTeam_t world = worldOf("ncclTeamLsa", comm);
  return world.rank < 0 ? world : ncclTeam_t{1, 0, 1};
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamLsa)

ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  // The outer factor of an LSA team of size 1: all ranks, stride 1.
  return worldOf("ncclTeamRail", comm);
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamRail)

int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  const ncclTeam_t world = worldOf("ncclTeamRankToWorld", comm);
  return world.rank + (rank - team.rank) * team.stride;
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamRankToWorld)

int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  (void)worldOf("ncclTeamRankToLsa", comm);
  return 0 + (rank - team.rank) * team.stride;  // this rank is rank 0 of its LSA team
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamRankToLsa)

}  // extern "C"
