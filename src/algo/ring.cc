/*
 * Ring algorithms.
 *
 * Ranks sit on a ring in ringOrder(); position p sends to position p+1 and receives from p-1. The buffer is split
 * into N blocks (nearly equal, blockStart()).
 *
 * Reduce-scatter (N-1 steps): at step s, position p sends the partial sum of block ord[p-1-s] and receives the
 * partial of block ord[p-2-s], adding its own input. Step 0 sends straight from the input; later steps send what
 * the previous step produced. After N-1 steps position p holds the full reduction of block ord[p], which is the
 * rank's own block, as reduce-scatter requires. Partials live in two alternating scratch blocks (the step barrier
 * guarantees a block is sent before it is overwritten), the last step writes the output.
 *
 * All-reduce = the same reduce-scatter, accumulating in the output buffer, followed by a ring all-gather of the
 * reduced blocks: 2(N-1) steps, 2(N-1)/N of the buffer over every edge.
 *
 * All-gather (N-1 steps): at step s position p forwards block ord[p-s] and receives block ord[p-s-1]; the own
 * block goes out straight from the input in step 0 while it is also copied to its slot in the output.
 *
 * Broadcast and reduce are chains along the ring starting at (broadcast) or ending at (reduce) the root, cut into
 * chunks so that every link works at once: at step t the rank at chain distance d handles chunk t-d.
 */
#include "algo/ring.h"

#include <algorithm>
#include <numeric>

namespace hoccl::algo {
namespace {

using namespace sched;

struct Ring {
  std::vector<int> ord;  // position -> rank
  int n, pos, next, prev;
  Ring(const topo::Topology& topo, int rank) : ord(ringOrder(topo)), n(static_cast<int>(ord.size())) {
    pos = static_cast<int>(std::find(ord.begin(), ord.end(), rank) - ord.begin());
    next = ord[(pos + 1) % n];
    prev = ord[(pos + n - 1) % n];
  }
  int rankAt(int p) const { return ord[((p % n) + n) % n]; }
};

struct Blocks {
  size_t count;
  int n;
  size_t start(int b) const { return blockStart(count, n, b); }
  size_t size(int b) const { return start(b + 1) - start(b); }
  size_t largest() const { return size(0); }
};

// Ring reduce-scatter steps. `finalDst`/`finalOff(b)` say where the fully reduced block goes; partials go to
// `partial` (kScratch with double buffering, or kOutput for all-reduce).
void reduceScatterSteps(Schedule& s, const Ring& ring, const Blocks& blocks, bool accumulateInOutput) {
  const int n = ring.n;
  for (int step = 0; step < n - 1; ++step) {
    int sendBlock = ring.rankAt(ring.pos - 1 - step);
    int recvBlock = ring.rankAt(ring.pos - 2 - step);
    bool last = step == n - 2;
    Step st;
    // What to send: step 0 sends our raw input; later steps forward the partial made in the previous step.
    if (step == 0) {
      st.prims.push_back(send(ring.next, kInput, blocks.start(sendBlock), blocks.size(sendBlock)));
    } else if (accumulateInOutput) {
      st.prims.push_back(send(ring.next, kOutput, blocks.start(sendBlock), blocks.size(sendBlock)));
    } else {
      st.prims.push_back(send(ring.next, kScratch, ((step - 1) % 2) * blocks.largest(), blocks.size(sendBlock)));
    }
    size_t srcOff = blocks.start(recvBlock);
    if (accumulateInOutput) {
      st.prims.push_back(
          recvReduce(ring.prev, kInput, srcOff, kOutput, blocks.start(recvBlock), blocks.size(recvBlock)));
    } else if (last) {
      st.prims.push_back(recvReduce(ring.prev, kInput, srcOff, kOutput, 0, blocks.size(recvBlock)));
    } else {
      st.prims.push_back(
          recvReduce(ring.prev, kInput, srcOff, kScratch, (step % 2) * blocks.largest(), blocks.size(recvBlock)));
    }
    s.steps.push_back(std::move(st));
  }
}

// Ring all-gather steps over the output. `first` (optional) is merged into step 0 and `ownFromInput` makes step 0
// send the own block straight from the input: together they let all-gather copy its input into place while the
// first transfer runs, instead of before it.
void allGatherSteps(Schedule& s, const Ring& ring, const Blocks& blocks, bool ownFromInput = false,
                    std::vector<Prim> first = {}) {
  const int n = ring.n;
  for (int step = 0; step < n - 1; ++step) {
    int sendBlock = ring.rankAt(ring.pos - step);
    int recvBlock = ring.rankAt(ring.pos - step - 1);
    Step st;
    if (step == 0) st.prims = std::move(first);
    if (step == 0 && ownFromInput) st.prims.push_back(send(ring.next, kInput, 0, blocks.size(sendBlock)));
    else st.prims.push_back(send(ring.next, kOutput, blocks.start(sendBlock), blocks.size(sendBlock)));
    st.prims.push_back(recv(ring.prev, kOutput, blocks.start(recvBlock), blocks.size(recvBlock)));
    s.steps.push_back(std::move(st));
  }
  if (n == 1 && !first.empty()) s.steps.push_back(Step{std::move(first)});
}

Schedule allReduce(const CollArgs& a, const Ring& ring) {
  Schedule s;
  if (ring.n == 1) {
    s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, a.count)}});
    return s;
  }
  Blocks blocks{a.count, ring.n};
  reduceScatterSteps(s, ring, blocks, /*accumulateInOutput=*/true);
  // After reduce-scatter, position p owns block ord[p]: the all-gather starts by sending it.
  allGatherSteps(s, ring, blocks);
  return s;
}

