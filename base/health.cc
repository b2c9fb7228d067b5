// Health of a communicator (see health.h).
#include "base/health.h"

#include "base/error.h"

namespace hoccl {

void Health::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = message;
  failed_.store(true, std::memory_order_release);
}

std::string Health::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Health::check(const std::string& who, const std::string& what) const {
  if (aborted()) throw Error(hocclInvalidUsage, who + ": " + what + ": the communicator was aborted (hocclCommAbort)");
  if (failed()) throw Error(hocclRemoteError, who + ": " + what + " stopped: " + failure());
}

}  // namespace hoccl
