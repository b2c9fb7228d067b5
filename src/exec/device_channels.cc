// The device channel to a peer (device_channels.h): the staging pipeline behind the DeviceChannel interface, handed
// to the registry as the fallback.
#include "exec/device_channels.h"

#include "exec/staged_channel.h"
#include "transports/registry.h"

namespace hoccl::exec {
namespace {

/// The staging pipeline as a DeviceChannel (StagedChannel keeps its own, executor-facing interface).
class StagedDeviceChannel final : public transport::DeviceChannel {
 public:
  StagedDeviceChannel(transport::Channel& wire, device::Device& dev, int self) : staged_(wire, dev, self) {}
  int peer() const override { return staged_.peer(); }
  void postSend(const void* data, size_t bytes) override { staged_.postSend(data, bytes); }
  void postTaggedSend(const void* data, size_t bytes, transport::CallTag tag) override {
    staged_.postTaggedSend(data, bytes, tag);
  }
  void postRecv(size_t bytes, transport::RecvTarget target) override { staged_.postRecv(bytes, std::move(target)); }
  void postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                      transport::CallTag tag) override {
    staged_.postRecvReduce(dst, src, n, dt, op, tag);
  }
  bool progress() override { return staged_.progress(); }
  size_t pending() const override { return staged_.pending(); }
  void waitForActivity(int timeoutMicros) override { staged_.waitForActivity(timeoutMicros); }
  const transport::Channel& wire() const override { return staged_.wire(); }
  const char* path() const override { return "staged"; }

 private:
  StagedChannel staged_;
};

}  // namespace

std::unique_ptr<transport::DeviceChannel> makeDeviceChannel(const transport::ConnectContext& ctx, int peer,
                                                            transport::Channel& wire, device::Device& dev) {
  return transport::makeDeviceChannel(ctx, peer, wire, dev, [w = &wire, d = &dev, self = ctx.rank] {
    return std::unique_ptr<transport::DeviceChannel>(std::make_unique<StagedDeviceChannel>(*w, *d, self));
  });
}

}  // namespace hoccl::exec
