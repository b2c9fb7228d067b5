/*
 * The proxy (proxy.h). Tickets: submission k makes every stream of its ops wait until the flag reaches k; the proxy
 * runs submissions in order and stores k in the flag once submission k is done (or failed), which releases exactly
 * the work queued after it. After a failure the remaining submissions are not run (the communicator is broken) but
 * their streams are released, so nothing waits for ever; the failure is reported by the next call. While idle, its
 * thread also watches the peers of the communicator's one-kernel launches (comm/one_shot.h: OneShotAllReduce::watch).
 */
#include "comm/proxy.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/one_shot.h"
#include "kernels/memory.h"

namespace hoccl {

Proxy::Proxy(Communicator& comm, device::Device& dev) : comm_(comm), dev_(dev) {
  internal_ = dev_.createStream();
  flag_ = dev_.allocFlag();
  thread_ = std::thread([this] { loop(); });
}

Proxy::~Proxy() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  release(submitted_);  // nothing is left queued; makes sure no stream waits on a ticket that never comes
  try {
    dev_.synchronize(internal_);
    dev_.destroyStream(internal_);
  } catch (const Error& e) {
    HOCCL_WARN(kColl, "{}: closing the proxy's stream: {}", comm_.describe(), e.what());
  }
  // The flag stays: a stream of the caller may still read it; it is one word per communicator.
}

void Proxy::submit(std::vector<Op> ops) {
  Job job;
  std::vector<device::Stream> streams;
  for (const Op& op : ops)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end()) streams.push_back(op.stream);
  OneShotAllReduce* oneShot = comm_.oneShot();
  try {
    for (device::Stream s : streams) {
      if (oneShot) oneShot->orderBefore(s);  // after the one-kernel launches so far
      device::Event e = dev_.createEvent();
      job.events.push_back(e);
      dev_.record(e, s);
    }
  } catch (...) {
    for (device::Event e : job.events) dev_.destroyEvent(e);
    throw;
  }
  std::lock_guard<std::mutex> l(mu_);
  job.ticket = ++submitted_;
  for (device::Stream s : streams) dev_.streamWaitFlag(s, flag_, job.ticket);
  job.ops = std::move(ops);
  queue_.push_back(std::move(job));
  cv_.notify_all();
}

void Proxy::launchOneShot(const Op& op) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (completed_ < submitted_) dev_.streamWaitFlag(op.stream, flag_, submitted_);  // after the queued jobs
  }
  comm_.oneShot()->launch(op);
}

void Proxy::drain() {
  {
    std::unique_lock<std::mutex> l(mu_);
    const uint32_t target = submitted_;
    idle_.wait(l, [&] { return completed_ >= target; });
  }
  if (OneShotAllReduce* oneShot = comm_.oneShot()) oneShot->drain();
}

std::string Proxy::failure() const {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!failure_.empty()) return failure_;
  }
  OneShotAllReduce* oneShot = comm_.oneShot();
  return oneShot ? oneShot->poll() : std::string();
}

void Proxy::throwIfFailed() const {
  int code = hocclSuccess;
  std::string why;
  {
    std::lock_guard<std::mutex> l(mu_);
    code = failureCode_;
    why = failure_;
  }
  if (why.empty()) {
    OneShotAllReduce* oneShot = comm_.oneShot();
    if (oneShot) why = oneShot->poll();
    code = comm_.asyncError.load();
    if (code == hocclSuccess) code = hocclInternalError;
  }
  if (!why.empty())
    throw Error(static_cast<hocclResult_t>(code),
                fmt::format("{}: an earlier stream-ordered operation failed, so the communicator is unusable: {}",
                            comm_.describe(), why));
}

void Proxy::release(uint32_t ticket) { __atomic_store_n(flag_, ticket, __ATOMIC_RELEASE); }

void Proxy::waitForEvents(const Job& job) {
  const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(comm_.waitPolicy());
  for (device::Event e : job.events) {
    while (!dev_.query(e)) {
      backoff.pause();
      if ((backoff.idle() & 255) != 0) continue;
      Health& health = comm_.health();
      if (health.aborted() || health.failed()) health.check(comm_.describe(), "a stream-ordered operation");
      if (std::chrono::steady_clock::now() - start > timeout)
        throw Error(hocclTimeout,
                    fmt::format("{}: the work queued on the caller's stream before a collective did not complete in "
                                "{} s (a stream waiting for something that never happens?); raise HOCCL_TIMEOUT if "
                                "it is only slow",
                                comm_.describe(), timeout.count()));
    }
  }
}

void Proxy::run(Job& job) {
  bool skip;
  {
    std::lock_guard<std::mutex> l(mu_);
    skip = !failure_.empty();
  }
  if (!skip) {
    try {
      waitForEvents(job);
      runOps(job.ops);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> l(mu_);
      failure_ = e.what();
      failureCode_ = e.code();
      int expected = hocclSuccess;
      comm_.asyncError.compare_exchange_strong(expected, e.code());
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(mu_);
      failure_ = std::string("internal error: ") + e.what();
      failureCode_ = hocclInternalError;
      int expected = hocclSuccess;
      comm_.asyncError.compare_exchange_strong(expected, hocclInternalError);
    }
  }
  for (device::Event e : job.events) {
    try {
      dev_.destroyEvent(e);
    } catch (const Error&) {
    }
  }
  release(job.ticket);
}

void Proxy::loop() {
  kernels::setDeviceStream(internal_);
  std::unique_lock<std::mutex> l(mu_);
  OneShotAllReduce* oneShot = comm_.oneShot();
  auto due = [&] { return stop_ || !queue_.empty(); };
  while (true) {
    if (!oneShot) {
      cv_.wait(l, due);
    } else {  // idle: watch the peers of the one-kernel launches that have not run yet
      while (!cv_.wait_for(l, std::chrono::milliseconds(50), due)) {
        l.unlock();
        oneShot->watch();
        l.lock();
      }
    }
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    run(job);
    l.lock();
    completed_ = job.ticket;
    idle_.notify_all();
  }
}

}  // namespace hoccl
