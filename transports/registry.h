/// @file registry.h
/// The transports compiled into this build, in priority order, and which of them carries each peer: shm for peers on
/// the same host (unless HOCCL_SHM_DISABLE=1), then the one network transport HOCCL_NET names for everything else
/// (unset: tcp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/device/device.h"
#include "transports/device_channel.h"
#include "transports/transport.h"

namespace hoccl::transport {

/// The names HOCCL_NET accepts in this build (lower case, e.g. "tcp", "ucx"), in the order of the table.
std::vector<std::string> networkTransportNames();

/// Every transport to use, highest priority first: shm (unless HOCCL_SHM_DISABLE=1), then the network transport of
/// HOCCL_NET (case-insensitive; "socket" is NCCL's name for tcp; unset: tcp). An unknown name, or one this build
/// lacks, is hocclInvalidArgument listing the names this build has.
std::vector<std::unique_ptr<Transport>> makeTransports();

/// Which transport carries each peer.
struct PeerPlan {
  std::vector<std::vector<int>> peersOf;  ///< per transport (same index as the list): its peers, ascending
  std::vector<std::string> transportOf;   ///< per rank: the transport's name ("self" for this rank)
};

/// Gives every peer to the first transport in `transports` that reaches it, and logs each choice with its reason at
/// INFO (HOCCL_DEBUG=INFO, subsystem NET). No transport for a peer is hocclInternalError naming it.
PeerPlan assignPeers(const std::vector<std::unique_ptr<Transport>>& transports, const ConnectContext& ctx);

/// The channel for device buffers (device_channel.h) to `peer`, whose Channel `wire` is connected: on this host the
/// direct path between the devices (transports/cuda_ipc/; it agrees with the peer on first use and falls back to
/// `fallback` when either side cannot or, with HOCCL_DEVICE_P2P=0, will not use it), else `fallback()` (the staging
/// pipeline). Both ranks of a pair make the same choice: it depends on their host ids only.
std::unique_ptr<DeviceChannel> makeDeviceChannel(const ConnectContext& ctx, int peer, Channel& wire,
                                                 device::Device& dev, DeviceFallback fallback);

}  // namespace hoccl::transport
