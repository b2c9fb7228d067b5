// Communicator life cycle at the C edge: ids, init (blocking and not), split, finalize, destroy, abort, queries.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "comm/overlap.h"
#include "comm/proxy.h"
#include "kernels/device/device.h"
#include "comm/launcher_env.h"
#include "comm/launcher_root.h"
#include "base/log.h"
#include "base/params.h"

using namespace hoccl;
using hoccl::api::guarded;
using hoccl::api::liveComm;

namespace {

// Reads the caller's config the way NCCL does: by its size, rejecting a wrong magic. Returns blocking mode and name.
struct ConfigView {
  bool blocking = true;
  bool blockingSet = false;  // the caller chose (else a split inherits its parent's mode, as in NCCL)
  std::string name;
  int splitShare = -1;  // config.splitShare: 0 or 1; -1 unset (HOCCL_COMM_SPLIT_SHARE_RESOURCES decides)
};

ConfigView readConfig(const hocclConfig_t* config) {
  ConfigView v;
  if (!config) return v;
  if (config->magic != HOCCL_CONFIG_MAGIC)
    throwInvalidArgument("config->magic is wrong: initialize the config with HOCCL_CONFIG_INITIALIZER");
  hocclConfig_t c = HOCCL_CONFIG_INITIALIZER;
  std::memcpy(&c, config, std::min(config->size, sizeof(c)));
  if (c.blocking != HOCCL_CONFIG_UNDEF_INT) {
    if (c.blocking != 0 && c.blocking != 1) throwInvalidArgument("config->blocking must be 0 or 1");
    v.blocking = c.blocking == 1;
    v.blockingSet = true;
  }
  if (config->size >= offsetof(hocclConfig_t, commName) + sizeof(const char*) && c.commName) v.name = c.commName;
  if (c.splitShare != HOCCL_CONFIG_UNDEF_INT) {
    if (c.splitShare != 0 && c.splitShare != 1) throwInvalidArgument("config->splitShare must be 0 or 1");
    v.splitShare = c.splitShare;
  }
  return v;
}

void checkRankArgs(hocclComm_t* comm, int nranks, int rank) {
  if (!comm) throwInvalidArgument("comm (the output pointer) is NULL");
  if (nranks < 1) throwInvalidArgument("nranks is " + std::to_string(nranks) + "; it must be at least 1");
  if (rank < 0 || rank >= nranks)
    throwInvalidArgument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
}

// Creates the communicator of a handle whose initResult is hocclInProgress, in the calling (helper) thread, and
// publishes the outcome. A handle aborted meanwhile gets nothing: the new communicator is destroyed at once (it says
// goodbye to the root, so the other ranks go on).
void finishInit(hocclComm_t handle, const boot::Contact& id, int rank, int nranks, const std::string& name,
                const ConnectionLender& lender = {}) {
  std::unique_ptr<Communicator> made;
  int code = hocclSuccess;
  try {
    made = std::make_unique<Communicator>(id, rank, nranks, name, lender);
  } catch (const Error& e) {
    handle->initError = e.what();
    code = e.code();
  } catch (const std::exception& e) {
    handle->initError = e.what();
    code = hocclInternalError;
  }
  std::lock_guard<std::mutex> lock(handle->life);
  if (handle->stamp.load() == hocclComm::kDead) return;  // aborted while initializing: `made` goes now
  handle->impl = std::move(made);
  handle->initResult = code;
}

// Creates the handle and the communicator, in this thread (blocking) or in a helper thread (non-blocking).
hocclResult_t initHandle(hocclComm_t* out, const boot::Contact& id, int rank, int nranks, const ConfigView& cfg,
                         const ConnectionLender& lender = {}) {
  auto* handle = new hocclComm();
  handle->blocking = cfg.blocking;
  if (cfg.blocking) {
    try {
      handle->impl = std::make_unique<Communicator>(id, rank, nranks, cfg.name, lender);
    } catch (...) {
      delete handle;
      throw;
    }
    *out = handle;
    return hocclSuccess;
  }
  handle->initResult = hocclInProgress;
  *out = handle;
  std::thread([handle, id, rank, nranks, name = cfg.name, lender] {
    finishInit(handle, id, rank, nranks, name, lender);
  }).detach();
  return hocclInProgress;
}

// Runs `work` on a helper thread for a non-blocking operation of `handle` (split, finalize): handle->pending is
// hocclInProgress until it ends, then its result. Handles are never freed (see retire), so the thread may outlive
// a destroy.
template <class Work>
void inBackground(hocclComm_t handle, Work work) {
  handle->pending = hocclInProgress;
  std::thread([handle, work = std::move(work)]() mutable {
    int code = hocclSuccess;
    try {
      work();
    } catch (const Error& e) {
      handle->pendingError = e.what();
      code = e.code();
    } catch (const std::exception& e) {
      handle->pendingError = e.what();
      code = hocclInternalError;
    }
    int expected = hocclInProgress;
    handle->pending.compare_exchange_strong(expected, code);  // work may have finished it already
  }).detach();
}

// Waits (bounded) until a non-blocking split / finalize of comm has ended; after an abort it ends within a
// bootstrap round trip.
void awaitPending(hocclComm_t comm, std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (comm->pending.load() == hocclInProgress && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Marks a handle dead and frees its communicator. The small handle itself is kept so that later use is reported;
// this list keeps it reachable (so that a leak checker sees it kept on purpose, not lost).
void retire(hocclComm_t comm) {
  static std::mutex mutex;
  static auto* retired = new std::vector<hocclComm_t>;  // never destroyed: handles may be used until exit
  comm->stamp = hocclComm::kDead;
  comm->impl.reset();
  std::lock_guard<std::mutex> lock(mutex);
  retired->push_back(comm);
}

}  // namespace

extern "C" {

hocclResult_t hocclGetVersion(int* version) {
  return guarded("hocclGetVersion", [&] {
    if (!version) throwInvalidArgument("version is NULL");
    *version = HOCCL_VERSION_CODE;
    return hocclSuccess;
  });
}

hocclResult_t hocclGetUniqueId(hocclUniqueId* uniqueId) {
  return guarded("hocclGetUniqueId", [&] {
    if (!uniqueId) throwInvalidArgument("uniqueId is NULL");
    *uniqueId = boot::encode(boot::createUniqueId());
    return hocclSuccess;
  });
}

hocclResult_t hocclCommInitRankConfig(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank,
                                      hocclConfig_t* config) {
  return guarded("hocclCommInitRankConfig", [&] {
    checkRankArgs(comm, nranks, rank);
    ConfigView cfg = readConfig(config);
    return initHandle(comm, boot::decode(commId), rank, nranks, cfg);
  });
}

hocclResult_t hocclCommInitRankScalable(hocclComm_t* comm, int nranks, int rank, int nIds, hocclUniqueId* commIds,
                                        hocclConfig_t* config) {
  return guarded("hocclCommInitRankScalable", [&] {
    checkRankArgs(comm, nranks, rank);
    if (nIds < 1 || !commIds)
      throwInvalidArgument(fmt::format("needs at least one unique id (nIds = {}, commIds = {})", nIds,
                                       static_cast<const void*>(commIds)));
    if (nIds > nranks)
      throwInvalidArgument(
          fmt::format("nIds = {} is more than nranks = {}: every id needs at least one rank (rank r "
                      "joins id floor(r * nIds / nranks))",
                      nIds, nranks));
    ConfigView cfg = readConfig(config);
    const boot::Share share = boot::shareOf(rank, nranks, nIds);
    const boot::UniqueId job = boot::decode(commIds[0]);
    const boot::UniqueId root = share.idIndex == 0 ? job : boot::decode(commIds[share.idIndex]);
    return initHandle(comm, boot::Contact(root, job, share), rank, nranks, cfg);
  });
}

hocclResult_t hocclCommInitRank(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank) {
  return hocclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

hocclResult_t hocclCommInitRankFromEnv(hocclComm_t* comm, int nranks, int rank) {
  return guarded("hocclCommInitRankFromEnv", [&] {
    checkRankArgs(comm, nranks, rank);
    return initHandle(comm, launcherUniqueId(rank, nranks), rank, nranks, ConfigView{});
  });
}

hocclResult_t hocclCommInitFromEnv(hocclComm_t* comm, int* rank, int* nranks) {
  return guarded("hocclCommInitFromEnv", [&] {
    auto lr = launcherRank();
    if (!lr)
      throwInvalidUsage(
          "no rank/size in the environment: set HOCCL_RANK and HOCCL_WORLD_SIZE (or run under "
          "hoccl-run, torchrun, mpirun, mpiexec or srun; docs/launchers.md)");
    checkRankArgs(comm, lr->size, lr->rank);
    hocclResult_t r = initHandle(comm, launcherUniqueId(lr->rank, lr->size), lr->rank, lr->size, ConfigView{});
    if (rank) *rank = lr->rank;
    if (nranks) *nranks = lr->size;
    return r;
  });
}

hocclResult_t hocclGetLauncherRank(int* rank, int* nranks, int* localRank, int* localSize, const char** launcher) {
  return guarded("hocclGetLauncherRank", [&] {
    auto info = detectLauncher();
    static thread_local std::string name;  // the string handed out stays valid until this thread's next call
    name = info ? info->launcher : "";
    if (rank) *rank = info ? info->rank : 0;
    if (nranks) *nranks = info ? info->size : 0;
    if (localRank) *localRank = info ? info->localRank : -1;
    if (localSize) *localSize = info ? info->localSize : -1;
    if (launcher) *launcher = info ? name.c_str() : nullptr;
    return hocclSuccess;
  });
}

hocclResult_t hocclCommInitAll(hocclComm_t* comms, int ndev, const int* devlist) {
  return guarded("hocclCommInitAll", [&] {
    if (!comms) throwInvalidArgument("comms is NULL");
    if (ndev < 1) throwInvalidArgument("ndev is " + std::to_string(ndev) + "; it must be at least 1");
    (void)devlist;  // host memory: device numbers do not matter
    boot::UniqueId id = boot::createUniqueId();
    std::vector<hocclResult_t> results(ndev, hocclSuccess);
    std::vector<std::string> errors(ndev);
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      threads.emplace_back([&, r] {
        results[r] = guarded("hocclCommInitAll", [&] { return initHandle(&comms[r], id, r, ndev, ConfigView{}); });
        if (results[r] != hocclSuccess) errors[r] = hocclGetLastError(nullptr);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] != hocclSuccess) {
        for (int q = 0; q < ndev; ++q)
          if (results[q] == hocclSuccess) {
            retire(comms[q]);
            comms[q] = nullptr;
          }
        throw Error(results[r], "rank " + std::to_string(r) + ": " + errors[r]);
      }
    }
    return hocclSuccess;
  });
}

hocclResult_t hocclCommSplit(hocclComm_t comm, int color, int key, hocclComm_t* newcomm, hocclConfig_t* config) {
  return guarded("hocclCommSplit", [&] {
    Communicator& parent = liveComm(comm);
    if (!newcomm) throwInvalidArgument("newcomm is NULL");
    if (color < 0 && color != HOCCL_SPLIT_NOCOLOR)
      throwInvalidArgument("color " + std::to_string(color) + " is negative; use a color >= 0 or HOCCL_SPLIT_NOCOLOR");
    ConfigView cfg = readConfig(config);
    if (!cfg.blockingSet) cfg.blocking = comm->blocking;
    // Whether this rank wishes to share the parent's connections (comm/connection_share.cc); the members agree below.
    const bool shareWish = (cfg.splitShare >= 0 ? cfg.splitShare == 1
                                                : params::COMM_SPLIT_SHARE_RESOURCES.get() == 1) &&
                           params::MAX_CONNS.get() == 0;
    std::shared_ptr<Communicator> parentShared = comm->impl;
    // The two rounds over the parent's bootstrap, then the new communicator's init; returns its new rank and size
    // (nranks 0: this rank has no color) and, when every member wishes to share, the connections' lender.
    auto rounds =
        [&parent, parentShared, color, key, shareWish](hocclUniqueId* newId, int* newRank, ConnectionLender* lender) {
      const int n = parent.nranks();
      // Round 1: everybody's color, key and wish to share connections.
      struct Entry {
        int32_t color, key, share;
      };
      std::vector<Entry> entries(n);
      entries[parent.rank()] = {color, key, shareWish ? 1 : 0};
      parent.bootstrap().allGather(entries.data(), sizeof(Entry));
      std::vector<int> members;
      for (int r = 0; r < n; ++r)
        if (entries[r].color == color) members.push_back(r);
      std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return entries[a].key < entries[b].key; });
      bool share = color != HOCCL_SPLIT_NOCOLOR;
      for (int r : members) share &= entries[r].share == 1;
      if (share) {  // the owner of the parent's connections lends them, in its rank numbers
        const ConnectionLender& up = parent.lender();
        lender->owner = up.owner ? up.owner : parentShared;
        for (int r : members) lender->ownerRank.push_back(up.owner ? up.ownerRank[static_cast<size_t>(r)] : r);
      }
      // Round 2: the first member of each color publishes a fresh id.
      std::vector<hocclUniqueId> ids(n);
      bool leader = color != HOCCL_SPLIT_NOCOLOR && members.front() == parent.rank();
      if (leader) ids[parent.rank()] = boot::encode(boot::createUniqueId());
      parent.bootstrap().allGather(ids.data(), sizeof(hocclUniqueId));
      if (color == HOCCL_SPLIT_NOCOLOR) return 0;
      *newId = ids[members.front()];
      *newRank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
      return static_cast<int>(members.size());
    };
    hocclUniqueId newId{};
    int newRank = 0;
    if (cfg.blocking) {
      ConnectionLender lender;
      int size = rounds(&newId, &newRank, &lender);
      if (size == 0) {
        *newcomm = nullptr;
        return hocclSuccess;
      }
      return initHandle(newcomm, boot::decode(newId), newRank, size, cfg, lender);
    }
    // Non-blocking: the parent is busy (pending) until the rounds are over, the new handle initializes after them;
    // both report through hocclCommGetAsyncError.
    hocclComm_t child = nullptr;
    if (color != HOCCL_SPLIT_NOCOLOR) {
      child = new hocclComm();
      child->blocking = false;
      child->initResult = hocclInProgress;
    }
    inBackground(comm, [comm, child, rounds, name = cfg.name]() mutable {
      hocclUniqueId id{};
      int rank = 0, size = 0;
      ConnectionLender lender;
      try {
        size = rounds(&id, &rank, &lender);
      } catch (const Error& e) {
        if (child) {
          child->initError = std::string("the split on the parent communicator failed: ") + e.what();
          child->initResult = e.code();
        }
        throw;
      }
      comm->pending = hocclSuccess;  // the parent is free again; the new communicator's init goes on here
      if (child) finishInit(child, boot::decode(id), rank, size, name, lender);
    });
    *newcomm = child;
    return hocclInProgress;
  });
}

hocclResult_t hocclCommFinalize(hocclComm_t comm) {
  return guarded("hocclCommFinalize", [&] {
    Communicator& c = liveComm(comm);
    hoccl::overlap::checkIdle(c);  // not while a callback or a background ring shift owns it (overlap track)
    auto finish = [&c] {
      if (hoccl::Proxy* p = c.proxyIfAny()) {  // the stream-ordered operations complete first
        p->drain();
        p->throwIfFailed();
      }
      c.bootstrap().barrier();
    };
    if (comm->blocking) {
      finish();
      return hocclSuccess;
    }
    inBackground(comm, finish);
    return hocclInProgress;
  });
}

hocclResult_t hocclCommDestroy(hocclComm_t comm) {
  return guarded("hocclCommDestroy", [&] {
    if (!comm) return hocclSuccess;  // as NCCL: destroying NULL is a no-op
    if (comm->stamp.load() == hocclComm::kDead) throwInvalidUsage("comm was already destroyed (double destroy)");
    if (comm->initResult.load() == hocclInProgress || comm->pending.load() == hocclInProgress)
      throwInvalidUsage(
          "comm is still initializing, splitting or finalizing (non-blocking): wait for hocclCommGetAsyncError to "
          "leave hocclInProgress, or call hocclCommAbort");
    if (comm->impl) hoccl::overlap::checkIdle(*comm->impl);  // overlap track: no destroy under a running ring shift
    retire(comm);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommAbort(hocclComm_t comm) {
  return guarded("hocclCommAbort", [&] {
    if (!comm) return hocclSuccess;
    if (comm->stamp.load() == hocclComm::kDead) return hocclSuccess;
    // A non-blocking init still running cannot be interrupted safely (it ends within HOCCL_TIMEOUT): mark the handle
    // dead so nothing new starts on it; the init thread then destroys what it made (finishInit).
    {
      std::lock_guard<std::mutex> lock(comm->life);
      if (comm->initResult.load() == hocclInProgress) {
        comm->stamp = hocclComm::kDead;
        return hocclSuccess;
      }
    }
    if (comm->impl) {
      Health& health = comm->impl->health();
      health.abort();
      // Every other rank learns it through the bootstrap root and leaves its waits (unless the communicator had
      // already failed: then they know the culprit, and this abort is only the clean-up after it).
      if (!health.failed()) comm->impl->bootstrap().reportAbort();
      // Operations on other threads notice the flag within a millisecond and leave.
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (comm->impl->inFlight.load() > 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // A non-blocking split / finalize waits in a bootstrap round that the abort has just failed.
      awaitPending(comm, std::chrono::seconds(10));
    }
    retire(comm);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommGetAsyncError(hocclComm_t comm, hocclResult_t* asyncError) {
  return guarded("hocclCommGetAsyncError", [&] {
    if (!asyncError) throwInvalidArgument("asyncError is NULL");
    if (!comm) throwInvalidArgument("comm is NULL");
    if (comm->stamp.load() == hocclComm::kDead) throwInvalidUsage("comm was already destroyed or aborted");
    int init = comm->initResult.load();
    if (init != hocclSuccess) {
      if (init != hocclInProgress) api::setLastError("hocclCommGetAsyncError: init failed: " + comm->initError);
      *asyncError = static_cast<hocclResult_t>(init);
      return hocclSuccess;
    }
    int pending = comm->pending.load();
    if (pending != hocclSuccess) {
      if (pending != hocclInProgress)
        api::setLastError("hocclCommGetAsyncError: a non-blocking split / finalize failed: " + comm->pendingError);
      *asyncError = static_cast<hocclResult_t>(pending);
      return hocclSuccess;
    }
    Communicator& c = *comm->impl;
    if (c.asyncError.load() == hocclSuccess && c.health().failed()) {  // another rank failed: an idle rank learns it
      int expected = hocclSuccess;
      c.asyncError.compare_exchange_strong(expected, hocclRemoteError);
      api::setLastError("hocclCommGetAsyncError: " + c.describe() + ": " + c.health().failure());
    }
    if (hoccl::Proxy* p = c.proxyIfAny(); p && !p->failure().empty())
      api::setLastError("hocclCommGetAsyncError: " + c.describe() +
                        ": a stream-ordered operation failed: " + p->failure());
    *asyncError = static_cast<hocclResult_t>(c.asyncError.load());
    return hocclSuccess;
  });
}

hocclResult_t hocclCommCount(const hocclComm_t comm, int* count) {
  return guarded("hocclCommCount", [&] {
    if (!count) throwInvalidArgument("count is NULL");
    *count = liveComm(comm, true).nranks();
    return hocclSuccess;
  });
}

hocclResult_t hocclCommCuDevice(const hocclComm_t comm, int* device) {
  return guarded("hocclCommCuDevice", [&] {
    if (!device) throwInvalidArgument("device is NULL");
    liveComm(comm, true);
    hoccl::device::Device* d = hoccl::device::current();
    *device = d ? d->ordinal() : -1;
    return hocclSuccess;
  });
}

hocclResult_t hocclCommUserRank(const hocclComm_t comm, int* rank) {
  return guarded("hocclCommUserRank", [&] {
    if (!rank) throwInvalidArgument("rank is NULL");
    *rank = liveComm(comm, true).rank();
    return hocclSuccess;
  });
}

hocclResult_t hocclCommGetCounters(hocclComm_t comm, hocclCommCounters_t* counters) {
  return guarded("hocclCommGetCounters", [&] {
    if (!counters) throwInvalidArgument("counters is NULL");
    ByteCounters& c = liveComm(comm, true).counters();
    for (int k = 0; k < hocclNumLinkClasses; ++k) {
      counters->bytesSent[k] = c.sent[k].load();
      counters->bytesReceived[k] = c.received[k].load();
    }
    return hocclSuccess;
  });
}

hocclResult_t hocclCommResetCounters(hocclComm_t comm) {
  return guarded("hocclCommResetCounters", [&] {
    ByteCounters& c = liveComm(comm, true).counters();
    for (int k = 0; k < hocclNumLinkClasses; ++k) {
      c.sent[k] = 0;
      c.received[k] = 0;
    }
    return hocclSuccess;
  });
}

hocclResult_t hocclCommRankLocation(hocclComm_t comm, int rank, int* hostIndex, int* switchIndex) {
  return guarded("hocclCommRankLocation", [&] {
    Communicator& c = liveComm(comm, true);
    if (rank < 0 || rank >= c.nranks())
      throwInvalidArgument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(c.nranks() - 1));
    if (hostIndex) *hostIndex = c.topology().hostOf[rank];
    if (switchIndex) *switchIndex = c.topology().switchOf[rank];
    return hocclSuccess;
  });
}

hocclResult_t hocclCommPeerTransport(hocclComm_t comm, int peer, const char** name) {
  return guarded("hocclCommPeerTransport", [&] {
    Communicator& c = liveComm(comm, true);
    if (name == nullptr) throwInvalidArgument("name is NULL");
    if (peer < 0 || peer >= c.nranks())
      throwInvalidArgument("peer " + std::to_string(peer) + " is outside 0.." + std::to_string(c.nranks() - 1));
    *name = c.transportName(peer).c_str();
    return hocclSuccess;
  });
}

}  // extern "C"
