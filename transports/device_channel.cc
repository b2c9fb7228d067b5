// Process-wide counters of the device channels (device_channel.h).
#include "transports/device_channel.h"

namespace hoccl::transport {

DeviceChannelStats& deviceChannelStats() {
  static DeviceChannelStats stats;
  return stats;
}

}  // namespace hoccl::transport