Schedule reduceScatter(const CollArgs& a, const Ring& ring) {
  Schedule s;
  if (ring.n == 1) {
    s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, a.count)}});
    return s;
  }
  // Blocks of the input are the ranks' recvcount-sized slices.
  Blocks blocks{a.count * static_cast<size_t>(ring.n), ring.n};
  s.scratchCount = ring.n > 2 ? 2 * blocks.largest() : 0;
  reduceScatterSteps(s, ring, blocks, /*accumulateInOutput=*/false);
  return s;
}

Schedule allGather(const CollArgs& a, const Ring& ring) {
  Schedule s;
  Blocks blocks{a.count * static_cast<size_t>(ring.n), ring.n};
  allGatherSteps(s, ring, blocks, /*ownFromInput=*/true, {copy(kInput, 0, kOutput, blocks.start(a.rank), a.count)});
  return s;
}

size_t chunkOf(const CollArgs& a) {
  size_t c = a.chunkCount ? a.chunkCount : (size_t{1} << 18);
  return std::max<size_t>(c, 1);
}

Schedule broadcast(const CollArgs& a, const Ring& ring, int rootPos) {
  Schedule s;
  const int n = ring.n;
  const int d = ((ring.pos - rootPos) % n + n) % n;  // chain distance from the root
  if (d == 0) s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, a.count)}});
  if (n == 1 || a.count == 0) return s;
  const size_t chunk = chunkOf(a);
  const size_t nchunks = (a.count + chunk - 1) / chunk;
  auto chunkRange = [&](size_t c) {
    return std::pair<size_t, size_t>{c * chunk, std::min(chunk, a.count - c * chunk)};
  };
  // Step t: receive chunk t-d+1 from the previous rank, forward chunk t-d to the next one.
  for (size_t t = 0; t + 2 < nchunks + static_cast<size_t>(n); ++t) {
    Step st;
    long sendChunk = static_cast<long>(t) - d, recvChunk = static_cast<long>(t) - d + 1;
    if (d < n - 1 && sendChunk >= 0 && sendChunk < static_cast<long>(nchunks)) {
      auto [off, cnt] = chunkRange(sendChunk);
      st.prims.push_back(send(ring.next, kOutput, off, cnt));
    }
    if (d > 0 && recvChunk >= 0 && recvChunk < static_cast<long>(nchunks)) {
      auto [off, cnt] = chunkRange(recvChunk);
      st.prims.push_back(recv(ring.prev, kOutput, off, cnt));
    }
    if (!st.prims.empty()) s.steps.push_back(std::move(st));
  }
  return s;
}

