// HO-Ring: Hierarchical Overlapping Rings for all-reduce, reduce-scatter and all-gather.
//
// Levels come from topo::hierarchy(): level 0 = the ranks of a host, level 1 = the hosts of a switch, level 2 = the
// switches (fewer levels for uneven or degenerate shapes). A rank has one coordinate x_i per level; at level i the
// ranks that agree on every other coordinate form one ring of n_i ranks, ordered by x_i. All rings of a level run
// at the same time, so every NIC and every inter-switch path carries traffic at once.
//
// Block layout. The working buffer W of one chunk is cut recursively: into n_0 parts by x_0, each of those into n_1
// parts by x_1, and so on. After the reduce-scatter of level i, a rank holds the reduction over its level-0..i rings
// of the part named by its coordinates x_0..x_i; after all levels it holds exactly one "virtual block"
// v = ((x_0 * n_1 + x_1) * n_2 + x_2) ... of the chunk. The all-gathers undo this, innermost level first.
//   - All-reduce: W is the output buffer; the first reduce-scatter reads the input (in-place safe: a part of the
//     input is read before or in the same prim that writes that part of the output). Phases:
//     RS level 0, RS level 1, ..., RS top, AG top, ..., AG level 0 (RS top + AG top = the all-reduce of the top
//     level on a 1/(n_0 * ... * n_{top-1}) shard).
//   - Reduce-scatter / all-gather: NCCL fixes that rank r ends with (or starts from) block r, which in this
//     recursion is virtual block v(r). W is scratch, laid out chunk by chunk with the blocks in virtual order:
//     chunk k holds slice k of every rank's block. A local copy-in step permutes the input into W, a copy-out step
//     writes the result (RS: rank r's own block; AG: all blocks) to the output. Input is read only by copy-in and
//     the output written only by copy-out of the same slice, so the in-place bindings are safe.
//
// Ring steps, for a ring of n ranks, position p, parts P_0..P_{n-1} of the current range:
//   reduce-scatter step t = 0..n-2: send P_{p-t-1} to next, recvReduce P_{p-t-2} from prev (mod n): p ends with P_p.
//   all-gather     step t = 0..n-2: send P_{p-t} to next, recv P_{p-t-1} from prev.
//
// Pipelining across levels ("overlapping" in time): the buffer is cut into K chunks and chunk k runs its j-th slot
// (one ring step of one phase, or a copy step) in global step k + j. Every rank uses the same slot layout (all rings
// of a level have the same length), so every send and its receive sit in the same global step on both ranks, posted
// in chunk order: FIFO matching holds and the schedule is deadlock-free under rendezvous semantics (by induction on
// the global step). Steps left empty on a rank are dropped. In steady state one step carries chunk k across the
// switches while chunk k+1 is reduced inside hosts and chunk k-1 is gathered back.
//
// Host level on mapped memory (hoRingScheduleAboveHost): when every rank of a host registered the buffers its host
// peers touch, the transport's host level (transports/shortcut.h) does level 0 without slots:
//   - all-reduce: before the first step, each rank reduces its level-0 part of every chunk straight from its host
//     peers' inputs into its output; after the last, it copies that part into their outputs;
//   - reduce-scatter: before the first step, each rank reduces its level-0 part of every chunk of W straight from
//     the host peers' inputs (each piece from where its block lies in them) into W, replacing copy-in and level 0;
//   - all-gather: after the last step (W's level-0 part of every chunk complete), each rank copies that part from W
//     into every host rank's output, its own included, replacing level 0 and copy-out.
// The schedule is the same one without those slots. Dropping them shifts every chunk's remaining slots by the same
// amount (copy-in and level 0's reduce-scatter lead every chunk; level 0's all-gather and copy-out end it), so each
// channel between hosts still carries its messages in the same order, and the induction above still holds on the
// global steps of the full schedule (the dropped steps are empty on this rank). Level-0 part x_0 of a chunk of W is
// the virtual blocks x_0 * m .. (x_0 + 1) * m - 1 (m = n / n_0): the blocks of this rank and of the ranks in its
// place on the other hosts, never a host peer's own block, so an in-place host peer's output is never read (RS)
// nor its input written (AG) by the others.
#include "algo/ho_ring.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::algo {
namespace {

using sched::Coll;
using sched::Prim;

// Element range [off, off+len).
struct Range {
  size_t off = 0;
  size_t len = 0;
};

// Part j of n near-equal parts of r (the first len % n parts are one element longer).
Range part(Range r, int n, int j) {
  size_t q = r.len / n, rem = r.len % n;
  size_t uj = static_cast<size_t>(j);
  return {r.off + uj * q + std::min(uj, rem), q + (uj < rem ? 1 : 0)};
}

constexpr size_t kMaxChunks = 64;  // bounds the schedule size (steps ~ chunks + slots)

int mod(int a, int n) { return ((a % n) + n) % n; }

// Everything one rank needs to emit its prims.
struct Ctx {
  const topo::Hierarchy* h;
  int rank;
  uint16_t work;  // W
  uint16_t src0;  // source of the first reduce-scatter phase (kInput for all-reduce)
  bool skipHost;  // level 0 runs outside the schedule (host level on mapped memory)
};

// The range of chunk c that rank holds after `depth` reduce-scatter levels.
Range rangeAt(const Ctx& cx, Range chunk, int depth) {
  for (int lv = 0; lv < depth; ++lv) chunk = part(chunk, cx.h->sizes[lv], cx.h->coord[cx.rank][lv]);
  return chunk;
}

using Slot = std::vector<Prim>;

// Appends the n-1 slots of the reduce-scatter of `level` on one chunk.
void reduceScatterSlots(const Ctx& cx, Range chunk, int level, bool first, std::vector<Slot>& slots) {
  int n = cx.h->sizes[level], p = cx.h->coord[cx.rank][level];
  int next = cx.h->neighbour(cx.rank, level, mod(p + 1, n)), prev = cx.h->neighbour(cx.rank, level, mod(p - 1, n));
  Range r = rangeAt(cx, chunk, level);
  uint16_t src = first ? cx.src0 : cx.work;
  for (int t = 0; t + 1 < n; ++t) {
    Slot s;
    Range out = part(r, n, mod(p - t - 1, n)), in = part(r, n, mod(p - t - 2, n));
    if (out.len) s.push_back(sched::send(next, t == 0 ? src : cx.work, out.off, out.len));
    if (in.len) s.push_back(sched::recvReduce(prev, src, in.off, cx.work, in.off, in.len));
    slots.push_back(std::move(s));
  }
}

// Appends the n-1 slots of the all-gather of `level` on one chunk.
void allGatherSlots(const Ctx& cx, Range chunk, int level, std::vector<Slot>& slots) {
  int n = cx.h->sizes[level], p = cx.h->coord[cx.rank][level];
  int next = cx.h->neighbour(cx.rank, level, mod(p + 1, n)), prev = cx.h->neighbour(cx.rank, level, mod(p - 1, n));
  Range r = rangeAt(cx, chunk, level);
  for (int t = 0; t + 1 < n; ++t) {
    Slot s;
    Range out = part(r, n, mod(p - t, n)), in = part(r, n, mod(p - t - 1, n));
    if (out.len) s.push_back(sched::send(next, cx.work, out.off, out.len));
    if (in.len) s.push_back(sched::recv(prev, cx.work, in.off, in.len));
    slots.push_back(std::move(s));
  }
}

// Virtual block index of every rank: ((x_0 * n_1 + x_1) * n_2 + x_2) ...
std::vector<size_t> virtualBlocks(const topo::Hierarchy& h) {
  std::vector<size_t> v(h.coord.size());
  for (size_t r = 0; r < v.size(); ++r)
    for (int lv = 0; lv < h.levels(); ++lv) v[r] = v[r] * h.sizes[lv] + h.coord[r][lv];
  return v;
}

// Interleaves per-chunk slot lists: chunk k's slot j goes to global step k + j; empty steps are dropped.
std::vector<sched::Step> interleave(std::vector<std::vector<Slot>>& chunks) {
  size_t total = 0;
  for (size_t k = 0; k < chunks.size(); ++k) total = std::max(total, k + chunks[k].size());
  std::vector<sched::Step> steps(total);
  for (size_t k = 0; k < chunks.size(); ++k)
    for (size_t j = 0; j < chunks[k].size(); ++j)
      for (auto& prim : chunks[k][j]) steps[k + j].prims.push_back(prim);
  steps.erase(std::remove_if(steps.begin(), steps.end(), [](const sched::Step& s) { return s.prims.empty(); }),
              steps.end());
  return steps;
}

sched::Schedule single(const sched::CollArgs& args) {
  sched::Schedule s;
  s.algorithm = "ho_ring";
  if (args.count) s.steps.push_back({{sched::copy(sched::kInput, 0, sched::kOutput, 0, args.count)}});
  return s;
}

bool supported(Coll coll) { return coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::AllGather; }

}  // namespace

