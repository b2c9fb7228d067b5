/// @file device_channels.h
/// The channel for device buffers to one peer (transports/device_channel.h), as the executor's device tasks use it:
/// the registry's choice (the direct path between the devices of one host, transports/registry.h) with the staging
/// pipeline (staged_channel.h) as the fallback and for peers on other hosts.
#pragma once

#include <memory>

#include "kernels/device/device.h"
#include "transports/device_channel.h"
#include "transports/transport.h"

namespace hoccl::exec {

/// The device channel to `peer` over its connected Channel `wire` (which must outlive it), for dev.
std::unique_ptr<transport::DeviceChannel> makeDeviceChannel(const transport::ConnectContext& ctx, int peer,
                                                            transport::Channel& wire, device::Device& dev);

}  // namespace hoccl::exec
