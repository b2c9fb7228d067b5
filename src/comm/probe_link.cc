// Blocking point-to-point for the init probes (see probe_link.h).
#include "comm/probe_link.h"

#include <fmt/format.h>
#include <sched.h>

#include <chrono>

#include "base/error.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/communicator.h"

namespace hoccl {

ProbeLink::ProbeLink(Communicator& comm, int peer, const char* purpose, const char* turnOff)
    : comm_(comm), peer_(peer), purpose_(purpose), turnOff_(turnOff), ch_(comm.channel(peer)) {}

void ProbeLink::send(const void* data, size_t bytes) { ch_.postSend(data, bytes); }

void ProbeLink::recv(void* data, size_t bytes) {
  transport::RecvTarget t;
  t.direct = data;
  ch_.postRecv(bytes, std::move(t));
}

void ProbeLink::wait(const char* what) {
  using Clock = std::chrono::steady_clock;
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  const auto deadline = Clock::now() + timeout;
  Backoff backoff(comm_.waitPolicy());
  while (ch_.pending() > 0) {
    comm_.health().check(comm_.describe(), purpose_);
    if (ch_.progress()) {
      backoff.reset();
      continue;
    }
    if (Clock::now() > deadline)
      throwTimeout(
          fmt::format("{}: {} ({}) with rank {} timed out after {} s; is that rank alive and running with "
                      "the same settings? (raise HOCCL_TIMEOUT, or set {})",
                      comm_.describe(), purpose_, what, peer_, timeout.count(), turnOff_));
    switch (backoff.next()) {
      case WaitAction::Spin: Backoff::cpuRelax(); break;
      case WaitAction::Yield: sched_yield(); break;
      case WaitAction::Block: ch_.waitForActivity(backoff.blockMicros()); break;
    }
  }
}

}  // namespace hoccl
