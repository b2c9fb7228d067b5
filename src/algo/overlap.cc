/*
 * Schedules that leave room for the caller's compute between transfers (CommFuse-style decomposed all-gather and
 * reduce-scatter; PrimePar-style ring shift). docs/overlap.md describes the API built on them.
 *
 * Where the topology has two levels (equal hosts of >= 2 ranks, >= 2 hosts) both collectives use the two-level
 * schedules of overlap_two_level.cc instead (HOCCL_OVERLAP_TWO_LEVEL=0 keeps the flat ring). Flat: both walk the
 * ring of ringOrder() (host by host, switch by switch, as the flat ring does): position p
 * sends to p+1 and receives from p-1, one block per step, and the caller's callback for one block runs while the
 * transfer of the next one is in flight (the executor posts a step's transfers before it runs the step's callback
 * prims, and keeps them moving while the callback runs).
 *
 * All-gather, n ranks, A(t) = the rank at position p-t (A(0) = own):
 *   copy own input into its output slot
 *   step t = 0..n-2:  send A(t) to next (t = 0: from the input)   recv A(t+1) from prev   notify(A(t))
 *   last:             notify(A(n-1))
 * The callback sees the own block first, then the others in ring order: the ranks before this one on its host
 * first (the ring visits hosts one after another), while what comes from other hosts is still on its way.
 *
 * Reduce-scatter, B(j) = the rank at position p-j (B(n) = own), S0/S1 = two scratch blocks:
 *   produce(B(1))                                       (the one produce with nothing to hide behind)
 *   step t = 1..n-1:  send partial of B(t) to next      (t = 1: the produced input block; else S[(t-1)%2])
 *                     recv partial of B(t+1) into S[t%2] from prev
 *                     produce(B(t+1))                   (while both transfers are in flight)
 *                     then S[t%2] = op(S[t%2], input block B(t+1))
 *   copy S[(n-1)%2] to the output
 * Same partial sums in the same ring order as the ring reduce-scatter (ring.cc), so results agree with it. The
 * partial received is reduced after the step, not on arrival, because the input block it combines with is being
 * produced while it arrives. After the last produce, only the transfer that ran during it and one local reduction
 * and copy remain.
 *
 * Ring shift by k: one step, send the input to rank+k and receive the output from rank-k (ranks, not ring
 * positions: the shift is defined on ranks). In place, the input is staged in scratch so that the receive cannot
 * overwrite it before it leaves.
 *
 * Zero counts keep every callback (with count 0) and drop every transfer, so the caller's loop over blocks runs the
 * same on every count.
 */
#include "algo/overlap.h"

#include <algorithm>

#include "algo/overlap_two_level.h"
#include "algo/ring.h"

