/// @file fake_verbs.h
/// A SIMULATED RDMA device for tests, because the build machines have no RDMA hardware (and no soft-RoCE): an IbvLib
/// table whose functions and provider ops (post_send, post_recv, poll_cq) are implemented in this process. It
/// models what the ibverbs channel relies on: one device "fake_rxe0" with one active InfiniBand port, protection
/// domains, memory registrations with keys and bounds (a write outside a registered range, or to a key without
/// remote write, completes with IBV_WC_REM_ACCESS_ERR / IBV_WC_LOC_PROT_ERR), RC queue pairs with the state
/// machine RESET -> INIT -> RTR -> RTS, RDMA write and write with immediate (which consumes a posted receive, else
/// IBV_WC_RNR_RETRY_EXC_ERR), completions in order, and injected failures. Writes are queued at post time and
/// carried out only after more completion-queue polls (by anyone) than the latency (default 1), so writes stay in
/// flight for a while and a sender that reuses a buffer before its completion is caught. Ranks in one process (threads) share it; one FakeVerbs may exist at a time.
#pragma once

#include <cstddef>

#include "transports/ibverbs/ibv_lib.h"

namespace hoccl::test {

/// The simulated device (see the file comment).
class FakeVerbs {
 public:
  FakeVerbs();
  ~FakeVerbs();
  FakeVerbs(const FakeVerbs&) = delete;
  FakeVerbs& operator=(const FakeVerbs&) = delete;

  /// The function table of the simulated device.
  const transport::ibverbs::IbvLib& lib() const { return lib_; }
  /// The next `count` RDMA writes complete with `status` (and move their queue pair to the error state).
  void failNextWrites(int status, int count = 1);
  /// Writes stay in flight until this many more polls happened (default 1).
  void setLatency(unsigned polls);
  /// Objects alive (contexts, protection domains, registrations, completion queues, queue pairs).
  size_t liveObjects() const;
  /// RDMA writes carried out so far.
  size_t writes() const;

 private:
  transport::ibverbs::IbvLib lib_;
};

}  // namespace hoccl::test
