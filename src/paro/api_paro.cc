// The C edge of PaRO (include/hoccl/paro.h): argument checks, and every exception turned into a result code.
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "api/guard.h"
#include "base/error.h"
#include "base/log.h"
#include "hoccl/paro.h"
#include "paro/runtime.h"

/// The C handle: the runtime plus a validity stamp (use after destroy is detected).
struct hocclParo {
  static constexpr unsigned kAlive = 0x9A40C0DEu;  ///< stamp of a live handle
  unsigned stamp = kAlive;                         ///< kAlive while valid
  std::unique_ptr<hoccl::paro::Runtime> rt;        ///< the runtime
};

namespace {

using hoccl::Error;
using namespace hoccl::paro;

// Runs f through the library's C edge (api/guard.h): an exception becomes its code and hocclGetLastError's text.
template <class F>
hocclResult_t guard(const char* fn, F&& f) noexcept {
  return hoccl::api::guarded(fn, [&]() -> hocclResult_t {
    hoccl::api::clearLastError();
    f();
    return hocclSuccess;
  });
}

Runtime& live(hocclParo_t paro, const char* fn) {
  if (!paro || paro->stamp != hocclParo::kAlive || !paro->rt)
    hoccl::throwInvalidArgument(fmt::format("{}: the PaRO handle is null or was destroyed", fn));
  return *paro->rt;
}

void needBuffers(const char* fn, size_t count, const void* a, const void* b) {
  if (count > 0 && (!a || !b))
    hoccl::throwInvalidArgument(fmt::format("{}: a buffer is null with count {} (pass both buffers)", fn, count));
}

State toState(hocclParoState_t s) {
  if (s < hocclParoParams || s > hocclParoOptim)
    hoccl::throwInvalidArgument(
        fmt::format("PaRO state {} is not valid (0 = params, 1 = grads, 2 = optimizer)", static_cast<int>(s)));
  return static_cast<State>(s);
}

}  // namespace

