// A helper thread that drives a step's channels while the executor's thread runs a callback (see progress_helper.h).
// It polls briefly, then sleeps on a pending channel (waitForActivity) so that it leaves the cores to the caller's
// compute; it stops by itself once the step's transfers are done.
#include "exec/progress_helper.h"

#include <atomic>
#include <functional>
#include <thread>

#include "base/wait.h"

namespace hoccl::exec {
namespace {

thread_local const void* tlsCallbackOwner = nullptr;

constexpr unsigned kSpins = 64;    // polls before the helper starts sleeping on a channel
constexpr int kSleepMicros = 100;  // one sleep on a channel (short: the body's end is noticed soon)

}  // namespace

std::exception_ptr runWhileProgressing(const std::vector<transport::Channel*>& channels, const Health& health,
                                       const std::function<void()>& body) {
  bool pending = false;
  for (auto* ch : channels) pending |= ch->pending() > 0;
  if (!pending) {
    body();
    return nullptr;
  }
  std::atomic<bool> stop{false};
  std::exception_ptr caught;
  std::thread helper([&] {
    try {
      unsigned idle = 0;
      while (!stop.load(std::memory_order_acquire)) {
        if (health.aborted() || health.failed()) return;
        bool moved = false;
        transport::Channel* waiting = nullptr;
        for (auto* ch : channels) {
          moved |= ch->progress();
          if (ch->pending() && !waiting) waiting = ch;
        }
        if (!waiting) return;
        if (moved) {
          idle = 0;
        } else if (++idle < kSpins) {
          Backoff::cpuRelax();
        } else {
          waiting->waitForActivity(kSleepMicros);
        }
      }
    } catch (...) {
      caught = std::current_exception();
    }
  });
  // Stops and joins the helper on every way out of body (an exception of body included).
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    void operator()() {
      stop.store(true, std::memory_order_release);
      if (t.joinable()) t.join();
    }
    ~Join() { (*this)(); }
  } join{stop, helper};
  body();
  join();
  return caught;  // written by the helper before the join
}

const void* callbackOwner() { return tlsCallbackOwner; }

CallbackScope::CallbackScope(const void* comm) : previous_(tlsCallbackOwner) { tlsCallbackOwner = comm; }
CallbackScope::~CallbackScope() { tlsCallbackOwner = previous_; }

}  // namespace hoccl::exec