bool hoRingApplicable(const sched::CollArgs& args, const topo::Topology& topo) {
  return supported(args.coll) && args.nranks == topo.nranks && args.nranks >= 1 && args.rank >= 0 &&
         args.rank < args.nranks;
}

size_t hoRingDefaultChunks(size_t elems, int nranks) {
  constexpr size_t kChunkElems = 128 * 1024;  // 512 KiB of floats per chunk of the working buffer
  constexpr size_t kMinMessage = 512;         // elements per ring message at the innermost split
  size_t k = (elems + kChunkElems - 1) / kChunkElems;
  k = std::min(k, elems / (static_cast<size_t>(nranks) * kMinMessage));
  return std::clamp<size_t>(k, 1, kMaxChunks);
}

namespace {

// The chunk count of hoRingSchedule for args (workElems > 0).
size_t chunksOf(const sched::CollArgs& args, size_t workElems) {
  const bool ar = args.coll == Coll::AllReduce;
  size_t k = args.chunkCount ? std::max<size_t>(1, (workElems + args.chunkCount - 1) / args.chunkCount)
                             : hoRingDefaultChunks(workElems, args.nranks);
  // For RS/AG a chunk is one slice of every block, so there are at most c chunks.
  return std::clamp<size_t>(std::min(k, ar ? workElems : args.count), 1, kMaxChunks);
}

sched::Schedule generate(const sched::CollArgs& args, const topo::Topology& topo, bool skipHost);

}  // namespace