extern "C" {

hocclResult_t hocclParoStrategyParse(const char* strategy, char canonical[4]) {
  return guard("hocclParoStrategyParse", [&] {
    if (!strategy || !canonical) hoccl::throwInvalidArgument("hocclParoStrategyParse: null argument");
    const std::string name = parseStrategy(strategy).name();
    std::memcpy(canonical, name.c_str(), 4);
  });
}

hocclResult_t hocclParoCreate(hocclComm_t comm, const char* strategy, hocclParoGroupLevel_t level, hocclParo_t* paro) {
  return guard("hocclParoCreate", [&] {
    if (!paro) hoccl::throwInvalidArgument("hocclParoCreate: paro (the output) is null");
    *paro = nullptr;
    if (!comm) hoccl::throwInvalidArgument("hocclParoCreate: comm is null");
    if (!strategy) hoccl::throwInvalidArgument("hocclParoCreate: strategy is null (give e.g. \"IIG\" or \"zero3\")");
    if (level != hocclParoGroupHost && level != hocclParoGroupSwitch)
      hoccl::throwInvalidArgument(
          fmt::format("hocclParoCreate: group level {} is not valid (0 = host, 1 = switch)", static_cast<int>(level)));
    const Strategy s = parseStrategy(strategy);
    auto handle = std::make_unique<hocclParo>();
    handle->rt = std::make_unique<Runtime>(comm, s, static_cast<GroupLevel>(level));
    *paro = handle.release();
  });
}

hocclResult_t hocclParoDestroy(hocclParo_t paro) {
  return guard("hocclParoDestroy", [&] {
    live(paro, "hocclParoDestroy");
    paro->stamp = 0;
    delete paro;
  });
}

hocclResult_t hocclParoGetLayout(hocclParo_t paro, int* groupSize, int* ngroups, int* group, int* localIndex) {
  return guard("hocclParoGetLayout", [&] {
    const Runtime& rt = live(paro, "hocclParoGetLayout");
    const Layout& l = rt.layout();
    if (groupSize) *groupSize = l.groupSize;
    if (ngroups) *ngroups = l.ngroups;
    if (group) *group = l.groupOf[rt.rank()];
    if (localIndex) *localIndex = l.localOf[rt.rank()];
  });
}

hocclResult_t hocclParoGetComm(hocclParo_t paro, hocclParoComm_t which, hocclComm_t* comm) {
  return guard("hocclParoGetComm", [&] {
    const Runtime& rt = live(paro, "hocclParoGetComm");
    if (!comm) hoccl::throwInvalidArgument("hocclParoGetComm: comm (the output) is null");
    if (which < hocclParoCommIntra || which > hocclParoCommGlobal)
      hoccl::throwInvalidArgument(
          fmt::format("hocclParoGetComm: {} is not 0 (intra), 1 (inter) or 2 (global)", static_cast<int>(which)));
    *comm = rt.comm(static_cast<CommKind>(which));
  });
}

hocclResult_t hocclParoPaddedCount(hocclParo_t paro, size_t count, size_t* padded) {
  return guard("hocclParoPaddedCount", [&] {
    const Runtime& rt = live(paro, "hocclParoPaddedCount");
    if (!padded) hoccl::throwInvalidArgument("hocclParoPaddedCount: padded (the output) is null");
    *padded = paddedCount(count, rt.layout().nranks);
  });
}

hocclResult_t hocclParoShardRange(hocclParo_t paro, hocclParoState_t state, size_t count, size_t* offset,
                                  size_t* length) {
  return guard("hocclParoShardRange", [&] {
    const Runtime& rt = live(paro, "hocclParoShardRange");
    if (!offset || !length) hoccl::throwInvalidArgument("hocclParoShardRange: offset or length is null");
    const Range r = rt.shard(toState(state), count);
    *offset = r.begin;
    *length = r.size();
  });
}

hocclResult_t hocclParoGatherParams(hocclParo_t paro, const void* paramShard, void* fullParams, size_t count,
                                    hocclDataType_t datatype, hocclStream_t stream) {
  return guard("hocclParoGatherParams", [&] {
    Runtime& rt = live(paro, "hocclParoGatherParams");
    needBuffers("hocclParoGatherParams", count, paramShard, fullParams);
    rt.gatherParams(paramShard, fullParams, count, datatype, stream);
  });
}

hocclResult_t hocclParoReduceGrads(hocclParo_t paro, const void* fullGrad, void* gradShard, size_t count,
                                   hocclDataType_t datatype, hocclStream_t stream) {
  return guard("hocclParoReduceGrads", [&] {
    Runtime& rt = live(paro, "hocclParoReduceGrads");
    needBuffers("hocclParoReduceGrads", count, fullGrad, gradShard);
    rt.reduceGrads(fullGrad, gradShard, count, datatype, stream);
  });
}

hocclResult_t hocclParoSyncGrads(hocclParo_t paro, const void* gradShard, void* optimGrad, size_t count,
                                 hocclDataType_t datatype, hocclStream_t stream) {
  return guard("hocclParoSyncGrads", [&] {
    Runtime& rt = live(paro, "hocclParoSyncGrads");
    needBuffers("hocclParoSyncGrads", count, gradShard, optimGrad);
    rt.syncGrads(gradShard, optimGrad, count, datatype, stream);
  });
}

hocclResult_t hocclParoRebuildParams(hocclParo_t paro, const void* optimParams, void* paramShard, size_t count,
                                     hocclDataType_t datatype, hocclStream_t stream) {
  return guard("hocclParoRebuildParams", [&] {
    Runtime& rt = live(paro, "hocclParoRebuildParams");
    needBuffers("hocclParoRebuildParams", count, optimParams, paramShard);
    rt.rebuildParams(optimParams, paramShard, count, datatype, stream);
  });
}

hocclResult_t hocclParoPredictBytes(hocclParo_t paro, size_t count, size_t elemBytes, int microSteps,
                                    unsigned long long* bytesPerRank) {
  return guard("hocclParoPredictBytes", [&] {
    const Runtime& rt = live(paro, "hocclParoPredictBytes");
    if (!bytesPerRank) hoccl::throwInvalidArgument("hocclParoPredictBytes: bytesPerRank (the output) is null");
    if (elemBytes == 0 || elemBytes > 16)
      hoccl::throwInvalidArgument(fmt::format("hocclParoPredictBytes: {} bytes per element (give 1..16)", elemBytes));
    ModelSize size;
    size.params = size.trainable = count;
    size.bytesP = size.bytesG = static_cast<uint32_t>(elemBytes);
    *bytesPerRank = makePlan(rt.layout(), rt.strategy(), size, microSteps).sentPerRankPerStep();
  });
}

hocclResult_t hocclParoGetCounters(hocclParo_t paro, hocclCommCounters_t* counters) {
  return guard("hocclParoGetCounters", [&] {
    const Runtime& rt = live(paro, "hocclParoGetCounters");
    if (!counters) hoccl::throwInvalidArgument("hocclParoGetCounters: counters (the output) is null");
    *counters = rt.counters();
  });
}

hocclResult_t hocclParoResetCounters(hocclParo_t paro) {
  return guard("hocclParoResetCounters", [&] { live(paro, "hocclParoResetCounters").resetCounters(); });
}

}  // extern "C"
