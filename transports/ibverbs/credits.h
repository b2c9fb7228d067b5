/// @file credits.h
/// Credit-based flow control of the ibverbs channel (pure: no device). The receiver owns a ring of `slots` bounce
/// buffers; the sender writes chunk n into slot n % slots. Sender side (SendCredits): a chunk may be posted only
/// while fewer than `slots` chunks are unconsumed by the peer (the peer's cumulative consumed count arrives in a
/// credit word it RDMA-writes into our memory) and fewer than `slots` of our own writes are incomplete (the staging
/// slot of chunk n is reused by chunk n + slots). Receiver side (CreditReturn): counts chunks that arrived and were
/// consumed, and says when to write the consumed count back (one credit write in flight at a time; the count is
/// cumulative, so a late write never loses credits). Protocol violations (a peer that writes more than it was
/// allowed, a consumed count that goes backwards) are hocclInternalError naming the counts.
#pragma once

#include <cstdint>

namespace hoccl::transport::ibverbs {

/// The sender's view of the peer's ring.
class SendCredits {
 public:
  /// `slots` >= 1 slots in the peer's ring (and in our staging ring).
  explicit SendCredits(uint32_t slots);
  /// Chunks that may be posted now.
  uint32_t available() const;
  /// Whether one more chunk may be posted.
  bool canPost() const { return available() > 0; }
  /// Takes a credit: returns the chunk's sequence number (its slot is seq % slots). hocclInternalError without one.
  uint64_t post();
  /// One posted write completed locally (completions come in posting order). hocclInternalError if none is out.
  void localComplete();
  /// The peer's cumulative count of consumed chunks, read from the credit word. Must not go backwards or beyond the
  /// chunks posted.
  void remoteConsumed(uint64_t total);
  /// Chunks posted so far.
  uint64_t posted() const { return posted_; }
  /// Chunks whose write completed locally.
  uint64_t completed() const { return completed_; }
  /// Chunks the peer has consumed.
  uint64_t consumed() const { return consumed_; }

 private:
  uint32_t slots_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t consumed_ = 0;
};

/// The receiver's bookkeeping of its ring and of the credits it owes.
class CreditReturn {
 public:
  /// `slots` >= 1 slots in our ring.
  explicit CreditReturn(uint32_t slots);
  /// A chunk arrived (in order): returns its sequence number. hocclInternalError when the ring would overflow (the
  /// peer wrote without a credit).
  uint64_t arrived();
  /// The oldest arrived chunk was consumed (its slot is free again).
  void consumed();
  /// Chunks arrived and not yet consumed.
  uint64_t waiting() const { return arrived_ - consumed_; }
  /// Whether a credit write should start now: something was consumed since the last one and none is in flight.
  bool shouldReturn() const { return !inFlight_ && consumed_ > returned_; }
  /// Starts a credit write: returns the cumulative count to write.
  uint64_t startReturn();
  /// The credit write completed.
  void returnCompleted();
  /// Chunks consumed so far.
  uint64_t consumedCount() const { return consumed_; }
  /// Whether consumed chunks have not been written back yet.
  bool owed() const { return consumed_ > returned_; }
  /// Whether a credit write is in flight.
  bool inFlight() const { return inFlight_; }

 private:
  uint32_t slots_;
  uint64_t arrived_ = 0;
  uint64_t consumed_ = 0;
  uint64_t returned_ = 0;
  bool inFlight_ = false;
};

}  // namespace hoccl::transport::ibverbs
