/// @file shim_comm_ext.cc
/// The communicator calls NCCL added after 2.28, answered for what a host-memory communicator is:
/// - ncclCommGetUniqueId + ncclCommGrow: the existing root draws a fresh hoccl id and hands it to the new ranks out
///   of band; inside ncclCommGrow the existing ranks learn it from the root with one all-gather on the old
///   communicator, and then everybody (old ranks keeping their rank, new ranks at their assigned one) creates the
///   grown communicator from that id. Each id is used once; a second id while one is pending is refused.
/// - ncclCommSuspend / ncclCommResume: a suspended communicator refuses data-moving calls until it is resumed. hoccl
///   holds no GPU memory, so there is nothing to release; ncclCommMemStats reports 0 bytes and the suspended flag.
/// - ncclCommQueryProperties: rank, size and device of the communicator; every GPU capability false.
/// - ncclSetEncryption: hoccl does not encrypt its data traffic, so a request for encryption is refused.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "shim/config.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

/// What the shim remembers of one communicator beyond hoccl's own state.
struct CommState {
  bool suspended = false;
  bool idPending = false;    ///< ncclCommGetUniqueId gave an id that no grow has consumed yet
  ncclUniqueId pendingId{};  ///< that id
};

struct StateTable {
  std::mutex mu;
  std::map<ncclComm_t, CommState> byComm;
  std::atomic<int> suspended{0};  ///< suspended communicators: lets every collective skip the lookup when 0
};

StateTable& table() {
  static StateTable* t = new StateTable;  // never destroyed: calls may come from other libraries' destructors
  return *t;
}

void requireOut(const void* p, const char* what) {
  if (!p) throw hoccl::Error(hocclInvalidArgument, fmt::format("{} is NULL; pass the address of a variable", what));
}

// Size and rank of a live communicator, or an InvalidArgument naming it.
std::pair<int, int> sizeAndRank(ncclComm_t comm) {
  int n = 0, rank = 0;
  hocclComm_t h = toHoccl(comm);
  if (hocclCommCount(h, &n) != hocclSuccess || hocclCommUserRank(h, &rank) != hocclSuccess) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("invalid communicator {}: {}", static_cast<void*>(comm), hocclGetLastError(h)));
  }
  return {n, rank};
}

/// What each existing rank contributes to the grow's all-gather.
struct GrowEntry {
  int32_t hasId;
  char id[sizeof(ncclUniqueId)];
};

}  // namespace