Schedule reduce(const CollArgs& a, const Ring& ring, int rootPos) {
  Schedule s;
  const int n = ring.n;
  // Chain position q: 0 is the rank after the root (the leaf), n-1 is the root.
  const int q = ((ring.pos - rootPos - 1) % n + n) % n;
  const bool isRoot = q == n - 1;
  if (n == 1) {
    s.steps.push_back(Step{{copy(kInput, 0, kOutput, 0, a.count)}});
    return s;
  }
  if (a.count == 0) return s;
  const size_t chunk = std::min(chunkOf(a), a.count);
  const size_t nchunks = (a.count + chunk - 1) / chunk;
  if (!isRoot && q > 0) s.scratchCount = 2 * chunk;
  auto chunkRange = [&](size_t c) {
    return std::pair<size_t, size_t>{c * chunk, std::min(chunk, a.count - c * chunk)};
  };
  // Step t: receive partial chunk t-q+1 and add our input; send partial chunk t-q onward.
  for (size_t t = 0; t + 2 < nchunks + static_cast<size_t>(n); ++t) {
    Step st;
    long sendChunk = static_cast<long>(t) - q, recvChunk = static_cast<long>(t) - q + 1;
    if (!isRoot && sendChunk >= 0 && sendChunk < static_cast<long>(nchunks)) {
      auto [off, cnt] = chunkRange(sendChunk);
      if (q == 0) st.prims.push_back(send(ring.next, kInput, off, cnt));
      else st.prims.push_back(send(ring.next, kScratch, (sendChunk % 2) * chunk, cnt));
    }
    if (q > 0 && recvChunk >= 0 && recvChunk < static_cast<long>(nchunks)) {
      auto [off, cnt] = chunkRange(recvChunk);
      if (isRoot) st.prims.push_back(recvReduce(ring.prev, kInput, off, kOutput, off, cnt));
      else st.prims.push_back(recvReduce(ring.prev, kInput, off, kScratch, (recvChunk % 2) * chunk, cnt));
    }
    if (!st.prims.empty()) s.steps.push_back(std::move(st));
  }
  return s;
}

}  // namespace

std::vector<int> ringOrder(const topo::Topology& topo) { return topo::flatRingOrder(topo); }

std::optional<kernels::FoldOrder> ringFold(const sched::CollArgs& args, const topo::Topology& topo) {
  if (args.coll != Coll::AllReduce && args.coll != Coll::ReduceScatter) return std::nullopt;
  const std::vector<int> ord = ringOrder(topo);
  const int n = static_cast<int>(ord.size());
  // Block ord[p] ends its reduce-scatter at position p (reduceScatterSteps).
  std::vector<uint32_t> endsAt(n);
  for (int p = 0; p < n; ++p) endsAt[ord[p]] = static_cast<uint32_t>(p);
  const size_t total = args.coll == Coll::AllReduce ? args.count : args.count * static_cast<size_t>(n);
  kernels::FoldOrder fold;
  fold.orders = kernels::FoldOrder::ringOrders(ord);
  for (int b = 0; b < n; ++b) fold.segments.push_back({blockStart(total, n, b), endsAt[b]});
  return fold;
}

size_t blockStart(size_t count, int n, int b) {
  return static_cast<size_t>((static_cast<unsigned __int128>(count) * b) / n);
}

Schedule ringSchedule(const CollArgs& a, const topo::Topology& topo) {
  Ring ring(topo, a.rank);
  int rootPos = static_cast<int>(std::find(ring.ord.begin(), ring.ord.end(), a.root) - ring.ord.begin());
  Schedule s;
  switch (a.coll) {
    case Coll::AllReduce: s = allReduce(a, ring); break;
    case Coll::ReduceScatter: s = reduceScatter(a, ring); break;
    case Coll::AllGather: s = allGather(a, ring); break;
    case Coll::Broadcast: s = broadcast(a, ring, rootPos); break;
    case Coll::Reduce: s = reduce(a, ring, rootPos); break;
    default: break;
  }
  s.algorithm = "ring";
  return s;
}

}  // namespace hoccl::algo
