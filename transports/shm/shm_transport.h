/// @file shm_transport.h
/// The shared-memory transport: reaches every peer on the same host (same host hash) through POSIX shared memory.
/// Parameters: HOCCL_SHM_DISABLE (1 = not used), HOCCL_SHM_SLOT_SIZE (bytes per slot, default 512 KiB, rounded up
/// to 4 KiB), HOCCL_SHM_SLOTS (slots per direction, default 8). When it reaches every peer of a communicator it
/// also offers two collective shortcuts over a shared arena: small one-shot collectives (shm_small.h) and single
/// copy between the processes' buffers (shm_single_copy.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transports/shortcut.h"
#include "transports/transport.h"

namespace hoccl::transport::shm {

class Segment;

/// The shm transport.
class ShmTransport final : public Transport {
 public:
  /// Reads HOCCL_SHM_SLOT_SIZE and HOCCL_SHM_SLOTS (InvalidArgument if malformed).
  ShmTransport();
  /// "shm".
  const char* name() const override { return "shm"; }
  /// True when the peer has the same host hash as this rank.
  bool canConnect(const ConnectContext& ctx, int peer) const override;
  /// Creates this rank's outgoing segments, maps the peers' ones, unlinks every name once both sides have mapped
  /// it. Collective (two all-gathers and a barrier over the bootstrap) so that a failure on any rank is reported on
  /// every rank instead of hanging.
  std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext& ctx, const std::vector<int>& peers) override;
  /// Lazy connections are supported (nothing to publish at init: the segments' names are known).
  bool connectsLazily() const override { return true; }
  /// Yes: an idle channel can be closed (HOCCL_MAX_CONNS, shm_close.cc), its segments unmapped and freed, and
  /// connected again by connectPeers.
  bool closesIdle() const override { return true; }
  /// Creates this rank's outgoing segment to every peer, then waits for and maps each peer's segment to this rank.
  /// Each creator keeps its file open for the channel's lifetime (it cannot tell when the peer has opened it), so
  /// a lazily connected peer costs one descriptor. The k-th connection of a pair (k counted from 0 on both sides:
  /// every close is agreed by both) uses segments of its own (segmentName's `connection`). See transport.h.
  std::map<int, std::unique_ptr<Channel>> connectPeers(const ConnectContext& ctx,
                                                       const std::vector<int>& peers) override;
  /// When this transport reaches every peer and HOCCL_SMALL_MAX_BYTES > 0: maps the communicator's arena
  /// (collective) and offers "small" and, when every pair of ranks may read each other's memory and
  /// HOCCL_CMA_MIN_BYTES > 0, "single_copy".
  std::vector<std::unique_ptr<Shortcut>> shortcuts(const ShortcutContext& ctx, bool reachesAll) override;
  /// When it does not reach every rank, `peers` (this host's) is not empty and HOCCL_CMA_MIN_BYTES is not 0: the host
  /// level of HO-Ring's all-reduce through mapped registered buffers (shm_host_level.h).
  std::unique_ptr<HostLevel> hostLevel(const ShortcutContext& ctx, const std::vector<int>& peers,
                                       bool reachesAll) override;

  /// The name of the shared file (shm_file.h) carrying data from rank `from` to rank `to` of the job `jobTag`, for
  /// the pair's `connection`-th connection (0: the first; later ones after HOCCL_MAX_CONNS closed the earlier).
  static std::string segmentName(const std::string& jobTag, int from, int to, uint64_t connection = 0);
  /// "/hoccl-<job tag>": the start of every shared-file name of the job `jobTag` (the small-message arena adds
  /// "-arena"); the leading '/' is dropped in the file's name.
  static std::string namePrefix(const std::string& jobTag);

 private:
  /// Throws hocclInternalError when a peer of `peers` is on another host (the registry never asks for one).
  void requireSameHost(const ConnectContext& ctx, const std::vector<int>& peers) const;
  /// The channels to `peers` over the segments `out` (this rank's) and `in` (the peers'), each watching its
  /// peer's pid where the process is visible (a warning where not).
  std::map<int, std::unique_ptr<Channel>> makeChannels(const ConnectContext& ctx, const std::vector<int>& peers,
                                                       std::map<int, std::unique_ptr<Segment>>& out,
                                                       std::map<int, std::unique_ptr<Segment>>& in) const;

  uint32_t slotBytes_;
  uint32_t slots_;
  std::map<int, uint64_t> connections_;  ///< per peer: lazy connections made so far (closed ones included)
};

}  // namespace hoccl::transport::shm