namespace hoccl::shim {

void requireNotSuspended(ncclComm_t comm) {
  StateTable& t = table();
  if (t.suspended.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.byComm.find(comm);
  if (it != t.byComm.end() && it->second.suspended) {
    throw Error(hocclInvalidUsage, fmt::format("communicator {} is suspended (ncclCommSuspend); call ncclCommResume "
                                               "before using it",
                                               static_cast<void*>(comm)));
  }
}

void dropCommState(ncclComm_t comm) {
  StateTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.byComm.find(comm);
  if (it == t.byComm.end()) return;
  if (it->second.suspended) t.suspended.fetch_sub(1, std::memory_order_release);
  t.byComm.erase(it);
}

}  // namespace hoccl::shim

extern "C" {

ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return guarded("ncclCommGetUniqueId", [&] {
    requireOut(uniqueId, "uniqueId");
    (void)sizeAndRank(comm);
    StateTable& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    CommState& s = t.byComm[comm];
    if (s.idPending) {
      throw hoccl::Error(hocclInvalidUsage,
                         "this communicator already handed out a unique id that no ncclCommGrow has used yet; grow "
                         "with that id first (each id serves one grow)");
    }
    ncclUniqueId id;
    if (const ncclResult_t r = fromHoccl(hocclGetUniqueId(reinterpret_cast<hocclUniqueId*>(&id))); r != ncclSuccess)
      return r;
    s.idPending = true;
    s.pendingId = id;
    *uniqueId = id;
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommGetUniqueId)

ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  return guarded("ncclCommGrow", [&] {
    requireOut(newcomm, "newcomm");
    hocclConfig_t cfg = translateConfig(config);
    ncclUniqueId id;
    int newRank = rank;
    if (!comm) {
      // A new rank: it was given the id and its rank.
      if (!uniqueId) {
        throw hoccl::Error(hocclInvalidArgument,
                           "a new rank (comm = NULL) needs the unique id that the existing root got from "
                           "ncclCommGetUniqueId");
      }
      if (rank < 0 || rank >= nRanks) {
        throw hoccl::Error(hocclInvalidArgument,
                           fmt::format("rank {} of a new rank is outside 0..{}", rank, nRanks - 1));
      }
      id = *uniqueId;
    } else {
      const auto [n, myRank] = sizeAndRank(comm);
      if (rank != -1) {
        throw hoccl::Error(hocclInvalidArgument,
                           fmt::format("an existing rank passes rank = -1 (it keeps its rank {}), not {}", myRank,
                                       rank));
      }
      if (nRanks <= n) {
        throw hoccl::Error(hocclInvalidArgument,
                           fmt::format("nRanks {} does not grow the communicator of {} ranks", nRanks, n));
      }
      requireNotSuspended(comm);
      // One all-gather on the old communicator tells every existing rank the root's id.
      std::vector<GrowEntry> all(static_cast<size_t>(n));
      GrowEntry mine{};
      mine.hasId = uniqueId ? 1 : 0;
      if (uniqueId) std::memcpy(mine.id, uniqueId, sizeof mine.id);
      if (const ncclResult_t r = fromHoccl(hocclAllGather(&mine, all.data(), sizeof mine, hocclUint8, toHoccl(comm),
                                                          nullptr),
                                           toHoccl(comm));
          r != ncclSuccess)
        return r;
      const auto root = std::find_if(all.begin(), all.end(), [](const GrowEntry& e) { return e.hasId != 0; });
      if (root == all.end()) {
        throw hoccl::Error(hocclInvalidUsage,
                           "no existing rank passed a unique id: the root (the rank that called "
                           "ncclCommGetUniqueId) passes it, the other existing ranks pass NULL");
      }
      std::memcpy(&id, root->id, sizeof id);
      if (uniqueId) {
        // The root consumes its pending id.
        StateTable& t = table();
        std::lock_guard<std::mutex> lock(t.mu);
        CommState& s = t.byComm[comm];
        if (!s.idPending || std::memcmp(&s.pendingId, uniqueId, sizeof id) != 0) {
          throw hoccl::Error(hocclInvalidArgument,
                             "uniqueId is not the pending id of this communicator: get it from "
                             "ncclCommGetUniqueId on this communicator (each id serves one grow)");
        }
        s.idPending = false;
      }
      newRank = myRank;
    }
    hocclComm_t h = nullptr;
    const hocclResult_t r = hocclCommInitRankConfig(&h, nRanks, *reinterpret_cast<const hocclUniqueId*>(&id), newRank,
                                                    &cfg);
    *newcomm = toNccl(h);
    return fromHoccl(r);
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommGrow)

ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  return guarded("ncclCommSuspend", [&] {
    (void)sizeAndRank(comm);
    if (flags & ~HOCCL_NCCL_SUSPEND_MEM) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("unknown flags {:#x} (NCCL_SUSPEND_MEM = 0x1 is the only one)", flags));
    }
    StateTable& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    CommState& s = t.byComm[comm];
    if (s.suspended) throw hoccl::Error(hocclInvalidUsage, "the communicator is suspended already");
    s.suspended = true;
    t.suspended.fetch_add(1, std::memory_order_release);
    // hoccl holds no GPU memory: NCCL_SUSPEND_MEM has nothing to release.
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommSuspend)

ncclResult_t pncclCommResume(ncclComm_t comm) {
  return guarded("ncclCommResume", [&] {
    (void)sizeAndRank(comm);
    StateTable& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.byComm.find(comm);
    if (it == t.byComm.end() || !it->second.suspended) {
      throw hoccl::Error(hocclInvalidUsage, "the communicator is not suspended (call ncclCommSuspend first)");
    }
    it->second.suspended = false;
    t.suspended.fetch_sub(1, std::memory_order_release);
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommResume)

ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return guarded("ncclCommMemStats", [&] {
    requireOut(value, "value");
    (void)sizeAndRank(comm);
    bool suspended = false;
    {
      StateTable& t = table();
      std::lock_guard<std::mutex> lock(t.mu);
      auto it = t.byComm.find(comm);
      suspended = it != t.byComm.end() && it->second.suspended;
    }
    switch (stat) {
      // hoccl's communicator allocates host memory only: no GPU bytes, suspendable or not.
      case ncclStatGpuMemSuspend:
      case ncclStatGpuMemPersist:
      case ncclStatGpuMemTotal: *value = 0; break;
      case ncclStatGpuMemSuspended: *value = suspended ? 1 : 0; break;
      default:
        throw hoccl::Error(hocclInvalidArgument,
                           fmt::format("unknown stat {} (ncclStatGpuMemSuspend .. ncclStatGpuMemTotal = 0..3)",
                                       static_cast<int>(stat)));
    }
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommMemStats)

ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  return guarded("ncclCommQueryProperties", [&] {
    requireOut(props, "props");
    constexpr size_t kHeader = offsetof(ncclCommProperties_t, rank);
    ncclCommProperties_t head;
    std::memcpy(&head, props, kHeader);
    if (head.magic != HOCCL_NCCL_CONFIG_MAGIC || head.size < kHeader) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("ncclCommProperties_t has magic {:#x} and size {}: set it up with "
                                     "NCCL_COMM_PROPERTIES_INITIALIZER",
                                     head.magic, head.size));
    }
    const auto [n, rank] = sizeAndRank(comm);
    ncclCommProperties_t p;
    std::memset(&p, 0, sizeof p);
    p.rank = rank;
    p.nRanks = n;
    int dev = -1;
    if (hocclCommCuDevice(toHoccl(comm), &dev) != hocclSuccess) dev = -1;
    p.cudaDev = dev;
    p.nvmlDev = -1;
    // No device API, multimem, GIN, host RMA or CFT: this libnccl.so.2 has no GPU path. Each rank is its own
    // load/store team (as ncclTeamLsa answers), so there are nRanks LSA teams.
    p.ginType = NCCL_GIN_TYPE_NONE;
    p.railedGinType = NCCL_GIN_TYPE_NONE;
    p.nLsaTeams = n;
    p.ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    p.commHash = 0;  // hoccl keeps no communicator hash
    const size_t bytes = std::min(head.size, sizeof p);
    std::memcpy(reinterpret_cast<char*>(props) + kHeader, reinterpret_cast<const char*>(&p) + kHeader, bytes - kHeader);
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommQueryProperties)

ncclResult_t pncclSetEncryption(const ncclEncryptionConfig_t* config) {
  return guarded("ncclSetEncryption", [&] {
    requireOut(config, "config");
    constexpr size_t kHeader = offsetof(ncclEncryptionConfig_t, mode);
    ncclEncryptionConfig_t c;
    std::memset(&c, 0, sizeof c);
    std::memcpy(&c, config, kHeader);
    if (c.magic != HOCCL_NCCL_CONFIG_MAGIC || c.size < kHeader + sizeof(int)) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("ncclEncryptionConfig_t has magic {:#x} and size {}: set it up with "
                                     "NCCL_ENCRYPTION_CONFIG_INITIALIZER",
                                     c.magic, c.size));
    }
    std::memcpy(&c, config, std::min(c.size, sizeof c));
    if (c.mode == NCCL_ENCRYPTION_MODE_NONE) {
      HOCCL_INFO(kInit, "ncclSetEncryption: mode NONE, and hoccl's traffic is plaintext anyway");
      return ncclSuccess;
    }
    if (c.mode != NCCL_ENCRYPTION_MODE_PSK) {
      throw hoccl::Error(hocclInvalidArgument, fmt::format("unknown encryption mode {}", c.mode));
    }
    unsupported(
        "hoccl does not encrypt its traffic: the bootstrap is authenticated (the unique id's secret, "
        "HOCCL_AUTH_TOKEN), but collective data crosses tcp and shared memory in plaintext. Run the job on an "
        "encrypted network (WireGuard, IPsec), or use NVIDIA's libnccl.so.2 built with TLS.");
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclSetEncryption)

}  // extern "C"
