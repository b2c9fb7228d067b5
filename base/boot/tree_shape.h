/// @file tree_shape.h
/// The shape of the bootstrap's gather tree (pure index math, no I/O; used by gather_tree.cc and the root).
///
/// Ranks [0, n) form a tree whose every subtree is a contiguous range of ranks: the node of range [lo, hi) is rank
/// lo, and its children are the nodes of up to `fanout` nearly equal, contiguous parts of [lo + 1, hi) (the first
/// parts one larger when they cannot all be equal). Rank 0 is the top. The depth is about log_fanout(n), and because
/// a subtree is a range, what it gathers is one contiguous block of an all-gather's slots.
#pragma once

#include <algorithm>
#include <vector>

namespace hoccl::boot {

/// A contiguous range of ranks [lo, hi): a subtree of the gather tree, whose node is rank lo.
struct RankRange {
  int lo = 0;  ///< first rank (the subtree's node)
  int hi = 0;  ///< one past the last rank
  /// Ranks in the range.
  int size() const { return hi - lo; }
};

/// The parts of range r's children: [r.lo + 1, r.hi) cut into min(fanout, r.size() - 1) contiguous parts, larger
/// ones first.
inline std::vector<RankRange> childRanges(RankRange r, int fanout) {
  std::vector<RankRange> out;
  const int rest = r.size() - 1;
  if (rest <= 0 || fanout < 1) return out;
  const int parts = std::min(fanout, rest);
  int at = r.lo + 1;
  for (int i = 0; i < parts; ++i) {
    const int len = rest / parts + (i < rest % parts ? 1 : 0);
    out.push_back({at, at + len});
    at += len;
  }
  return out;
}

/// Where one rank sits in the gather tree of n ranks.
struct TreePlace {
  RankRange range;                  ///< its subtree (range.lo is the rank itself)
  int parent = -1;                  ///< its parent (-1: the top, rank 0)
  std::vector<RankRange> children;  ///< its children's subtrees, in rank order (child = children[i].lo)
  int depth = 0;                    ///< edges between it and rank 0
};

/// The place of `rank` (0 <= rank < n) in the gather tree of n ranks with the given fanout (>= 1).
inline TreePlace treePlace(int n, int rank, int fanout) {
  TreePlace p;
  p.range = {0, n};
  while (p.range.lo != rank) {
    const std::vector<RankRange> parts = childRanges(p.range, fanout);
    auto it = std::find_if(parts.begin(), parts.end(), [&](const RankRange& c) { return rank >= c.lo && rank < c.hi; });
    if (it == parts.end()) return TreePlace{};  // rank outside [0, n): no place
    p.parent = p.range.lo;
    p.range = *it;
    ++p.depth;
  }
  p.children = childRanges(p.range, fanout);
  return p;
}

}  // namespace hoccl::boot