HoRingHostSplit hoRingHostSplit(const sched::CollArgs& args, const topo::Topology& topo) {
  HoRingHostSplit split;
  if (args.count == 0 || !hoRingApplicable(args, topo) || args.nranks < 2) return split;
  topo::Hierarchy h = topo::hierarchy(topo);
  if (h.levels() < 2 || h.sizes[0] < 2) return split;
  for (int x = 0; x < h.sizes[0]; ++x) split.ring.push_back(h.neighbour(args.rank, 0, x));
  std::sort(split.ring.begin(), split.ring.end());
  const bool ar = args.coll == Coll::AllReduce;
  const size_t n = static_cast<size_t>(args.nranks), c = args.count, workElems = ar ? c : c * n;
  const size_t k = chunksOf(args, workElems);
  // RS/AG: which rank's block sits at each virtual place of a chunk.
  const std::vector<size_t> v = virtualBlocks(h);
  std::vector<size_t> owner(n);
  for (size_t r = 0; r < n; ++r) owner[v[r]] = r;
  for (size_t ki = 0; ki < k; ++ki) {
    const Range slice = part({0, ar ? workElems : c}, static_cast<int>(k), static_cast<int>(ki));
    const Range chunk = ar ? slice : Range{slice.off * n, slice.len * n};
    const Range r = part(chunk, h.sizes[0], h.coord[args.rank][0]);
    if (ar) {
      if (r.len) split.mine.push_back({r.off, r.off, r.len});
      continue;
    }
    // Cut the part where its blocks change owner: place w of the chunk is element e of block b.
    for (size_t w = r.off; w < r.off + r.len;) {
      const size_t b = (w - chunk.off) / slice.len, e = (w - chunk.off) % slice.len;
      const size_t len = std::min(r.off + r.len - w, slice.len - e);
      split.mine.push_back({owner[b] * c + slice.off + e, w, len});
      w += len;
    }
  }
  split.applicable = true;
  return split;
}

sched::Schedule hoRingScheduleAboveHost(const sched::CollArgs& args, const topo::Topology& topo) {
  if (!hoRingHostSplit(args, topo).applicable)
    throwInvalidArgument(fmt::format("ho_ring without its host level cannot run {} of count {} with rank {} of {}",
                                     sched::collName(args.coll), args.count, args.rank, args.nranks));
  return generate(args, topo, true);
}

sched::Schedule hoRingSchedule(const sched::CollArgs& args, const topo::Topology& topo) {
  return generate(args, topo, false);
}

