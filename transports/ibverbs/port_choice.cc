// The port a rank uses (see port_choice.h).
#include "transports/ibverbs/port_choice.h"

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::transport::ibverbs {

PortChoice choosePort(const std::vector<PortInfo>& ports, const std::string& nearDevice, int localIndex) {
  if (ports.empty()) throwInternalError("ibverbs: a port was to be chosen among none");
  const size_t spread = static_cast<size_t>(localIndex < 0 ? 0 : localIndex);
  std::vector<size_t> near;
  for (size_t i = 0; i < ports.size(); ++i)
    if (!nearDevice.empty() && ports[i].device == nearDevice) near.push_back(i);
  PortChoice c;
  if (!near.empty()) {
    c.index = near[spread % near.size()];
    c.why = fmt::format("the nearest NIC of this rank's GPU ({})", nearDevice);
    return c;
  }
  c.index = spread % ports.size();
  c.why = nearDevice.empty()
              ? std::string("the ranks of one host spread over the admitted ports")
              : fmt::format("the nearest NIC of this rank's GPU ({}) has no admitted active port (HOCCL_IB_HCA, "
                            "`ibv_devinfo`), so the ranks of one host spread over the admitted ports",
                            nearDevice);
  return c;
}

}  // namespace hoccl::transport::ibverbs
