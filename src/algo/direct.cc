/*
 * Direct algorithms: every rank talks to every peer it exchanges data with, all at once, in a single step.
 *
 * All-to-all: rank r sends block j of its input to rank j and receives rank j's block r into block j of its
 * output; the own block is a local copy. The peers are visited starting at r+1 so that, on a real network, the
 * ranks do not all send to the same peer first.
 * Gather: every rank sends its input to the root, which receives block j from rank j (and copies its own).
 * Scatter: the root sends block j of its input to rank j (and copies its own); the others receive.
 * For all-to-all in place (input == output) the sends must read before the receives overwrite: the step does both
 * at once, so an in-place call stages the input in scratch first.
 *
 * The same idea serves small messages of the other collectives, where latency matters more than bytes: one
 * communication step instead of the ring's N-1 or 2(N-1).
 * All-gather: send the own block to every peer, receive every peer's block into its place.
 * Broadcast: the root sends to every peer. Reduce / reduce-scatter / all-reduce: every contribution lands in a
 * scratch slot per rank (the own one copied), then the slots are combined in rank order 0, 1, ..., N-1 on every rank,
 * so that floating-point results are bit-identical across ranks, as with the ring.
 */
#include "algo/direct.h"

namespace hoccl::algo {

using namespace sched;

namespace {

// Combines the n scratch slots of `c` elements (slot k = rank k's contribution) into dst in rank order.
void combineSlots(Schedule& s, int n, size_t c, uint16_t dst, size_t dstOff) {
  s.steps.push_back(Step{{copy(kScratch, 0, dst, dstOff, c)}});
  for (int k = 1; k < n; ++k) s.steps.push_back(Step{{reduceLocal(kScratch, k * c, dst, dstOff, c)}});
}

Schedule oneShot(const CollArgs& a) {
  Schedule s;
  s.algorithm = "direct";
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  Step st;
  switch (a.coll) {
    case Coll::AllGather:
      st.prims.push_back(copy(kInput, 0, kOutput, r * c, c));
      for (int k = 1; k < n; ++k) st.prims.push_back(send((r + k) % n, kInput, 0, c));
      for (int k = 1; k < n; ++k) st.prims.push_back(recv((r - k + n) % n, kOutput, ((r - k + n) % n) * c, c));
      s.steps.push_back(std::move(st));
      break;
    case Coll::Broadcast:
      if (r == a.root) {
        st.prims.push_back(copy(kInput, 0, kOutput, 0, c));
        for (int k = 1; k < n; ++k) st.prims.push_back(send((r + k) % n, kInput, 0, c));
      } else {
        st.prims.push_back(recv(a.root, kOutput, 0, c));
      }
      s.steps.push_back(std::move(st));
      break;
    case Coll::AllReduce:
    case Coll::ReduceScatter:
    case Coll::Reduce: {
      const bool scatter = a.coll == Coll::ReduceScatter;
      // Two ranks: op(mine, theirs) == op(theirs, mine) bit for bit (IEEE + and * commute), so the incoming data
      // can be combined on arrival. In place, our own send would read what the combine writes: use the slots.
      if (n == 2 && (!a.inPlace || (a.coll == Coll::Reduce && r == a.root))) {
        const int peer = 1 - r;
        const size_t mine = scatter ? r * c : 0, theirs = scatter ? peer * c : 0;
        if (a.coll != Coll::Reduce || peer == a.root) st.prims.push_back(send(peer, kInput, theirs, c));
        if (a.coll != Coll::Reduce || r == a.root) st.prims.push_back(recvReduce(peer, kInput, mine, kOutput, 0, c));
        s.steps.push_back(std::move(st));
        break;
      }
      const bool receives = a.coll != Coll::Reduce || r == a.root;
      // What this rank contributes to rank p (the block p for reduce-scatter, everything otherwise).
      auto block = [&](int p) { return scatter ? static_cast<size_t>(p) * c : 0; };
      for (int k = 1; k < n; ++k) {
        int p = (r + k) % n;
        if (a.coll != Coll::Reduce || p == a.root) st.prims.push_back(send(p, kInput, block(p), c));
      }
      if (receives) {
        s.scratchCount = static_cast<size_t>(n) * c;
        st.prims.push_back(copy(kInput, block(r), kScratch, r * c, c));
        for (int k = 1; k < n; ++k) {
          int p = (r - k + n) % n;
          st.prims.push_back(recv(p, kScratch, p * c, c));
        }
      }
      s.steps.push_back(std::move(st));
      if (receives) combineSlots(s, n, c, kOutput, 0);
      break;
    }
    default: break;
  }
  return s;
}

}  // namespace

Schedule directSchedule(const CollArgs& a, const topo::Topology&) {
  Schedule s;
  s.algorithm = "direct";
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  Step st;
  switch (a.coll) {
    case Coll::AlltoAll: {
      // Stage the input in scratch so that in-place calls are safe (the copy is skipped for n == 1).
      if (n > 1 && a.inPlace) {
        s.scratchCount = c * n;
        s.steps.push_back(Step{{copy(kInput, 0, kScratch, 0, c * n)}});
      }
      uint16_t src = (n > 1 && a.inPlace) ? kScratch : kInput;
      st.prims.push_back(copy(src, r * c, kOutput, r * c, c));
      for (int k = 1; k < n; ++k) {
        int peer = (r + k) % n;
        st.prims.push_back(send(peer, src, peer * c, c));
      }
      for (int k = 1; k < n; ++k) {
        int peer = (r - k + n) % n;
        st.prims.push_back(recv(peer, kOutput, peer * c, c));
      }
      break;
    }
    case Coll::Gather:
      if (r == a.root) {
        st.prims.push_back(copy(kInput, 0, kOutput, r * c, c));
        for (int k = 1; k < n; ++k) {
          int peer = (r + k) % n;
          st.prims.push_back(recv(peer, kOutput, peer * c, c));
        }
      } else {
        st.prims.push_back(send(a.root, kInput, 0, c));
      }
      break;
    case Coll::Scatter:
      if (r == a.root) {
        st.prims.push_back(copy(kInput, r * c, kOutput, 0, c));
        for (int k = 1; k < n; ++k) {
          int peer = (r + k) % n;
          st.prims.push_back(send(peer, kInput, peer * c, c));
        }
      } else {
        st.prims.push_back(recv(a.root, kOutput, 0, c));
      }
      break;
    default: return oneShot(a);
  }
  s.steps.push_back(std::move(st));
  return s;
}

std::optional<kernels::FoldOrder> directFold(const CollArgs& a, const topo::Topology&) {
  if (a.coll != Coll::AllReduce && a.coll != Coll::ReduceScatter) return std::nullopt;
  kernels::FoldOrder fold;
  fold.orders.emplace_back(static_cast<size_t>(a.nranks));
  for (int q = 0; q < a.nranks; ++q) fold.orders[0][q] = q;  // combineSlots: slot 0, then 1, 2, ...
  fold.segments.push_back({0, 0});
  return fold;
}

}  // namespace hoccl::algo
