/*
 * Two-level (HO-Ring-aware) schedules of the overlapped all-gather and reduce-scatter, for communicators whose ranks
 * fill L >= 2 ranks on each of H >= 2 hosts (topo::hierarchy() level 0 is "host"). Rank (o, q): o = the host's
 * index in switch-major order, q = the rank's index on its host. Two rings: the host ring (ranks (o, *), q -> q+1)
 * and the column ring (ranks (*, q), o -> o+1), which crosses hosts: every rank has its own inter-host peer, so the
 * L ranks of a host use the NIC in parallel. A row is the L blocks of one host's ranks.
 *
 * The slow column transfers start first and run behind host-ring work: each phase moves one block over the column
 * ring cut into L pieces, one piece beside each of the phase's L steps, and every step has exactly one callback.
 * Per host and direction the network carries L * (H-1) blocks (the flat ring: L * H - 1, all over one rank's link).
 *
 * All-gather (row o-s is spread over the host ring in phase s while row o-s-1 crosses the column ring):
 *   copy own input into its slot
 *   phase s = 0..H-1, step j = 0..L-1:
 *     column ring: (s < H-1) piece j of (o-s, q) to (o+1, q), piece j of (o-s-1, q) from (o-1, q)   (posted first)
 *     host ring:   (j < L-1) send (o-s, q-j) to (o, q+1), recv (o-s, q-j-1) from (o, q-1)
 *     notify (o-s, q-j)   (j = 0: own block, or the column block of the phase before; else received at step j-1)
 * Order handed over: per phase s the row o-s from (o-s, q) around the host ring; the own block first. Only the last
 * callback runs without a transfer in flight.
 *
 * Reduce-scatter (row o-s is reduced over the host ring in phase s = 1..H, own row last, while the partial sums of
 * row o-s+1 cross the column ring; S0/S1: host-ring scratch, X/Y: column partials, sent from one and received into
 * the other, roles swapping each phase):
 *   phase s = 1..H, step j = 0..L-1:
 *     column ring: (s >= 2) piece j of the partial of row o-s+1 to (o+1, q), of row o-s from (o-1, q)
 *     host ring:   (j >= 1) send partial of (o-s, q-j) to (o, q+1) (j = 1: the produced input block; else S[(j-1)%2]),
 *                  recv partial of (o-s, q-j-1) from (o, q-1) into S[j%2]
 *     produce (o-s, q-j-1)
 *     then (j >= 1) S[j%2] = op(S[j%2], input block (o-s, q-j-1))
 *   end of phase: s = 1: X = S[(L-1)%2]; s >= 2: received partial = op(received, S[(L-1)%2])
 *   copy the last received partial to the output
 * The host partial of row r at (o, q) is the sum over q' of the inputs of (o, q') for block (r, q); the column ring
 * then adds the host partials of every host, as the flat ring reduce-scatter does over ranks. Produce order: per
 * phase the row o-s from (o-s, q-1) around to (o-s, q), the own block (o, q) last; the first produce has nothing to
 * hide behind, and after the last one only its step's transfers, two local reductions and a copy remain. Sums are
 * taken in another order than the flat ring's: with integer data results are identical, with rounding they may
 * differ in the last bits.
 *
 * Zero counts keep every callback and drop every transfer.
 */
#include "algo/overlap_two_level.h"

#include <algorithm>

#include "algo/ring.h"

