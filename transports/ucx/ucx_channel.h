/// @file ucx_channel.h
/// The ucx channel: tagged sends and receives to one peer on the communicator's UCP worker (ucx_worker.h).
///
/// A send is one ucp_tag_send_nbx of the whole message (UCX picks eager or rendezvous by size: above UCX_RNDV_THRESH
/// the receiver pulls the bytes straight into the posted buffer). A receive with a direct buffer is one
/// ucp_tag_recv_nbx into it; a receive with a sink lands in a registered staging buffer from the worker's pool and is
/// handed to the sink whole when complete (a whole message is a multiple of any granule). Operations complete in
/// posting order: a finished one waits for the ones posted before it. Each receive checks the sender's length (in the
/// tag) against its own: a difference is hocclInvalidUsage naming both, and UCX never writes past the posted buffer;
/// so are 8 bits of the sender's call tag against the receive's (RecvTarget::tag): a message of the right size from
/// another call is hocclInvalidUsage too (its bytes are in the buffer by then; the call fails).
/// A peer whose endpoint failed (UCX's error callback), or an operation UCX completes with an error, is
/// hocclRemoteError naming the peer. Empty messages are skipped on both sides. Every call holds the worker's lock and,
/// on the way out, tells the worker whether this channel still has operations posted (its idle progress thread runs
/// only when no channel has: ucx_worker.h).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include "base/boot/bootstrap.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_worker.h"

namespace hoccl::transport::ucx {

/// A channel to one peer through the shared worker.
class UcxChannel final : public Channel {
 public:
  /// The worker must already have an endpoint to `peerInfo.rank`.
  UcxChannel(std::shared_ptr<Worker> worker, const boot::RankInfo& self, const boot::RankInfo& peerInfo);
  /// Cancels what is still posted; UCX's late completions go to the worker's orphans.
  ~UcxChannel() override;

  /// The peer's rank.
  int peer() const override { return peer_.rank; }
  /// Starts a tagged send of the whole message.
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  /// The same, carrying 8 bits of the call tag in the UCX tag (ucx_worker.h: makeTag).
  void postTaggedSend(const void* data, size_t bytes, CallTag tag) override;
  /// Posts a tagged receive (into the buffer, or into staging for a sink).
  void postRecv(size_t bytes, RecvTarget target) override;
  /// Progresses the worker and retires completed operations in order.
  bool progress() override;
  /// Posted operations not yet retired.
  size_t pending() const override { return sends_.size() + recvs_.size(); }
  /// Sleeps on the worker's event descriptor.
  void waitForActivity(int timeoutMicros) override;

 private:
  struct Recv {
    std::unique_ptr<Op> op;
    size_t bytes;
    RecvTarget target;
  };
  /// One call's hold on the worker: the lock, then the busy mark brought up to date on the way out.
  class CallScope {
   public:
    explicit CallScope(UcxChannel& ch) : ch_(ch), lock_(ch.worker_->lock()) {}
    ~CallScope() {
      const bool busy = ch_.pending() > 0;
      if (busy != ch_.markedBusy_) ch_.worker_->markBusy(busy);
      ch_.markedBusy_ = busy;
    }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    UcxChannel& ch_;
    std::unique_lock<std::mutex> lock_;
  };
  [[noreturn]] void fail(const std::string& what) const;
  void retireRecv(Recv& r);

  std::shared_ptr<Worker> worker_;
  boot::RankInfo self_;
  boot::RankInfo peer_;
  std::deque<std::unique_ptr<Op>> sends_;
  std::deque<Recv> recvs_;
  bool markedBusy_ = false;  ///< what the worker was last told (CallScope)
  bool watchPid_ = false;    ///< the peer runs on this host and its pid is visible: a kill is seen at once
  uint32_t idlePolls_ = 0;   ///< fruitless progress calls; the peer's pid is looked at every 256th
};

}  // namespace hoccl::transport::ucx