namespace hoccl::algo {

using namespace sched;

namespace {

int positionOf(const std::vector<int>& ord, int rank) {
  return static_cast<int>(std::find(ord.begin(), ord.end(), rank) - ord.begin());
}

int at(const std::vector<int>& ord, int p) {
  const int n = static_cast<int>(ord.size());
  return ord[((p % n) + n) % n];
}

}  // namespace

std::vector<int> overlapBlockOrder(const topo::Topology& topo, int rank, bool reduceScatter, bool twoLevel) {
  if (twoLevel && twoLevelApplies(topo)) return twoLevelBlockOrder(topo, rank, reduceScatter);
  const std::vector<int> ord = ringOrder(topo);
  const int n = static_cast<int>(ord.size()), p = positionOf(ord, rank);
  std::vector<int> out;
  // All-gather: own, p-1, ..., p-(n-1). Reduce-scatter: p-1, ..., p-(n-1), own.
  for (int t = reduceScatter ? 1 : 0; t < (reduceScatter ? n + 1 : n); ++t) out.push_back(at(ord, p - t));
  return out;
}

Schedule overlapAllGatherSchedule(const CollArgs& a, const topo::Topology& topo, bool twoLevel) {
  if (twoLevel && twoLevelApplies(topo)) return twoLevelAllGatherSchedule(a, topo);
  Schedule s;
  s.algorithm = "overlap_ring";
  const std::vector<int> ord = ringOrder(topo);
  const int n = a.nranks, p = positionOf(ord, a.rank);
  const size_t c = a.count;
  const int next = at(ord, p + 1), prev = at(ord, p - 1);
  auto slot = [c](int r) { return static_cast<size_t>(r) * c; };
  if (c) s.steps.push_back(Step{{copy(kInput, 0, kOutput, slot(a.rank), c)}});
  for (int t = 0; t + 1 < n; ++t) {
    const int cur = at(ord, p - t), in = at(ord, p - t - 1);
    Step st;
    if (c) {
      st.prims.push_back(t == 0 ? send(next, kInput, 0, c) : send(next, kOutput, slot(cur), c));
      st.prims.push_back(recv(prev, kOutput, slot(in), c));
    }
    st.prims.push_back(notify(cur, kOutput, slot(cur), c));
    s.steps.push_back(std::move(st));
  }
  const int last = at(ord, p - (n - 1));
  s.steps.push_back(Step{{notify(last, kOutput, slot(last), c)}});
  return s;
}

Schedule overlapReduceScatterSchedule(const CollArgs& a, const topo::Topology& topo, bool twoLevel) {
  if (twoLevel && twoLevelApplies(topo)) return twoLevelReduceScatterSchedule(a, topo);
  Schedule s;
  s.algorithm = "overlap_ring";
  const std::vector<int> ord = ringOrder(topo);
  const int n = a.nranks, p = positionOf(ord, a.rank);
  const size_t c = a.count;
  const int next = at(ord, p + 1), prev = at(ord, p - 1);
  auto block = [c](int r) { return static_cast<size_t>(r) * c; };
  if (n == 1) {
    s.steps.push_back(Step{{produce(a.rank, kInput, 0, c)}});
    if (c) s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, c)}});
    return s;
  }
  if (c) s.scratchCount = 2 * c;
  const int first = at(ord, p - 1);
  s.steps.push_back(Step{{produce(first, kInput, block(first), c)}});
  for (int t = 1; t < n; ++t) {
    const int out = at(ord, p - t), in = at(ord, p - t - 1);  // in == a.rank at t == n-1
    const size_t recvSlot = static_cast<size_t>(t % 2) * c, sendSlot = static_cast<size_t>((t - 1) % 2) * c;
    Step st;
    if (c) {
      st.prims.push_back(t == 1 ? send(next, kInput, block(out), c) : send(next, kScratch, sendSlot, c));
      st.prims.push_back(recv(prev, kScratch, recvSlot, c));
    }
    st.prims.push_back(produce(in, kInput, block(in), c));
    s.steps.push_back(std::move(st));
    if (c) s.steps.push_back(Step{{reduceLocal(kInput, block(in), kScratch, recvSlot, c)}});
  }
  if (c) s.steps.push_back(Step{{copy(kScratch, static_cast<size_t>((n - 1) % 2) * c, kOutput, 0, c)}});
  return s;
}

Schedule ringShiftSchedule(const CollArgs& a, long long shift) {
  Schedule s;
  s.algorithm = "ring_shift";
  const long long n = a.nranks;
  const int k = static_cast<int>(((shift % n) + n) % n);
  const size_t c = a.count;
  if (c == 0) return s;
  if (k == 0) {
    s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, c)}});
    return s;
  }
  const int to = (a.rank + k) % a.nranks, from = (a.rank - k + a.nranks) % a.nranks;
  uint16_t src = kInput;
  if (a.inPlace) {
    s.scratchCount = c;
    s.steps.push_back(Step{{copy(kInput, 0, kScratch, 0, c)}});
    src = kScratch;
  }
  s.steps.push_back(Step{{send(to, src, 0, c), recv(from, kOutput, 0, c)}});
  return s;
}

}  // namespace hoccl::algo
