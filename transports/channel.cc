// The default Channel::waitForActivity: a transport with nothing to wait on just sleeps.
#include <chrono>
#include <thread>

#include "transports/transport.h"

namespace hoccl::transport {

void Channel::waitForActivity(int timeoutMicros) {
  if (timeoutMicros > 0) std::this_thread::sleep_for(std::chrono::microseconds(timeoutMicros));
}

}  // namespace hoccl::transport
