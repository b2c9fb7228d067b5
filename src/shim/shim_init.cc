/// @file shim_init.cc
/// NCCL's communicator life cycle on top of hoccl: version, unique id, the init variants, split and shrink,
/// finalize/destroy/abort/revoke, queries, error strings and the last-error text.
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/params.h"
#include "shim/config.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

// With NCCL_COMM_ID (or HOCCL_COMM_ID) set, NCCL's ids only carry "use the fixed root address": every rank may call
// ncclGetUniqueId itself, and rank 0 serves the root at init. The shim marks such an id with this magic ("HOCE")
// and then creates the communicator with hocclCommInitRankFromEnv (which also needs HOCCL_/NCCL_AUTH_TOKEN).
constexpr uint32_t kEnvIdMagic = 0x484f4345u;

bool isEnvId(const ncclUniqueId& id) {
  uint32_t magic = 0;
  std::memcpy(&magic, id.internal, sizeof magic);
  return magic == kEnvIdMagic;
}

hocclUniqueId toHocclId(const ncclUniqueId& id) {
  hocclUniqueId h;
  static_assert(sizeof h == sizeof id, "same size");
  std::memcpy(&h, &id, sizeof h);
  return h;
}

void requireOut(const void* p, const char* what) {
  if (!p) throw hoccl::Error(hocclInvalidArgument, fmt::format("{} is NULL; pass the address of a variable", what));
}

ncclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config) {
  requireOut(comm, "comm (the output communicator)");
  hocclConfig_t cfg = translateConfig(config);
  hocclComm_t h = nullptr;
  hocclResult_t r;
  if (isEnvId(id)) {
    if (cfg.blocking == 0) HOCCL_INFO(kInit, "NCCL_COMM_ID init is blocking; config.blocking = 0 is not honoured");
    r = hocclCommInitRankFromEnv(&h, nranks, rank);
  } else {
    r = hocclCommInitRankConfig(&h, nranks, toHocclId(id), rank, &cfg);
  }
  *comm = toNccl(h);
  return fromHoccl(r);
}

}  // namespace

