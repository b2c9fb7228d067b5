/// @file shm_transport.h
/// The shared-memory transport: reaches every peer on the same host (same host hash) through POSIX shared memory.
/// Parameters: HOCCL_SHM_DISABLE (1 = not used), HOCCL_SHM_SLOT_SIZE (bytes per slot, default 512 KiB, rounded up
/// to 4 KiB), HOCCL_SHM_SLOTS (slots per direction, default 8), HOCCL_SHM_SINGLE_COPY_MIN (messages of at least
/// this many bytes are read straight from the sender's buffer when possible; 0 = never, the default: the slot path
/// measured faster and steadier here, see docs/performance.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace hoccl::transport::shm {

/// Default bytes per slot.
constexpr uint32_t kDefaultSlotBytes = 512 * 1024;
/// Default slots per direction.
constexpr uint32_t kDefaultSlots = 8;
/// Default smallest message sent by single copy.
constexpr size_t kDefaultSingleCopyMin = 0;  // off: the slot path measured faster and steadier at 2-32 MiB

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

  /// The /dev/shm name of the segment carrying data from rank `from` to rank `to` of the job `jobTag`.
  static std::string segmentName(const std::string& jobTag, int from, int to);
  /// "/hoccl-<job tag>": the start of every /dev/shm name of the job `jobTag` (the small-message arena adds
  /// "-arena").
  static std::string namePrefix(const std::string& jobTag);

 private:
  uint32_t slotBytes_;
  uint32_t slots_;
  size_t singleCopyMin_;
};

}  // namespace hoccl::transport::shm
