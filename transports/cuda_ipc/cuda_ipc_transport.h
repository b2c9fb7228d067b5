/// @file cuda_ipc_transport.h
/// The direct device path as the registry offers it (registry.h: makeDeviceChannel): which peers it may serve, and
/// the channel to one of them (cuda_ipc_channel.h). It is not a transport of its own for host buffers: the peer's
/// Channel, from the transport the registry chose for it, carries its control frames.
#pragma once

#include <memory>

#include "kernels/device/device.h"
#include "transports/device_channel.h"
#include "transports/transport.h"

namespace hoccl::transport::cuda_ipc {

/// Whether the direct path may serve `peer`: it runs on this host (the same host id). Both sides answer alike;
/// whether the devices can reach each other is agreed later, by the channel, on first use.
bool reaches(const ConnectContext& ctx, int peer);

/// The direct path to `peer` over its Channel `wire`, with its receive area sized by HOCCL_STAGING_CHUNK x
/// HOCCL_STAGING_SLOTS; it takes part only with HOCCL_DEVICE_P2P=1 and falls back to `fallback` otherwise.
std::unique_ptr<DeviceChannel> makeChannel(const ConnectContext& ctx, int peer, Channel& wire, device::Device& dev,
                                           DeviceFallback fallback);

}  // namespace hoccl::transport::cuda_ipc
