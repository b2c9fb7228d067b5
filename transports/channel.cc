// Defaults of the transport interface: a channel with nothing to wait on just sleeps; a transport offers no shortcuts.
#include <chrono>
#include <thread>

#include "transports/shortcut.h"
#include "transports/transport.h"

namespace hoccl::transport {

void Channel::waitForActivity(int timeoutMicros) {
  if (timeoutMicros > 0) std::this_thread::sleep_for(std::chrono::microseconds(timeoutMicros));
}

std::vector<std::unique_ptr<Shortcut>> Transport::shortcuts(const ShortcutContext&, bool) { return {}; }

}  // namespace hoccl::transport
