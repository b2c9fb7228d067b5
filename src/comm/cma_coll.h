/// @file cma_coll.h
/// Single-copy collectives for large messages among processes of one host: after swapping buffer addresses through
/// the communicator's arena, each rank copies straight between its buffers and its peers' with
/// process_vm_readv/writev (Linux cross-memory attach), so a byte crosses memory once instead of twice (into a slot,
/// out of it). See cma_coll.cc for each collective's plan.
///
/// Which calls take it depends only on the call and the communicator (never on timing or grouping), so every rank
/// makes the same choice. Parameter: HOCCL_CMA_MIN_BYTES (smallest message, for every collective when set; 0 turns
/// the path off; unset: all-gather from 32 KiB, broadcast from 128 KiB, all-reduce and reduce-scatter from 256 KiB).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/group.h"
#include "comm/small_coll.h"

namespace hoccl::cma {

/// True when op (a validated collective) goes by the single-copy path: its communicator has an arena whose ranks
/// may read each other's memory, the collective is an all-reduce, all-gather, reduce-scatter or broadcast, the op
/// is not a PreMulSum, the message reaches the collective's threshold (see above), and no algorithm is forced
/// (HOCCL_ALGO).
bool eligible(const Op& op);

/// One single-copy collective in flight on this rank: a short sequence of arena rounds with copies in between.
class Collective {
 public:
  /// Nothing happens until the first poll().
  explicit Collective(const Op& op);
  ~Collective();
  /// Advances as far as possible without waiting for a peer; true once this rank's part is over and no peer will
  /// touch its buffers any more. Throws hocclRemoteError naming a dead or silent peer.
  bool poll();
  /// The peers the current round waits for, for messages.
  std::string missing() const;

 private:
  void copyPhase();
  void reducePhase();

  Op op_;
  bool copied_ = false;  // this rank's copies are done (the second arena round runs)
  bool pushResult_ = false;  // arena rounds started so far minus one
  std::unique_ptr<small::Exchange> exchange_;
  std::vector<const char*> peerSend_, peerRecv_;  // every rank's buffers, from the first round
};

/// Runs op (eligible) to completion on this thread.
void run(const Op& op);

}  // namespace hoccl::cma
