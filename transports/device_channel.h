/// @file device_channel.h
/// Channels for device buffers the host cannot touch (a GPU's; the simulated device in strict mode). The executor's
/// device tasks send and receive through one DeviceChannel per peer, a second set beside the transports' Channels
/// (transport.h). Like those, they carry the call tag (postTaggedSend, RecvTarget::tag) and fail a message of the
/// right size tagged for another call. Two kinds exist: the staging pipeline through pinned host memory over the peer's Channel (the
/// core's, src/exec/staged_channel.h; works over every transport), and a direct path between the devices of two ranks
/// on one host (transports/cuda_ipc/: the receiver's device slots mapped through IPC handles), which falls back to
/// the staging pipeline when the devices cannot reach each other. The registry (registry.h) chooses; the core never
/// names the direct path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "transports/transport.h"

namespace hoccl::transport {

/// A channel whose sends and receives name device memory. Receives take RecvTarget::direct only (a sink would need
/// the host to read device memory): reductions go through postRecvReduce. Zero-byte operations complete at once.
class DeviceChannel : public Channel {
 public:
  /// Receives n elements of dt and stores dst[i] = op(src[i], received[i]) (device memory; dst may equal src). The
  /// message must be tagged `tag` (RecvTarget::tag; 0: not compared), as postRecv's target.tag for plain receives.
  virtual void postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                              CallTag tag) = 0;
  /// The peer's Channel that this channel sends through (its control messages, or all of its data).
  virtual const Channel& wire() const = 0;
  /// Which path carries the data now, for logs and tests: "staged", "p2p", or "negotiating" before the two ranks
  /// agreed (the direct path decides on its first use).
  virtual const char* path() const = 0;
};

/// Builds the staging pipeline over a peer's Channel: the fallback the direct path uses when it cannot run.
using DeviceFallback = std::function<std::unique_ptr<DeviceChannel>()>;

/// Process-wide counts of the device channels' paths (tests assert which path ran; HOCCL_DEBUG=INFO logs each).
struct DeviceChannelStats {
  std::atomic<uint64_t> p2pChannels{0};           ///< device channels that agreed on the direct path
  std::atomic<uint64_t> fallbackChannels{0};      ///< device channels on one host that fell back to staging
  std::atomic<uint64_t> p2pBytesSent{0};          ///< bytes written into peers' device slots
  std::atomic<uint64_t> p2pBytesReceived{0};      ///< bytes received through this rank's device slots
  std::atomic<uint64_t> fdMappedChannels{0};      ///< direct channels whose peer area was mapped from a passed cuMem fd
  std::atomic<uint64_t> legacyMappedChannels{0};  ///< direct channels whose peer area came from a legacy IPC handle
};

/// The counters of this process.
DeviceChannelStats& deviceChannelStats();

}  // namespace hoccl::transport
