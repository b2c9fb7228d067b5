/// @file fold_order.h
/// In which order a reduction combines the ranks' inputs, element by element. A floating-point sum of three or more
/// inputs depends on its order ((a + b) + c is not always a + (b + c)), so two algorithms give the same bits only when
/// they fold every element in the same order. A schedule says how it folds (algo::Algorithm::fold: the ring adds
/// along the ring, ending at the rank that owns the block); a shortcut given that order (transport::CollCall::fold)
/// folds the same way, and the two can then stand in for each other between calls without the results changing in
/// the last bits (the online choice, comm/online_choice.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"

namespace hoccl::kernels {

/// Element ranges of a buffer, each with the order in which its elements combine the ranks' inputs:
/// order {q0, q1, ..., q(n-1)} means ((x_q0 op x_q1) op x_q2) ... op x_q(n-1), each step rounded to the element type.
struct FoldOrder {
  /// Elements [begin, the next segment's begin) fold in orders[order].
  struct Segment {
    size_t begin;    ///< first element (index into the buffer the reduction reads)
    uint32_t order;  ///< index into orders
  };
  std::vector<std::vector<int>> orders;  ///< permutations of the ranks 0..n-1
  std::vector<Segment> segments;         ///< ascending, the first at element 0; the last runs to the buffer's end

  /// The orders of a ring given as position -> rank: orders[j] starts at position j + 1 and goes round to position j
  /// (the order in which a ring's reduce-scatter adds up the part that ends at position j).
  static std::vector<std::vector<int>> ringOrders(const std::vector<int>& ring);

  /// Calls f(first, end, order) for every piece of [first, end) that lies in one segment, in ascending order.
  template <class F>
  void forEach(size_t first, size_t end, F&& f) const;
};

/// out[i] = the fold of sources[order[0]][i], sources[order[1]][i], ... for n elements of `dt` (sources indexed by
/// rank). out may coincide with any source: when it does with one that is not among the first two of the order
/// (which would be overwritten before it is read), the fold runs through a private buffer. One rank: a copy.
void foldInto(const MemoryOps& mem, void* out, const std::vector<const void*>& sources, const std::vector<int>& order,
              size_t n, hocclDataType_t dt, BinOp op);

template <class F>
void FoldOrder::forEach(size_t first, size_t end, F&& f) const {
  // The last segment that begins at or before `first`.
  size_t lo = 0, hi = segments.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (segments[mid].begin <= first ? lo : hi) = mid;
  }
  for (size_t s = lo; s < segments.size() && first < end; ++s) {
    const size_t stop = s + 1 < segments.size() ? std::min(end, segments[s + 1].begin) : end;
    if (stop > first) f(first, stop, orders[segments[s].order]);
    first = std::max(first, stop);
  }
}

}  // namespace hoccl::kernels
