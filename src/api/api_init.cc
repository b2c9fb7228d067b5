// Communicator life cycle at the C edge: ids, init (blocking and not), split, finalize, destroy, abort, queries.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "comm/launcher_env.h"
#include "base/log.h"

using namespace hoccl;
using hoccl::api::guarded;
using hoccl::api::liveComm;

namespace {

// Reads the caller's config the way NCCL does: by its size, rejecting a wrong magic. Returns blocking mode and name.
struct ConfigView {
  bool blocking = true;
  std::string name;
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
  }
  if (config->size >= offsetof(hocclConfig_t, commName) + sizeof(const char*) && c.commName) v.name = c.commName;
  return v;
}

void checkRankArgs(hocclComm_t* comm, int nranks, int rank) {
  if (!comm) throwInvalidArgument("comm (the output pointer) is NULL");
  if (nranks < 1) throwInvalidArgument("nranks is " + std::to_string(nranks) + "; it must be at least 1");
  if (rank < 0 || rank >= nranks)
    throwInvalidArgument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
}

// Creates the handle and the communicator, in this thread (blocking) or in a helper thread (non-blocking).
hocclResult_t initHandle(hocclComm_t* out, const boot::UniqueId& id, int rank, int nranks, const ConfigView& cfg) {
  auto* handle = new hocclComm();
  if (cfg.blocking) {
    try {
      handle->impl = std::make_unique<Communicator>(id, rank, nranks, cfg.name);
    } catch (...) {
      delete handle;
      throw;
    }
    *out = handle;
    return hocclSuccess;
  }
  handle->initResult = hocclInProgress;
  *out = handle;
  std::thread([handle, id, rank, nranks, name = cfg.name] {
    try {
      handle->impl = std::make_unique<Communicator>(id, rank, nranks, name);
      handle->initResult = hocclSuccess;
    } catch (const Error& e) {
      handle->initError = e.what();
      handle->initResult = e.code();
    } catch (const std::exception& e) {
      handle->initError = e.what();
      handle->initResult = hocclInternalError;
    }
  }).detach();
  return hocclInProgress;
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

hocclResult_t hocclCommInitRank(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank) {
  return hocclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

hocclResult_t hocclCommInitRankFromEnv(hocclComm_t* comm, int nranks, int rank) {
  return guarded("hocclCommInitRankFromEnv", [&] {
    checkRankArgs(comm, nranks, rank);
    return initHandle(comm, boot::uniqueIdFromEnvironment(rank), rank, nranks, ConfigView{});
  });
}

hocclResult_t hocclCommInitFromEnv(hocclComm_t* comm, int* rank, int* nranks) {
  return guarded("hocclCommInitFromEnv", [&] {
    auto lr = launcherRank();
    if (!lr)
      throwInvalidUsage(
          "no rank/size in the environment: set HOCCL_RANK and HOCCL_WORLD_SIZE (or run under "
          "hoccl-run, mpirun or srun)");
    checkRankArgs(comm, lr->size, lr->rank);
    hocclResult_t r = initHandle(comm, boot::uniqueIdFromEnvironment(lr->rank), lr->rank, lr->size, ConfigView{});
    if (rank) *rank = lr->rank;
    if (nranks) *nranks = lr->size;
    return r;
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
    Communicator& c = liveComm(comm);
    if (!newcomm) throwInvalidArgument("newcomm is NULL");
    if (color < 0 && color != HOCCL_SPLIT_NOCOLOR)
      throwInvalidArgument("color " + std::to_string(color) + " is negative; use a color >= 0 or HOCCL_SPLIT_NOCOLOR");
    ConfigView cfg = readConfig(config);
    const int n = c.nranks();
    // Round 1: everybody's color and key.
    struct Entry {
      int32_t color, key;
    };
    std::vector<Entry> entries(n);
    entries[c.rank()] = {color, key};
    c.bootstrap().allGather(entries.data(), sizeof(Entry));
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (entries[r].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return entries[a].key < entries[b].key; });
    // Round 2: the first member of each color publishes a fresh id.
    std::vector<hocclUniqueId> ids(n);
    bool leader = color != HOCCL_SPLIT_NOCOLOR && members.front() == c.rank();
    if (leader) ids[c.rank()] = boot::encode(boot::createUniqueId());
    c.bootstrap().allGather(ids.data(), sizeof(hocclUniqueId));
    if (color == HOCCL_SPLIT_NOCOLOR) {
      *newcomm = nullptr;
      return hocclSuccess;
    }
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), c.rank()) - members.begin());
    return initHandle(newcomm, boot::decode(ids[members.front()]), newRank, static_cast<int>(members.size()), cfg);
  });
}

hocclResult_t hocclCommFinalize(hocclComm_t comm) {
  return guarded("hocclCommFinalize", [&] {
    liveComm(comm).bootstrap().barrier();
    return hocclSuccess;
  });
}

hocclResult_t hocclCommDestroy(hocclComm_t comm) {
  return guarded("hocclCommDestroy", [&] {
    if (!comm) return hocclSuccess;  // as NCCL: destroying NULL is a no-op
    if (comm->stamp.load() == hocclComm::kDead) throwInvalidUsage("comm was already destroyed (double destroy)");
    if (comm->initResult.load() == hocclInProgress)
      throwInvalidUsage(
          "comm is still initializing: wait for hocclCommGetAsyncError to leave hocclInProgress, "
          "or call hocclCommAbort");
    retire(comm);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommAbort(hocclComm_t comm) {
  return guarded("hocclCommAbort", [&] {
    if (!comm) return hocclSuccess;
    if (comm->stamp.load() == hocclComm::kDead) return hocclSuccess;
    // A non-blocking init still running cannot be interrupted safely; it ends within HOCCL_TIMEOUT. Mark the handle
    // dead so nothing new starts on it, and leave the communicator to that thread.
    if (comm->initResult.load() == hocclInProgress) {
      comm->stamp = hocclComm::kDead;
      return hocclSuccess;
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
    Communicator& c = *comm->impl;
    if (c.asyncError.load() == hocclSuccess && c.health().failed()) {  // another rank failed: an idle rank learns it
      int expected = hocclSuccess;
      c.asyncError.compare_exchange_strong(expected, hocclRemoteError);
      api::setLastError("hocclCommGetAsyncError: " + c.describe() + ": " + c.health().failure());
    }
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
    *device = -1;  // host-only communicator
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

}  // extern "C"
