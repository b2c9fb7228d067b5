/// @file small_coll.h
/// One-shot collectives for small messages among ranks that share a host, through the communicator's shared arena
/// (transports/shm/shm_arena.h): the path that makes an 8-byte all-reduce cost about one cache-line round trip
/// instead of a trip through planning, the executor and the slot channels. See small_coll.cc for the protocol.
///
/// Which calls take it depends only on the call (collective, count, type, op) and on the communicator, never on
/// timing or on whether the call sits in a group, so every rank makes the same choice. Parameter:
/// HOCCL_SMALL_MAX_BYTES (the arena's payload size per rank, default 32 KiB; 0 turns the path and its arena off).
/// A call takes the path when each rank's payload is at most min(arena, 2 KiB x ranks).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "comm/group.h"
#include "transports/shm/shm_arena.h"

namespace hoccl::small {

/// True when op (a validated collective) goes by the one-shot path: its communicator has an arena, the
/// collective is an all-reduce, reduce, broadcast, all-gather or reduce-scatter, the op is not a PreMulSum, each
/// rank's payload is at most min(arena, 2 KiB x ranks), and no algorithm is forced (HOCCL_ALGO).
bool eligible(const Op& op);

/// One small collective in flight on this rank.
class Exchange {
 public:
  /// Takes the next sequence number of op's communicator. Nothing is published yet.
  explicit Exchange(const Op& op);
  /// A control round on behalf of op (which only names it in messages): publishes a copy of `bytes` (at most
  /// transport::shm::kArenaInlineBytes) from `payload` and computes nothing. Used by multi-round protocols
  /// (comm/cma_coll.h) to swap addresses and to agree that a phase is over.
  /// `path` names the caller's path in messages ("single copy").
  Exchange(const Op& op, const void* payload, size_t bytes, const char* path);
  /// Publishes this rank's payload as soon as its arena region is free, then returns true once every peer whose
  /// payload it needs has published, after writing this rank's output and counting the bytes; false until then.
  /// Never blocks. Throws hocclRemoteError naming the peer when it is dead, or when it has been silent for
  /// HOCCL_TIMEOUT, and hocclInvalidUsage when the communicator was aborted.
  bool poll();
  /// The peers that have not published yet, for messages.
  std::string missing() const;
  /// Rank r's published payload: valid once poll() returned true, until this rank publishes its next exchange
  /// (a peer reuses the slot only after every rank has started a later one).
  const char* payloadOf(int r) const;

 private:
  void finish();
  void check();
  bool waitMore();
  bool needs(int r) const;
  bool reached(int r, uint64_t s) const;
  uint64_t freedBy() const;        // the operation every peer must have started before this rank publishes
  bool waitingOn(int r) const;     // this rank is waiting for rank r now

  Op op_;
  Communicator& comm_;
  transport::shm::Arena& arena_;
  uint64_t seq_;
  size_t bytes_;          // payload each publishing rank puts in its region
  // Control round: what this rank publishes (finish() computes nothing).
  char control_[transport::shm::kArenaInlineBytes] = {};
  bool isControl_ = false;
  const char* path_ = "small one-shot";  // for messages
  bool published_ = false;
  int prev_ = 0;          // peers below this one have started the operation that frees this rank's slot
  int next_ = 0;          // peers below this one have published (or are not needed)
  unsigned failedPolls_ = 0;
  std::chrono::steady_clock::time_point waitingSince_{};
  std::chrono::steady_clock::time_point nextLivenessCheck_{};
};

/// Runs op (eligible) to completion on this thread: start, then complete().
void run(const Op& op);

/// Polls ex until it returns true, spinning briefly and then yielding (at once when the host is
/// oversubscribed) and finally sleeping in short naps while a peer is late (see backoff()).
void complete(Exchange& ex, bool oversubscribed);

/// The waiting policy behind complete(), after `idle` fruitless polls: pause, then yield, then a 50 us nap.
void backoff(unsigned idle, bool oversubscribed);

}  // namespace hoccl::small