std::optional<kernels::FoldOrder> hoRingFold(const sched::CollArgs& args, const topo::Topology& topo) {
  const bool ar = args.coll == Coll::AllReduce;
  if ((!ar && args.coll != Coll::ReduceScatter) || !hoRingApplicable(args, topo) || args.nranks < 2)
    return std::nullopt;
  const topo::Hierarchy h = topo::hierarchy(topo);
  if (h.levels() != 1) return std::nullopt;
  const int n = h.sizes[0];
  std::vector<int> ring(n);
  for (int x = 0; x < n; ++x) ring[x] = h.rankAt[x];
  kernels::FoldOrder fold;
  fold.orders = kernels::FoldOrder::ringOrders(ring);
  const size_t c = args.count;
  if (!ar) {  // every slice of rank r's block sits at r's place of its chunk (virtual block = coordinate)
    for (int r = 0; r < n; ++r)
      fold.segments.push_back({static_cast<size_t>(r) * c, static_cast<uint32_t>(h.coord[r][0])});
    return fold;
  }
  // Part j of chunk k (reduceScatterSlots) ends at position j.
  const size_t k = c ? chunksOf(args, c) : 1;
  for (size_t ki = 0; ki < k; ++ki) {
    const Range slice = part({0, c}, static_cast<int>(k), static_cast<int>(ki));
    for (int j = 0; j < n; ++j) fold.segments.push_back({part(slice, n, j).off, static_cast<uint32_t>(j)});
  }
  return fold;
}

namespace {

sched::Schedule generate(const sched::CollArgs& args, const topo::Topology& topo, bool skipHost) {
  if (!hoRingApplicable(args, topo))
    throwInvalidArgument(fmt::format("ho_ring cannot run {} with rank {} of {} on a topology of {} ranks",
                                     sched::collName(args.coll), args.rank, args.nranks, topo.nranks));
  if (args.nranks == 1) return single(args);
  topo::Hierarchy h = topo::hierarchy(topo);
  const size_t n = static_cast<size_t>(args.nranks), c = args.count;
  bool ar = args.coll == Coll::AllReduce;
  size_t workElems = ar ? c : c * n;
  sched::Schedule sched;
  sched.algorithm = "ho_ring";
  if (workElems == 0) return sched;
  Ctx cx{&h, args.rank, ar ? sched::kOutput : sched::kScratch, ar ? sched::kInput : sched::kScratch, skipHost};
  const size_t k = chunksOf(args, workElems);
  std::vector<size_t> v = virtualBlocks(h);
  std::vector<std::vector<Slot>> chunks(k);
  for (size_t ki = 0; ki < k; ++ki) {
    // AR: chunk ki of the buffer. RS/AG: slice ki of each block; W holds the slices in virtual order.
    Range slice = part({0, ar ? workElems : c}, static_cast<int>(k), static_cast<int>(ki));
    Range chunk = ar ? slice : Range{slice.off * n, slice.len * n};
    auto& slots = chunks[ki];
    if (slice.len == 0) continue;
    if (args.coll == Coll::ReduceScatter && !cx.skipHost) {  // skipHost: the host level reduces into W
      Slot in;
      for (size_t r = 0; r < n; ++r)
        in.push_back(sched::copy(sched::kInput, r * c + slice.off, cx.work, chunk.off + v[r] * slice.len, slice.len));
      slots.push_back(std::move(in));
    } else if (args.coll == Coll::AllGather) {
      slots.push_back(
          {sched::copy(sched::kInput, slice.off, cx.work, chunk.off + v[args.rank] * slice.len, slice.len)});
    }
    if (args.coll != Coll::AllGather)
      for (int lv = cx.skipHost ? 1 : 0; lv < h.levels(); ++lv) reduceScatterSlots(cx, chunk, lv, lv == 0, slots);
    if (args.coll != Coll::ReduceScatter)
      for (int lv = h.levels() - 1; lv >= (cx.skipHost ? 1 : 0); --lv) allGatherSlots(cx, chunk, lv, slots);
    if (args.coll == Coll::ReduceScatter) {
      slots.push_back(
          {sched::copy(cx.work, chunk.off + v[args.rank] * slice.len, sched::kOutput, slice.off, slice.len)});
    } else if (args.coll == Coll::AllGather && !cx.skipHost) {  // skipHost: the host level writes the outputs
      Slot out;
      for (size_t r = 0; r < n; ++r)
        out.push_back(sched::copy(cx.work, chunk.off + v[r] * slice.len, sched::kOutput, r * c + slice.off, slice.len));
      slots.push_back(std::move(out));
    }
  }
  sched.steps = interleave(chunks);
  if (!ar) sched.scratchCount = workElems;
  return sched;
}

}  // namespace

}  // namespace hoccl::algo