namespace hoccl::algo {

using namespace sched;

namespace {

int wrap(int v, int n) { return ((v % n) + n) % n; }

// The two-level coordinates of a communicator, or L = 0 when it has no such levels.
struct Grid {
  int L = 0, H = 0, o = 0, q = 0;
  std::vector<int> rankAt;  // q + L * o -> rank
  int at(int oo, int qq) const { return rankAt[wrap(qq, L) + L * wrap(oo, H)]; }
};

Grid gridOf(const topo::Topology& topo, int rank) {
  Grid g;
  if (topo.nranks < 4) return g;
  const topo::Hierarchy h = topo::hierarchy(topo);
  if (h.levels() < 2 || h.names[0] != "host") return g;
  g.L = h.sizes[0];
  g.H = topo.nranks / g.L;
  g.rankAt = h.rankAt;
  const int idx = static_cast<int>(std::find(g.rankAt.begin(), g.rankAt.end(), rank) - g.rankAt.begin());
  g.q = idx % g.L;
  g.o = idx / g.L;
  return g;
}

// Piece j of `pieces` of a block of c elements: [lo, hi).
std::pair<size_t, size_t> piece(size_t c, int pieces, int j) {
  return {blockStart(c, pieces, j), blockStart(c, pieces, j + 1)};
}

}  // namespace

bool twoLevelApplies(const topo::Topology& topo) { return gridOf(topo, 0).L >= 2; }

std::vector<int> twoLevelBlockOrder(const topo::Topology& topo, int rank, bool reduceScatter) {
  const Grid g = gridOf(topo, rank);
  std::vector<int> out;
  // All-gather: row o-s from (o-s, q); reduce-scatter: row o-s from (o-s, q-1), s = 1..H.
  for (int ph = reduceScatter ? 1 : 0; ph < (reduceScatter ? g.H + 1 : g.H); ++ph)
    for (int j = 0; j < g.L; ++j) out.push_back(g.at(g.o - ph, g.q - j - (reduceScatter ? 1 : 0)));
  return out;
}

Schedule twoLevelAllGatherSchedule(const CollArgs& a, const topo::Topology& topo) {
  const Grid g = gridOf(topo, a.rank);
  Schedule s;
  s.algorithm = "overlap_two_level";
  const size_t c = a.count;
  auto slot = [c](int r) { return static_cast<size_t>(r) * c; };
  // Where block r is read from when it is sent: the own block from the input (it may not be copied yet).
  auto sendFrom = [&](int peer, int r, size_t off, size_t n) {
    return r == a.rank ? send(peer, kInput, off, n) : send(peer, kOutput, slot(r) + off, n);
  };
  const int hostNext = g.at(g.o, g.q + 1), hostPrev = g.at(g.o, g.q - 1);
  const int colNext = g.at(g.o + 1, g.q), colPrev = g.at(g.o - 1, g.q);
  if (c) s.steps.push_back(Step{{copy(kInput, 0, kOutput, slot(a.rank), c)}});
  for (int ph = 0; ph < g.H; ++ph) {
    const int colSend = g.at(g.o - ph, g.q), colRecv = g.at(g.o - ph - 1, g.q);
    for (int j = 0; j < g.L; ++j) {
      Step st;
      if (c && ph + 1 < g.H) {
        const auto [lo, hi] = piece(c, g.L, j);
        if (hi > lo) {
          st.prims.push_back(sendFrom(colNext, colSend, lo, hi - lo));
          st.prims.push_back(recv(colPrev, kOutput, slot(colRecv) + lo, hi - lo));
        }
      }
      if (c && j + 1 < g.L) {
        st.prims.push_back(sendFrom(hostNext, g.at(g.o - ph, g.q - j), 0, c));
        const int in = g.at(g.o - ph, g.q - j - 1);
        st.prims.push_back(recv(hostPrev, kOutput, slot(in), c));
      }
      const int ready = g.at(g.o - ph, g.q - j);
      st.prims.push_back(notify(ready, kOutput, slot(ready), c));
      s.steps.push_back(std::move(st));
    }
  }
  return s;
}

Schedule twoLevelReduceScatterSchedule(const CollArgs& a, const topo::Topology& topo) {
  const Grid g = gridOf(topo, a.rank);
  Schedule s;
  s.algorithm = "overlap_two_level";
  const size_t c = a.count;
  auto block = [c](int r) { return static_cast<size_t>(r) * c; };
  const size_t hostSlot[2] = {0, c};
  size_t colSendAt = 2 * c, colRecvAt = 3 * c;  // X, Y: swap each phase
  if (c) s.scratchCount = 4 * c;
  const int hostNext = g.at(g.o, g.q + 1), hostPrev = g.at(g.o, g.q - 1);
  const int colNext = g.at(g.o + 1, g.q), colPrev = g.at(g.o - 1, g.q);
  for (int ph = 1; ph <= g.H; ++ph) {
    const int row = g.o - ph;
    for (int j = 0; j < g.L; ++j) {
      const int in = g.at(row, g.q - j - 1);
      const size_t recvSlot = hostSlot[j % 2], sendSlot = hostSlot[(j + 1) % 2];
      Step st;
      if (c && ph >= 2) {
        const auto [lo, hi] = piece(c, g.L, j);
        if (hi > lo) {
          st.prims.push_back(send(colNext, kScratch, colSendAt + lo, hi - lo));
          st.prims.push_back(recv(colPrev, kScratch, colRecvAt + lo, hi - lo));
        }
      }
      if (c && j >= 1) {
        const int out = g.at(row, g.q - j);
        st.prims.push_back(j == 1 ? send(hostNext, kInput, block(out), c) : send(hostNext, kScratch, sendSlot, c));
        st.prims.push_back(recv(hostPrev, kScratch, recvSlot, c));
      }
      st.prims.push_back(produce(in, kInput, block(in), c));
      s.steps.push_back(std::move(st));
      if (c && j >= 1) s.steps.push_back(Step{{reduceLocal(kInput, block(in), kScratch, recvSlot, c)}});
    }
    if (!c) continue;
    const size_t hostPartial = hostSlot[(g.L - 1) % 2];
    if (ph == 1) {
      s.steps.push_back(Step{{copy(kScratch, hostPartial, kScratch, colSendAt, c)}});
    } else {
      s.steps.push_back(Step{{reduceLocal(kScratch, hostPartial, kScratch, colRecvAt, c)}});
      std::swap(colSendAt, colRecvAt);
    }
  }
  if (c) s.steps.push_back(Step{{copy(kScratch, colSendAt, kOutput, 0, c)}});
  return s;
}

}  // namespace hoccl::algo
