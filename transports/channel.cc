// Defaults of the transport interface: a channel with nothing to wait on just sleeps; a transport offers no shortcuts
// and connects eagerly.
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"

#include "transports/shortcut.h"
#include "transports/transport.h"

namespace hoccl::transport {

void Channel::waitForActivity(int timeoutMicros) {
  if (timeoutMicros > 0) std::this_thread::sleep_for(std::chrono::microseconds(timeoutMicros));
}

Channel::Link Channel::serviceClose(bool, bool) { return Link::Open; }

std::vector<std::unique_ptr<Shortcut>> Transport::shortcuts(const ShortcutContext&, bool) { return {}; }

std::unique_ptr<HostLevel> Transport::hostLevel(const ShortcutContext&, const std::vector<int>&, bool) {
  return nullptr;
}

void Transport::prepare(const ConnectContext&, const std::vector<int>&) {}

std::map<int, std::unique_ptr<Channel>> Transport::connectPeers(const ConnectContext& ctx, const std::vector<int>&) {
  throwInternalError(fmt::format("{}: rank {}: this transport does not connect lazily", name(), ctx.rank));
}

}  // namespace hoccl::transport