extern "C" {

ncclResult_t pncclGetVersion(int* version) {
  return guarded("ncclGetVersion", [&] {
    requireOut(version, "version");
    *version = HOCCL_NCCL_VERSION_CODE;  // the NCCL version whose API and ABI the shim implements
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetVersion)

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guarded("ncclGetUniqueId", [&] {
    requireOut(uniqueId, "uniqueId");
    if (const auto commId = hoccl::params::COMM_ID.value()) {
      std::memset(uniqueId, 0, sizeof *uniqueId);
      std::memcpy(uniqueId->internal, &kEnvIdMagic, sizeof kEnvIdMagic);
      std::snprintf(uniqueId->internal + 8, sizeof uniqueId->internal - 8, "COMM_ID=%s", commId->c_str());
      return ncclSuccess;
    }
    return fromHoccl(hocclGetUniqueId(reinterpret_cast<hocclUniqueId*>(uniqueId)));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetUniqueId)

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig", [&] { return initRank(comm, nranks, commId, rank, config); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommInitRankConfig)

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded("ncclCommInitRank", [&] { return initRank(comm, nranks, commId, rank, nullptr); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommInitRank)

ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config) {
  return guarded("ncclCommInitRankScalable", [&] {
    if (nId < 1 || !commIds) {
      throw hoccl::Error(hocclInvalidArgument, fmt::format("needs at least one unique id (nId = {}, commIds = {})", nId,
                                                           static_cast<const void*>(commIds)));
    }
    requireOut(newcomm, "newcomm (the output communicator)");
    bool env = false;
    for (int i = 0; i < nId; ++i) env |= isEnvId(commIds[i]);
    if (env || nId == 1) {
      // NCCL_COMM_ID ids only say "use the fixed root address": one root, whatever their number.
      if (env && nId > 1) HOCCL_INFO(kInit, "ncclCommInitRankScalable: NCCL_COMM_ID ids, one root for {} ids", nId);
      return initRank(newcomm, nranks, commIds[0], myrank, config);
    }
    // Every id is used: rank r joins id floor(r * nId / nranks), whose first rank created it (NCCL's rule).
    hocclConfig_t cfg = translateConfig(config);
    std::vector<hocclUniqueId> ids(static_cast<size_t>(nId));
    for (int i = 0; i < nId; ++i) ids[static_cast<size_t>(i)] = toHocclId(commIds[i]);
    hocclComm_t h = nullptr;
    const hocclResult_t r = hocclCommInitRankScalable(&h, nranks, myrank, nId, ids.data(), &cfg);
    *newcomm = toNccl(h);
    return fromHoccl(r);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommInitRankScalable)

ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&] {
    requireOut(comms, "comms (an array of ndev communicators)");
    return fromHoccl(hocclCommInitAll(reinterpret_cast<hocclComm_t*>(comms), ndev, devlist));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommInitAll)

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&] {
    requireOut(newcomm, "newcomm");
    // A null config inherits the parent's (hoccl does the same with a null config).
    hocclConfig_t cfg;
    if (config) cfg = translateConfig(config);
    hocclComm_t h = nullptr;
    const hocclResult_t r = hocclCommSplit(toHoccl(comm), color, key, &h, config ? &cfg : nullptr);
    *newcomm = toNccl(h);
    return fromHoccl(r, toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommSplit)

ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags) {
  return guarded("ncclCommShrink", [&] {
    requireOut(newcomm, "newcomm");
    if (shrinkFlags != HOCCL_NCCL_SHRINK_DEFAULT && shrinkFlags != HOCCL_NCCL_SHRINK_ABORT) {
      throw hoccl::Error(hocclInvalidArgument, fmt::format("unknown shrinkFlags {:#x}", shrinkFlags));
    }
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList)) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("excludeRanksCount is {} with excludeRanksList = {}", excludeRanksCount,
                                     static_cast<const void*>(excludeRanksList)));
    }
    if (excludeRanksCount > 0) {
      unsupported(fmt::format(
          "shrinking away {} rank(s) needs every rank of the parent to take part in hoccl's split, but excluded "
          "ranks do not call ncclCommShrink. If the excluded ranks are alive, call ncclCommSplit on every rank "
          "(NCCL_SPLIT_NOCOLOR on those to drop); after a failure, abort and create a new communicator with "
          "ncclCommInitRank on the survivors.",
          excludeRanksCount));
    }
    // Excluding nobody is a split of everyone into one communicator, in the same order.
    int rank = 0;
    if (const ncclResult_t r = fromHoccl(hocclCommUserRank(toHoccl(comm), &rank), toHoccl(comm)); r != ncclSuccess)
      return r;
    hocclConfig_t cfg;
    if (config) {
      cfg = translateConfig(config);
      cfg.splitShare = cfg.shrinkShare;  // a shrink shares its parent's connections by shrinkShare
    }
    hocclComm_t h = nullptr;
    const hocclResult_t r = hocclCommSplit(toHoccl(comm), 0, rank, &h, config ? &cfg : nullptr);
    *newcomm = toNccl(h);
    return fromHoccl(r, toHoccl(comm));
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommShrink)

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&] { return fromHoccl(hocclCommFinalize(toHoccl(comm)), toHoccl(comm)); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommFinalize)

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] {
    const ncclResult_t r = fromHoccl(hocclCommDestroy(toHoccl(comm)), toHoccl(comm));
    if (r == ncclSuccess) {
      dropRegistrations(comm);
      dropCommState(comm);
    }
    return r;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommDestroy)

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] {
    const ncclResult_t r = fromHoccl(hocclCommAbort(toHoccl(comm)), toHoccl(comm));
    if (r == ncclSuccess) {
      dropRegistrations(comm);
      dropCommState(comm);
    }
    return r;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommAbort)

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return guarded("ncclCommRevoke", [&]() -> ncclResult_t {
    (void)comm;
    (void)revokeFlags;
    unsupported(
        "hoccl cannot stop in-flight operations and keep the communicator for a later shrink. Use "
        "ncclCommAbort (safe from another thread, never blocks on a dead peer) and create a new "
        "communicator.");
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommRevoke)

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded("ncclCommGetAsyncError", [&] {
    requireOut(asyncError, "asyncError");
    hocclResult_t e = hocclSuccess;
    const ncclResult_t r = fromHoccl(hocclCommGetAsyncError(toHoccl(comm), &e), toHoccl(comm));
    if (r == ncclSuccess) {
      *asyncError = static_cast<ncclResult_t>(e);
      if (e != hocclSuccess && e != hocclInProgress) fromHoccl(e, toHoccl(comm));
    }
    return r;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommGetAsyncError)

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return guarded("ncclCommCount", [&] { return fromHoccl(hocclCommCount(toHoccl(comm), count), toHoccl(comm)); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommCount)

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guarded("ncclCommCuDevice",
                 [&] { return fromHoccl(hocclCommCuDevice(toHoccl(comm), device), toHoccl(comm)); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommCuDevice)

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded("ncclCommUserRank", [&] { return fromHoccl(hocclCommUserRank(toHoccl(comm), rank), toHoccl(comm)); });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommUserRank)

const char* pncclGetErrorString(ncclResult_t result) {
  // NCCL's own texts, word for word: frameworks match on them.
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "timeout";
    default: return "unknown result code";
  }
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetErrorString)

const char* pncclGetLastError(ncclComm_t comm) {
  (void)comm;  // as in NCCL, the text is the calling thread's last error, whatever the communicator
  return lastError();
}
HOCCL_NCCL_WEAK_ALIAS(ncclGetLastError)

void pncclResetDebugInit() {
  try {
    hoccl::log::resetFromEnvironment();
  } catch (...) {
    // Keeps the previous settings: a bad NCCL_DEBUG value must not throw through C.
  }
}
HOCCL_NCCL_WEAK_ALIAS(ncclResetDebugInit)

void ncclResetDebugInitInternal(void) { pncclResetDebugInit(); }

}  // extern "C"
