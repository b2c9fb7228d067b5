/// @file shm_host_level.h
/// The shm transport's host level of hierarchical all-reduce, reduce-scatter and all-gather (transports/shortcut.h: HostLevel) on a communicator
/// that spans hosts: the ranks of one host meet in an arena of their own (Arena::openGroup, made at init without the
/// other hosts), swap their buffers' addresses, sizes and registrations in it for every call, and, when every one of
/// them registered the buffers the others touch (hocclMemAlloc memory, hocclCommRegister), read the host peers' inputs and write
/// their outputs through mappings (shm_peer_maps.h, cached per peer and block) instead of HO-Ring's ring steps over
/// the slots. See shm_host_level.cc for the protocol.
///
/// Operating range: all-reduce and reduce-scatter with a built-in op, and all-gather, on host memory, from
/// HOCCL_CMA_MIN_BYTES when set (0 turns the host level off), else from 256 KiB of the larger buffer (below that the
/// extra hand-off per call costs more than it saves).
#pragma once

#include <memory>
#include <vector>

#include "transports/shm/shm_peer_maps.h"
#include "transports/shm/shm_session.h"
#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// The shm host level ("shm host level").
class ShmHostLevel final : public HostLevel {
 public:
  /// Meets the other ranks of `ranks` (this host's, ascending, this rank included, at least two) in their arena.
  /// Throws like Arena::openGroup.
  ShmHostLevel(const ShortcutContext& ctx, std::vector<int> ranks);
  /// "shm host level".
  const char* name() const override { return "shm host level"; }
  /// This host's ranks.
  const std::vector<int>& ranks() const override { return ranks_; }
  /// See the operating range above.
  bool canRun(const CollCall& call) const override;
  /// Starts the host level of `call`; nothing happens until agree().
  std::unique_ptr<HostLevelOp> start(const CollCall& call, std::vector<HostPiece> mine) override;
  /// Calls whose host level ran through mappings.
  uint64_t mappedCalls() const override { return mappedCalls_; }
  /// Unmaps the host peers' registered buffers held in the cache.
  void releasePeerMemory() override { maps_->releaseAll(); }

 private:
  friend class HostLevelOpImpl;
  ShortcutContext comm_;  // the communicator's context (global ranks, counters, registrations)
  std::vector<int> ranks_;
  ConnectContext group_;  // the host's ranks: rank and nranks are positions in ranks_
  std::unique_ptr<ArenaSession> session_;
  std::unique_ptr<PeerMaps> maps_;  // by position in ranks_
  size_t minBytes_;
  uint64_t mappedCalls_ = 0;
};

}  // namespace hoccl::transport::shm
