/*
 * PaRO runtime: the collectives of a training step on the caller's buffers.
 *
 * Communicators: intra = hocclCommSplit(color = group g, key = local index k); inter (the redundancy group of local
 * index k) = split(color = k, key = g); global = split(color 0, key = rank), made only for strategies whose
 * unsharded gradient is all-reduced (G = N and OS = N). With the block layout of layout.h:
 *   - the I-shard of k is block k of the intra communicator's view of a full buffer (ng*b elements);
 *   - the G-shard of (g, k) is block g of the inter communicator's view of that I-shard (b elements);
 * so each transition is one all-gather, reduce-scatter or all-reduce (plan.h lists which), or a local slice when
 * the target is more redundant than the source (e.g. OS=I -> P=G). In-place calls are used where a two-hop gather
 * can land its first hop on the rank's own slot of the output.
 */
#include "paro/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "kernels/cpu/reduce.h"

namespace hoccl::paro {

size_t dataTypeSize(hocclDataType_t type) {
  if (const size_t bytes = kernels::typeSize(type)) return bytes;
  throwInvalidArgument(fmt::format("PaRO: datatype {} is not a hoccl datatype (0..{})", static_cast<int>(type),
                                   static_cast<int>(hocclNumTypes) - 1));
}

namespace {

unsigned char* at(void* p, uint64_t elems, size_t e) { return static_cast<unsigned char*>(p) + elems * e; }

topo::Topology readTopology(hocclComm_t comm, int nranks) {
  topo::Topology t;
  t.nranks = nranks;
  std::vector<int> perHost;
  for (int r = 0; r < nranks; ++r) {
    int host = 0, sw = 0;
    hocclResult_t res = hocclCommRankLocation(comm, r, &host, &sw);
    if (res != hocclSuccess)
      throw Error(res, fmt::format("PaRO: cannot read the location of rank {}: {}", r, hocclGetLastError(comm)));
    if (host >= static_cast<int>(perHost.size())) perHost.resize(host + 1, 0);
    t.hostOf.push_back(host);
    t.switchOf.push_back(sw);
    t.localIndex.push_back(perHost[host]++);
    t.nhosts = std::max(t.nhosts, host + 1);
    t.nswitches = std::max(t.nswitches, sw + 1);
  }
  return t;
}

}  // namespace

Layout layoutOfComm(hocclComm_t comm, GroupLevel level) {
  int nranks = 0;
  if (hocclCommCount(comm, &nranks) != hocclSuccess)
    throwInvalidArgument("PaRO: the communicator is not valid (was it destroyed?)");
  return makeLayout(readTopology(comm, nranks), level);
}

void Runtime::check(hocclResult_t result, const char* what, hocclComm_t comm) const {
  if (result == hocclSuccess) return;
  throw Error(result, fmt::format("PaRO {} ({}) failed on rank {} (group {}, local index {}): {}: {}", what,
                                  strategy_.name(), rank_, layout_.groupOf[rank_], layout_.localOf[rank_],
                                  hocclGetErrorString(result), hocclGetLastError(comm)));
}

Runtime::Runtime(hocclComm_t comm, const Strategy& strategy, GroupLevel level) : strategy_(strategy) {
  int nranks = 0;
  if (hocclCommCount(comm, &nranks) != hocclSuccess || hocclCommUserRank(comm, &rank_) != hocclSuccess)
    throwInvalidArgument("PaRO: the communicator is not valid (was it destroyed?)");
  layout_ = layoutOfComm(comm, level);
  if (!layout_.note.empty() && rank_ == 0) HOCCL_WARN(kParo, "PaRO {}: {}", strategy_.name(), layout_.note);
  const int g = layout_.groupOf[rank_], k = layout_.localOf[rank_];
  try {
    check(hocclCommSplit(comm, g, k, &comms_[0], nullptr), "split into groups", comm);
    check(hocclCommSplit(comm, k, g, &comms_[1], nullptr), "split into redundancy groups", comm);
    if (strategy_.g == Level::N && strategy_.os == Level::N)
      check(hocclCommSplit(comm, 0, rank_, &comms_[2], nullptr), "split of the global communicator", comm);
  } catch (...) {
    for (auto& c : comms_)
      if (c) hocclCommDestroy(c);
    throw;
  }
  HOCCL_INFO(kParo, "PaRO {} on rank {}: {} groups of {} ({}), group {} local index {}", strategy_.name(), rank_,
             layout_.ngroups, layout_.groupSize, groupLevelName(level), g, k);
}

Runtime::~Runtime() {
  for (auto& c : comms_)
    if (c) hocclCommDestroy(c);
}

void* Runtime::scratch(uint64_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Runtime::copy(const void* in, void* out, uint64_t count, hocclDataType_t t) {
  if (in != out && count) std::memmove(out, in, count * dataTypeSize(t));
}

void Runtime::allGather(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  hocclComm_t c = comm(k);
  int n = 1;
  hocclCommCount(c, &n);
  if (n == 1) return copy(in, out, count, t);
  check(hocclAllGather(in, out, count, t, c, s), "all-gather", c);
}

void Runtime::reduceScatter(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  hocclComm_t c = comm(k);
  int n = 1;
  hocclCommCount(c, &n);
  if (n == 1) return copy(in, out, count, t);
  check(hocclReduceScatter(in, out, count, t, hocclSum, c, s), "reduce-scatter", c);
}

void Runtime::allReduce(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  hocclComm_t c = comm(k);
  int n = 1;
  hocclCommCount(c, &n);
  if (n == 1) return copy(in, out, count, t);
  check(hocclAllReduce(in, out, count, t, hocclSum, c, s), "all-reduce", c);
}

void Runtime::gatherParams(const void* shard, void* full, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  const size_t e = dataTypeSize(t);
  const uint64_t b = paddedCount(count, layout_.nranks) / layout_.nranks, ng = layout_.ngroups;
  if (b == 0) return;
  const uint64_t k = layout_.localOf[rank_];
  switch (strategy_.p) {
    case Level::N: copy(shard, full, b * layout_.nranks, t); break;
    case Level::I: allGather(CommKind::Intra, shard, full, ng * b, t, s); break;
    case Level::G: {
      void* mine = at(full, k * ng * b, e);
      allGather(CommKind::Inter, shard, mine, b, t, s);
      allGather(CommKind::Intra, mine, full, ng * b, t, s);
      break;
    }
  }
}

void Runtime::reduceGrads(const void* full, void* shard, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  const size_t e = dataTypeSize(t);
  const uint64_t b = paddedCount(count, layout_.nranks) / layout_.nranks, ng = layout_.ngroups;
  if (b == 0) return;
  switch (strategy_.g) {
    case Level::N: copy(full, shard, b * layout_.nranks, t); break;
    case Level::I: reduceScatter(CommKind::Intra, full, shard, ng * b, t, s); break;
    case Level::G: {
      void* tmp = scratch(ng * b * e);
      reduceScatter(CommKind::Intra, full, tmp, ng * b, t, s);
      reduceScatter(CommKind::Inter, tmp, shard, b, t, s);
      break;
    }
  }
}

void Runtime::syncGrads(const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  const size_t e = dataTypeSize(t);
  const uint64_t b = paddedCount(count, layout_.nranks) / layout_.nranks, ng = layout_.ngroups;
  if (b == 0) return;
  const uint64_t k = layout_.localOf[rank_];
  const CommKind intra = CommKind::Intra, inter = CommKind::Inter;
  const Level g = strategy_.g, os = strategy_.os;
  if (g == Level::N && os == Level::N) {
    allReduce(CommKind::Global, in, out, b * layout_.nranks, t, s);
  } else if (g == Level::N) {
    if (os == Level::I) {
      reduceScatter(intra, in, out, ng * b, t, s);
      allReduce(inter, out, out, ng * b, t, s);
    } else {
      void* tmp = scratch(ng * b * e);
      reduceScatter(intra, in, tmp, ng * b, t, s);
      reduceScatter(inter, tmp, out, b, t, s);
    }
  } else if (g == Level::I) {
    if (os == Level::G) {
      reduceScatter(inter, in, out, b, t, s);
    } else if (os == Level::I) {
      allReduce(inter, in, out, ng * b, t, s);
    } else {
      void* mine = at(out, k * ng * b, e);
      allReduce(inter, in, mine, ng * b, t, s);
      allGather(intra, mine, out, ng * b, t, s);
    }
  } else {
    if (os == Level::G) {
      copy(in, out, b, t);
    } else if (os == Level::I) {
      allGather(inter, in, out, b, t, s);
    } else {
      void* mine = at(out, k * ng * b, e);
      allGather(inter, in, mine, b, t, s);
      allGather(intra, mine, out, ng * b, t, s);
    }
  }
}

void Runtime::rebuildParams(const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s) {
  const size_t e = dataTypeSize(t);
  const uint64_t b = paddedCount(count, layout_.nranks) / layout_.nranks, ng = layout_.ngroups;
  if (b == 0) return;
  const uint64_t k = layout_.localOf[rank_];
  const Level p = strategy_.p, os = strategy_.os;
  if (static_cast<int>(os) <= static_cast<int>(p)) {
    // The OS shard contains the P shard: slice it.
    const Range rp = shard(State::Params, count), ro = shard(State::Optim, count);
    copy(static_cast<const unsigned char*>(in) + (rp.begin - ro.begin) * e, out, rp.size(), t);
  } else if (os == Level::G && p == Level::I) {
    allGather(CommKind::Inter, in, out, b, t, s);
  } else if (os == Level::G) {
    void* mine = at(out, k * ng * b, e);
    allGather(CommKind::Inter, in, mine, b, t, s);
    allGather(CommKind::Intra, mine, out, ng * b, t, s);
  } else {
    allGather(CommKind::Intra, in, out, ng * b, t, s);
  }
}

hocclCommCounters_t Runtime::counters() const {
  hocclCommCounters_t total{};
  for (auto c : comms_) {
    if (!c) continue;
    hocclCommCounters_t one{};
    check(hocclCommGetCounters(c, &one), "reading counters", c);
    for (int i = 0; i < hocclNumLinkClasses; ++i) {
      total.bytesSent[i] += one.bytesSent[i];
      total.bytesReceived[i] += one.bytesReceived[i];
    }
  }
  return total;
}

void Runtime::resetCounters() {
  for (auto c : comms_)
    if (c) check(hocclCommResetCounters(c), "resetting counters", c);
}

}  // namespace hoccl::paro
