/// @file shim_device_api.cc
/// The host side of NCCL's device API (nccl_device/*.h). Device communicators, barriers and LL all-to-all need
/// CUDA kernels, which this shim does not have: those calls fail with ncclInvalidUsage and a text. Teams are plain
/// arithmetic and are answered for what a host-only communicator is: every rank its own load/store-accessible
/// (LSA) team of one, so the rail team is the whole world; no CFT fabric, so the CFT teams are that team of one
/// too. A window's pointer for this rank (its LSA rank 0, or its own world rank) is the host address it was
/// registered with; a peer's, multimem and CFT addresses need GPU memory mappings and are refused. The one-sided
/// calls of nccl.h (ncclPutSignal, ncclSignal, ncclWaitSignal) are hoccl's host-memory ones (comm/one_sided.h):
/// between the ranks of one host, into windows of ncclMemAlloc memory; they run when called (host memory is not
/// stream-ordered: a non-null stream is synchronised first, as for the collectives).
#include <fmt/format.h>

#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

constexpr const char* kNoDeviceApi =
    "NCCL's device API needs NCCL's CUDA kernels, which hoccl does not have (its device path runs collectives from "
    "a host proxy thread). Use the collectives (ncclAllReduce, ...; device buffers work) or NVIDIA's libnccl.so.2.";

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

// The window behind win, which must belong to comm.
hocclWindow_t windowOfComm(ncclWindow_t win, ncclComm_t comm) {
  const WindowInfo w = windowInfo(win);
  if (w.comm != comm)
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("window {} belongs to communicator {}, not to {}", static_cast<void*>(win),
                                   static_cast<void*>(w.comm), static_cast<void*>(comm)));
  return w.hoccl;
}

constexpr const char* kNoMapping =
    "needs GPU memory mappings (a peer's window, multimem or the CFT fabric), which hoccl's host-memory "
    "libnccl.so.2 does not make. Only this rank's own address of a window is available (ncclWinGetUserPtr, "
    "ncclGetLsaDevicePointer with lsaRank 0).";

// The address `offset` bytes into this rank's own part of win.
ncclResult_t ownPointer(const char* fn, ncclWindow_t window, size_t offset, bool own, void** outPtr) {
  return guarded(fn, [&] {
    if (!outPtr) throw hoccl::Error(hocclInvalidArgument, "outPtr is NULL; pass the address of a void*");
    const WindowInfo w = windowInfo(window);
    if (!own) unsupported(std::string("another rank's window pointer ") + kNoMapping);
    if (offset > w.bytes) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("offset {} is past the end of the {}-byte window", offset, w.bytes));
    }
    *outPtr = static_cast<char*>(w.base) + offset;
    return ncclSuccess;
  });
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

ncclResult_t pncclGinOutboxCreateRequirement(int, int, struct ncclGinOutboxHandle*, ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclGinOutboxCreateRequirement");
}
HOCCL_NCCL_WEAK_ALIAS(ncclGinOutboxCreateRequirement)

ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, struct ncclGinInboxA2AHandle*,
                                               ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclGinInboxA2ACreateRequirement");
}
HOCCL_NCCL_WEAK_ALIAS(ncclGinInboxA2ACreateRequirement)

ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclPutSignal", [&] {
    requireNotSuspended(comm);
    const hocclWindow_t win = windowOfComm(peerWin, comm);
    requireHostBuffer("localbuff", localbuff);
    syncStream(stream);
    return fromHoccl(hocclPutSignal(localbuff, count, toHoccl(datatype), peer, win, peerWinOffset, sigIdx, ctx, flags,
                                    toHoccl(comm)),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclPutSignal)

ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclSignal", [&] {
    requireNotSuspended(comm);
    syncStream(stream);
    return fromHoccl(hocclSignal(peer, sigIdx, ctx, flags, toHoccl(comm)), toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclSignal)

ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  static_assert(sizeof(ncclWaitSignalDesc_t) == sizeof(hocclWaitSignalDesc_t), "same descriptor layout");
  return guarded("ncclWaitSignal", [&] {
    requireNotSuspended(comm);
    syncStream(stream);
    return fromHoccl(hocclWaitSignal(nDesc, reinterpret_cast<const hocclWaitSignalDesc_t*>(signalDescs), toHoccl(comm)),
                     toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclWaitSignal)

ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  // Each rank is its own LSA team: lsaRank 0 is this rank.
  return ownPointer("ncclGetLsaDevicePointer", window, offset, lsaRank == 0, outPtr);
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetLsaDevicePointer)

ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  bool own = false;
  (void)guarded("ncclGetPeerDevicePointer", [&] {
    const WindowInfo w = windowInfo(window);
    own = worldOf("ncclGetPeerDevicePointer", w.comm).rank == peer;
    return ncclSuccess;
  });
  return ownPointer("ncclGetPeerDevicePointer", window, offset, own, outPtr);
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetPeerDevicePointer)

ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return guarded("ncclGetLsaMultimemDevicePointer",
                 []() -> ncclResult_t { unsupported(std::string("a multimem pointer ") + kNoMapping); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetLsaMultimemDevicePointer)

ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t, void**) {
  return guarded("ncclGetMultimemDevicePointer",
                 []() -> ncclResult_t { unsupported(std::string("a multimem pointer ") + kNoMapping); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetMultimemDevicePointer)

ncclResult_t pncclGetMultimemDeviceLeInfo(ncclWindow_t, size_t, ncclCftLeId*, size_t*) {
  return guarded("ncclGetMultimemDeviceLeInfo",
                 []() -> ncclResult_t { unsupported(std::string("CFT LE information ") + kNoMapping); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetMultimemDeviceLeInfo)

ncclResult_t pncclGetCftDeviceLeInfo(ncclWindow_t, size_t, int, ncclTeam_t, ncclCftLeId*, size_t*) {
  return guarded("ncclGetCftDeviceLeInfo",
                 []() -> ncclResult_t { unsupported(std::string("CFT LE information ") + kNoMapping); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetCftDeviceLeInfo)

ncclResult_t pncclGetPeerDeviceLeInfo(ncclWindow_t, size_t, int, ncclCftLeId*, size_t*) {
  return guarded("ncclGetPeerDeviceLeInfo",
                 []() -> ncclResult_t { unsupported(std::string("CFT LE information ") + kNoMapping); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetPeerDeviceLeInfo)

ncclTeam_t pncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t) {
  const ncclTeam_t world = worldOf("ncclTeamCft", comm);
  return world.rank < 0 ? world : ncclTeam_t{1, 0, 1};
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamCft)

ncclTeam_t pncclTeamCftMultimem(ncclComm_t comm) {
  const ncclTeam_t world = worldOf("ncclTeamCftMultimem", comm);
  return world.rank < 0 ? world : ncclTeam_t{1, 0, 1};
}
HOCCL_NCCL_WEAK_ALIAS(ncclTeamCftMultimem)

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
