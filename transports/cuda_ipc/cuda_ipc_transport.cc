// The direct device path as the registry offers it (cuda_ipc_transport.h).
#include "transports/cuda_ipc/cuda_ipc_transport.h"

#include <algorithm>

#include "base/params.h"
#include "transports/cuda_ipc/cuda_ipc_channel.h"

namespace hoccl::transport::cuda_ipc {

bool reaches(const ConnectContext& ctx, int peer) {
  return peer != ctx.rank && ctx.peers.at(peer).hostHash == ctx.peers.at(ctx.rank).hostHash;
}

std::unique_ptr<DeviceChannel> makeChannel(const ConnectContext& ctx, int peer, Channel& wire, device::Device& dev,
                                           DeviceFallback fallback) {
  const size_t slotBytes = std::max<size_t>(64, static_cast<size_t>(params::STAGING_CHUNK.get()) / 64 * 64);
  const auto slots = static_cast<size_t>(params::STAGING_SLOTS.get());
  return std::make_unique<IpcChannel>(wire, dev, ctx.rank, peer, params::DEVICE_P2P.get() != 0, slotBytes, slots,
                                      std::move(fallback), parseHandleMode(params::IPC_HANDLE.get()));
}

}  // namespace hoccl::transport::cuda_ipc
