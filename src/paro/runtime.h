/// @file runtime.h
/// The PaRO runtime: the communicators of a strategy (made with hocclCommSplit) and the collectives of a training
/// step run on the caller's buffers. Uses only the public C API of hoccl, so it sits on any communicator.
/// Buffer sizes and block layout: see layout.h (full buffers hold paddedCount(count) elements).
#pragma once

#include <array>
#include <cstdint>

#include "hoccl/hoccl.h"
#include "paro/layout.h"
#include "paro/plan.h"
#include "paro/strategy.h"

namespace hoccl::paro {

/// One rank's PaRO state over a communicator. Every method is collective over that communicator.
class Runtime {
 public:
  /// Reads the topology of comm (hocclCommRankLocation), groups it, splits comm into the intra-group and
  /// inter-group communicators (and a global one when the strategy all-reduces unsharded gradients).
  Runtime(hocclComm_t comm, const Strategy& strategy, GroupLevel level);
  /// Destroys the communicators it made.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// The strategy.
  const Strategy& strategy() const { return strategy_; }
  /// The group layout.
  const Layout& layout() const { return layout_; }
  /// This rank in the parent communicator.
  int rank() const { return rank_; }
  /// The communicator of a kind (nullptr for a global one that was not needed).
  hocclComm_t comm(CommKind kind) const { return comms_[static_cast<int>(kind)]; }

  /// The shard range of a state for count elements (padded buffer coordinates).
  Range shard(State state, uint64_t count) const { return shardRange(layout_, strategy_.of(state), rank_, count); }

  /// P shard -> full parameters.
  void gatherParams(const void* shard, void* full, uint64_t count, hocclDataType_t type, hocclStream_t stream);
  /// Full gradient -> G shard (reduced over the group or everybody).
  void reduceGrads(const void* full, void* shard, uint64_t count, hocclDataType_t type, hocclStream_t stream);
  /// Accumulated G shard -> OS shard of the fully reduced gradient.
  void syncGrads(const void* gradShard, void* optGrad, uint64_t count, hocclDataType_t type, hocclStream_t stream);
  /// Updated OS shard of the parameters -> P shard.
  void rebuildParams(const void* optParams, void* paramShard, uint64_t count, hocclDataType_t type,
                     hocclStream_t stream);

  /// Counters summed over the communicators this object made.
  hocclCommCounters_t counters() const;
  /// Resets them.
  void resetCounters();

 private:
  // One call on the communicator of a kind; a one-rank communicator becomes a local copy.
  void allGather(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s);
  void reduceScatter(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s);
  void allReduce(CommKind k, const void* in, void* out, uint64_t count, hocclDataType_t t, hocclStream_t s);
  void copy(const void* in, void* out, uint64_t count, hocclDataType_t t);
  void check(hocclResult_t result, const char* what, hocclComm_t comm) const;
  void* scratch(uint64_t bytes);

  Strategy strategy_;
  Layout layout_;
  int rank_ = 0;
  std::array<hocclComm_t, 3> comms_{};
  std::vector<unsigned char> scratch_;
};

/// The layout of comm's ranks grouped by level (reads every rank's location with hocclCommRankLocation).
Layout layoutOfComm(hocclComm_t comm, GroupLevel level);

/// Bytes of one element of a hoccl datatype (InvalidArgument for an unknown one).
size_t dataTypeSize(hocclDataType_t type);

}  // namespace hoccl::paro
