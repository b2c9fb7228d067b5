/*
 * The small one-shot shortcut (see shm_small.h). One arena round per call (shm_session.h); what each rank publishes
 * and what it computes once the peers it needs have published and agreed:
 *   all-reduce      publishes its input; reads every peer's and combines them in rank order
 *                   (((p0 op p1) op p2) ...), so every rank gets the same bits
 *   reduce          publishes its input; the root combines as all-reduce does, the others return at once
 *   broadcast       the root publishes its input and returns at once; the others copy the root's payload
 *   all-gather      publishes its input; copies every payload to its place
 *   reduce-scatter  publishes its whole input; combines block r of every payload in rank order
 * Ranks that wait for nobody (a broadcast root, a reduce contributor) may run up to kArenaSlots-1 rounds ahead.
 * Cost for p ranks and b bytes: one copy of b in, p-1 cache-line round trips (plus b/64 lines per peer beyond the
 * inline size) and the reduction.
 */
#include "transports/shm/shm_small.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "transports/shm/shm_price.h"

namespace hoccl::transport::shm {
namespace {

constexpr size_t kBytesPerRank = 2048;  // payload limit per rank of the communicator (measured crossover)

class SmallOp final : public ShortcutOp {
 public:
  SmallOp(ArenaSession& s, const CollCall& call)
      : s_(s), call_(call),
        exchange_(s, call, Protocol::Small, publishes(call, s.rank()) ? call.sendbuf : nullptr,
                  inputBytes(call, s.nranks()), waitsForAll(call, s.rank()), waitsFor(call, s.rank())) {}

  bool poll() override {
    if (!exchange_.poll()) return false;
    finish();
    return true;
  }
  std::string missing() const override { return exchange_.missing(); }

 private:
  static bool publishes(const CollCall& c, int rank) { return c.coll != Coll::Broadcast || rank == c.root; }
  static bool waitsForAll(const CollCall& c, int rank) {
    if (c.coll == Coll::Broadcast) return false;
    if (c.coll == Coll::Reduce) return rank == c.root;
    return true;
  }
  static int waitsFor(const CollCall& c, int rank) { return c.coll == Coll::Broadcast && rank != c.root ? c.root : -1; }

  void finish();

  ArenaSession& s_;
  CollCall call_;
  Exchange exchange_;
};

void SmallOp::finish() {
  const int me = s_.rank(), n = s_.nranks();
  const size_t bytes = exchange_.bytes();
  const kernels::MemoryOps& mem = kernels::memoryOps(call_.recvKind);
  const kernels::BinOp bin = kernels::binOpOf(call_.op);
  char* out = static_cast<char*>(call_.recvbuf);
  auto reduceAll = [&](size_t offset, size_t count) {  // out = p0 op p1 op ... (rank order) at offset
    mem.reduce(out, exchange_.payloadOf(0) + offset, exchange_.payloadOf(1) + offset, count, call_.dtype, bin);
    for (int r = 2; r < n; ++r) mem.reduce(out, out, exchange_.payloadOf(r) + offset, count, call_.dtype, bin);
    if (call_.op == hocclAvg) mem.divide(out, count, call_.dtype, n);
  };
  auto copyOut = [&](char* dst, const void* src, size_t len) {
    if (dst != src) mem.copy(dst, src, len);
  };
  switch (call_.coll) {
    case Coll::AllReduce:
      reduceAll(0, call_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) s_.count(r, bytes, bytes);
      break;
    case Coll::Reduce:  // the others send to the root
      if (me != call_.root) {
        s_.count(call_.root, bytes, 0);
        break;
      }
      reduceAll(0, call_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) s_.count(r, 0, bytes);
      break;
    case Coll::Broadcast:  // the root sends to the others
      if (me != call_.root) {
        copyOut(out, exchange_.payloadOf(call_.root), bytes);
        s_.count(call_.root, 0, bytes);
        break;
      }
      copyOut(out, call_.sendbuf, bytes);
      for (int r = 0; r < n; ++r)
        if (r != me) s_.count(r, bytes, 0);
      break;
    case Coll::AllGather:
      for (int r = 0; r < n; ++r) {
        copyOut(out + static_cast<size_t>(r) * bytes, r == me ? call_.sendbuf : exchange_.payloadOf(r), bytes);
        if (r != me) s_.count(r, bytes, bytes);
      }
      break;
    case Coll::ReduceScatter: {
      const size_t block = bytes / static_cast<size_t>(n);
      reduceAll(static_cast<size_t>(me) * block, call_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) s_.count(r, block, block);
      break;
    }
    default: throwInternalError("small one-shot shortcut given a collective it does not implement");
  }
}

}  // namespace

bool SmallShortcut::canRun(const CollCall& call) const {
  switch (call.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::Broadcast:
    case Coll::AllGather:
    case Coll::ReduceScatter: break;
    default: return false;
  }
  if (call.op >= hocclNumOps || !kernels::isHostKind(call.sendKind) || !kernels::isHostKind(call.recvKind))
    return false;
  const size_t limit = std::min(session_->arena().maxBytes(), kBytesPerRank * static_cast<size_t>(session_->nranks()));
  return inputBytes(call, session_->nranks()) <= limit;
}

double SmallShortcut::predictSeconds(const CollCall& call, const topo::LinkModel& model) const {
  return smallSeconds(call, session_->nranks(), model);  // shm_price.h
}

std::unique_ptr<ShortcutOp> SmallShortcut::start(const CollCall& call) {
  return std::make_unique<SmallOp>(*session_, call);
}

void SmallShortcut::run(const CollCall& call, Backoff& backoff) {
  SmallOp op(*session_, call);
  while (!op.poll()) backoff.pause();
}

}  // namespace hoccl::transport::shm
