// Health of a communicator (see health.h).
#include "base/health.h"

#include "base/error.h"

namespace hoccl {

void Health::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = message;
  failed_.store(true, std::memory_order_release);
  raiseMirror();
}

void Health::mirrorInto(uint32_t* word) {
  mirror_.store(word, std::memory_order_release);
  if (aborted() || failed()) raiseMirror();
}

void Health::raiseMirror() {
  if (uint32_t* w = mirror_.load(std::memory_order_acquire)) __atomic_store_n(w, 1u, __ATOMIC_RELEASE);
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
