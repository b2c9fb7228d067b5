/// @file shm_session.h
/// What the shm shortcuts of one communicator share: the arena (shm_arena.h), the sequence numbers of the
/// operations published in it, and the context the communicator lent them; plus the arena exchange, the one round
/// both shortcuts are built of (shm_small.h uses one per collective, shm_single_copy.h two).
///
/// Protocol of the k-th arena round of a communicator (k = 1, 2, ...; every rank counts the same rounds):
///   1. publish: once every peer has started round k-S+1, where S = kArenaSlots (so none still reads this rank's
///      slot k%S, last used by round k-S), the rank copies its payload into its own slot k%S (inside the slot's
///      line when it fits), writes its call stamp, and stores k into the line (release);
///   2. wait: until every peer whose payload it needs has published k (acquire);
///   3. agree: each needed peer's stamp must equal this rank's (same shortcut and round, collective, type, op, root,
///      count); otherwise both calls are named in an InvalidUsage error and nothing is read. Only then is a payload
///      used.
/// No acknowledgements, no locks: the sequence numbers are the whole protocol.
///
/// A peer may make the same call another way and never publish: device buffers there (a schedule; the shortcuts take
/// host buffers only) against host buffers here, in a call the mismatch check skips. So a wait that has gone on
/// (every 1024 fruitless polls) also reads the call board of each peer it waits for (every rank notes each
/// collective it starts, noteCall): a note for this collective that differs from this rank's call (in what it is, or
/// host against device buffers) fails the call at once with InvalidUsage naming both calls and kinds; the
/// communicator is then broken (a mismatch), and the job's verdict releases the peer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/wait.h"
#include "transports/shm/shm_arena.h"
#include "transports/shortcut.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {

/// Which shortcut and round published a line (CallStamp::protocol).
enum class Protocol : uint8_t {
  Small = 1,          ///< a one-shot small collective: the payload is its input
  CopyAddresses = 2,  ///< single copy, round 1: the payload is the rank's buffer addresses and sizes
  CopyDone = 3,       ///< single copy, round 2: no payload; the rank's copies are over
  HostAddresses = 4,  ///< host level (shm_host_level.h), round 1: the rank's buffer addresses, sizes, registrations
  HostDone = 5,       ///< host level, round 2: no payload; the rank's copies into its host peers are over
};
/// "small one-shot", "single copy (addresses)", "single copy (done)".
const char* protocolName(Protocol p);

/// The arena and the round counter of one communicator, shared by its shm shortcuts.
class ArenaSession {
 public:
  /// Takes the mapped arena and the communicator's context.
  ArenaSession(std::unique_ptr<Arena> arena, ShortcutContext ctx) : arena_(std::move(arena)), ctx_(std::move(ctx)) {}
  /// The arena.
  Arena& arena() { return *arena_; }
  /// The arena.
  const Arena& arena() const { return *arena_; }
  /// The context.
  const ShortcutContext& ctx() const { return ctx_; }
  /// This rank.
  int rank() const { return ctx_.connect->rank; }
  /// Ranks in the communicator.
  int nranks() const { return ctx_.connect->nranks; }
  /// "rank 3 (host node7, pid 4242)".
  std::string describeRank(int r) const { return describePeer(ctx_.connect->peers[r]); }
  /// Number of the next arena round (1, 2, ...): the same on every rank for the same call.
  uint64_t nextSeq() { return ++seq_; }
  /// Writes call (call.number > 0) on this rank's call board (shm_arena.h), whichever path runs it.
  void noteCall(const CollCall& call);
  /// What rank r noted for collective `number`: nullopt when its board does not hold that collective (not started
  /// yet, or long past). Only the call's description is filled in (no buffers); the kinds say host or device.
  std::optional<CollCall> peerCall(int r, uint64_t number) const;
  /// Counts bytes moved with peer over its link class.
  void count(int peer, size_t sent, size_t received) {
    ctx_.counters->count(ctx_.topology->linkClass(rank(), peer), sent, received);
  }

 private:
  std::unique_ptr<Arena> arena_;
  ShortcutContext ctx_;
  uint64_t seq_ = 0;
};

/// The stamp of `call` published by `protocol`.
CallStamp stampOf(const CollCall& call, Protocol protocol);

/// One arena round on this rank (see the protocol above). Never blocks.
class Exchange {
 public:
  /// Takes the next round number of the session. `payload` (bytes long, at most the arena's maxBytes) is copied into
  /// the arena when the slot is free; it must stay valid until then unless it fits in the line (then it is copied
  /// now). `needsAll`: wait for every peer; otherwise wait only for `only` (>= 0), or for nobody (-1).
  Exchange(ArenaSession& session, const CollCall& call, Protocol protocol, const void* payload, size_t bytes,
           bool needsAll, int only = -1);
  /// Publishes when the slot is free; true once every needed peer has published this round and agreed on the call.
  /// Throws hocclRemoteError naming a dead peer (or the job's recorded failure), hocclTimeout naming a silent one,
  /// hocclInvalidUsage on a mismatch or an abort.
  bool poll();
  /// The peers this rank waits for now, for messages.
  std::string missing() const;
  /// Rank r's payload: valid once poll() returned true, until this rank publishes its next round.
  const char* payloadOf(int r) const { return session_.arena().payload(r, seq_, bytes_); }
  /// Payload size of every publisher.
  size_t bytes() const { return bytes_; }
  /// This round's number (the same on every rank).
  uint64_t seq() const { return seq_; }

 private:
  bool needs(int r) const { return r != session_.rank() && (needsAll_ || r == only_); }
  bool reached(int r, uint64_t s) const;
  uint64_t freedBy() const { return seq_ - (kArenaSlots - 1); }
  bool waitingOn(int r) const;
  bool waitMore();
  void check();
  void agree(int r) const;
  void compareNotes() const;

  ArenaSession& session_;
  CollCall call_;
  CallStamp stamp_;
  uint64_t seq_;
  const void* payload_;
  size_t bytes_;
  char inlineCopy_[kArenaInlineBytes] = {};
  bool needsAll_;
  int only_;
  bool published_ = false;
  int prev_ = 0;  // peers below this one have started the round that frees this rank's slot
  int next_ = 0;  // peers below this one have published (or are not needed) and agree
  unsigned failedPolls_ = 0;
  std::chrono::steady_clock::time_point waitingSince_{};
  std::chrono::steady_clock::time_point nextLivenessCheck_{};
};

}  // namespace hoccl::transport::shm
