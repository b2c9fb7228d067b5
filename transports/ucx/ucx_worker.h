/// @file ucx_worker.h
/// One UCP context and worker per communicator, shared by the communicator's UCX channels (RAII: the last channel
/// to go closes the endpoints and destroys the worker, then the context).
///
/// What the worker owns besides the UCP objects:
/// - one endpoint per peer, created from the peer's worker address with peer error handling, so that a peer that dies
///   fails the endpoint (UCX's error callback marks the peer failed; its channel then throws). UCX 1.13's shared
///   memory transports lack peer error handling: where UCX finds no transport with it, the endpoint is made without,
///   and a dead peer is found by hoccl's own failure detection (the bootstrap's side channel checked by every wait);
/// - the operation records of channels that went away with operations still in flight (UCX may still complete them
///   until the worker is destroyed);
/// - a pool of staging buffers for receives that go through a sink (reductions), each registered once with
///   ucp_mem_map and reused; user buffers are registered by UCX's own registration cache, which follows unmaps.
///
/// Idle progress. UCX completes a send once its transport took the bytes, not once they left: over tcp the tail of a
/// message can sit in UCX's buffer, and a rendezvous receive may still owe the sender its acknowledgement. Either side
/// then needs its worker progressed after its own operations finished, while hoccl has returned to the caller (who
/// may wait on something else, such as a store barrier, while the peer waits for those bytes). So each worker has a
/// thread that progresses it while no channel has operations posted, sleeping on the worker's event descriptor; it
/// stands aside as soon as a channel posts. Every call into UCX, from the caller's thread or this one, holds the
/// worker's mutex (the worker is UCS_THREAD_MODE_SERIALIZED).
///
/// The tag of every message: the sender's rank in the high 24 bits, the message's length in the low 40 bits.
/// Receives match on the rank bits only, so the receiver learns the sender's length (sender_tag) and compares it with
/// the length it posted. UCX keeps tagged messages between two endpoints in order, so receives posted in order
/// match messages in sending order.
#pragma once

#include "transports/transport.h"
#include "transports/ucx/ucx_api.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hoccl::transport::ucx {

/// Bits of the tag that carry the message's length.
inline constexpr int kLengthBits = 36;
/// Bits above the length that carry 8 bits of the message's call tag (transport::CallTag; 0: untagged).
inline constexpr int kCallTagBits = 8;
/// Where the sender's rank starts (20 bits: at most 2^20 ranks, UcxTransport::connect checks).
inline constexpr int kRankShift = kLengthBits + kCallTagBits;
/// The most ranks a communicator over UCX may have.
inline constexpr int64_t kMaxRanks = int64_t{1} << (64 - kRankShift);
/// The largest message a tag can describe (64 GiB).
inline constexpr uint64_t kMaxMessage = (uint64_t{1} << kLengthBits) - 1;
/// The mask that matches the sender's rank and ignores the length and the call tag.
inline constexpr ucp_tag_t kRankMask = ~((ucp_tag_t{1} << kRankShift) - 1);
/// The 8 bits of `tag` a UCX tag carries (0 only for an untagged message).
inline uint64_t callTagBits(CallTag tag) {
  if (!tag) return 0;
  const uint64_t folded = (tag ^ (tag >> 8) ^ (tag >> 16) ^ (tag >> 24)) & 0xff;
  return folded ? folded : 1;
}
/// The 8 call-tag bits of a UCX tag.
inline uint64_t callTagBitsOf(ucp_tag_t t) { return (t >> kLengthBits) & ((uint64_t{1} << kCallTagBits) - 1); }
/// The tag of a message of `bytes` bytes from `rank` for call `tag`.
inline ucp_tag_t makeTag(int rank, uint64_t bytes, CallTag tag = 0) {
  return (static_cast<ucp_tag_t>(rank) << kRankShift) | (callTagBits(tag) << kLengthBits) | bytes;
}

/// One send or receive in flight. Written by UCX's callbacks during ucp_worker_progress.
struct Op {
  void* request = nullptr;            ///< UCX's request (null: completed at once, or not started)
  bool done = false;                  ///< the completion callback ran (or it completed at once)
  ucs_status_t status = UCS_OK;       ///< UCX's verdict
  ucp_tag_t senderTag = 0;            ///< receives: the matched message's tag
  size_t length = 0;                  ///< receives: bytes received
  struct Staging* staging = nullptr;  ///< sink receives: the buffer the bytes land in
};

/// A registered buffer for receives through a sink.
struct Staging {
  std::unique_ptr<char[]> data;  ///< the bytes
  size_t bytes = 0;              ///< capacity
  ucp_mem_h memh = nullptr;      ///< its registration
  bool busy = false;             ///< lent to a receive
};

/// A peer's endpoint and its health.
struct PeerEp {
  ucp_ep_h ep = nullptr;        ///< null until connected
  ucs_status_t error = UCS_OK;  ///< set by UCX's error callback when the endpoint failed
  int rank = -1;                ///< the peer
  bool errorHandling = false;   ///< created with peer error handling (UCX reports the peer's death to the callback)
};

/// The UCP context and worker of one communicator.
class Worker {
 public:
  /// Loads UCX (the plugin, ucx_api.h), reads UCX's configuration (UCX_TLS, UCX_NET_DEVICES, ...), creates the
  /// context and the worker of `rank` (one endpoint slot per rank of `nranks`). Throws hoccl::Error
  /// (hocclSystemError) saying what to install when the plugin or UCX cannot be loaded, and with UCX's reason when
  /// UCX cannot start.
  Worker(int rank, int nranks, size_t expectedPeers);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// This worker's address, to be published to the peers.
  const std::vector<char>& address() const { return address_; }
  /// Creates the endpoint to `peer` from its worker address. Throws naming `peerText` when UCX refuses (no common
  /// transport: UCX_TLS or UCX_NET_DEVICES differ between the ranks, or the peer is unreachable).
  void connect(int peer, const std::vector<char>& peerAddress, const std::string& peerText);
  /// Flushes every endpoint (completing UCX's wire-up with each peer) until done or `deadline`. Returns the peers
  /// whose flush did not complete or failed, with the reason.
  std::vector<std::pair<int, std::string>> flushAll(std::chrono::steady_clock::time_point deadline);
  /// The endpoint to `peer`.
  PeerEp& peer(int rank) { return peers_.at(rank); }

  /// The lock every call into UCX holds (see the file comment). The channels take it in each of their calls.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }
  /// A channel began (`busy`) or ceased to have operations posted; the idle progress thread runs only when none has.
  /// Called with the lock held.
  void markBusy(bool busy);
  /// Starts the idle progress thread (after the wire-up, before the first channel is used).
  void startIdleProgress();

  /// Runs ucp_worker_progress until it finds nothing more to do. Returns true if anything happened. Lock held.
  bool progress();
  /// Sleeps until UCX signals activity or `timeoutMicros` passed (may return early). Takes the lock to arm.
  void waitForActivity(int timeoutMicros);

  /// A registered staging buffer of at least `bytes` bytes (reused once released).
  Staging* acquireStaging(size_t bytes);
  /// Gives a staging buffer back.
  void releaseStaging(Staging* s) { s->busy = false; }
  /// Keeps the records of operations UCX may still complete after their channel is gone.
  void adoptOrphans(std::vector<std::unique_ptr<Op>> ops);

  /// The transports UCX chose for `peer`'s endpoint ("tcp/eth0", "posix/memory, cma/memory"), for the log.
  std::string describeEndpoint(int peer) const;

  /// UCX's handle (for the channels).
  ucp_worker_h handle() const { return worker_; }
  /// UCX's functions (for the channels).
  const UcxApi& api() const { return api_; }
  /// This rank.
  int rank() const { return rank_; }

 private:
  void closeEndpoints();
  void idleLoop();
  void stopIdleProgress();

  const UcxApi& api_;
  int rank_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;                ///< the worker's event descriptor (-1: no wakeup support: naps)
  bool peerErrorsWork_ = true;  ///< false once UCX found no transport with peer error handling
  std::vector<char> address_;
  std::vector<PeerEp> peers_;
  std::vector<std::unique_ptr<Staging>> staging_;
  std::vector<std::unique_ptr<Op>> orphans_;
  std::mutex mu_;                   ///< serialises calls into UCX (see lock())
  std::condition_variable idleCv_;  ///< wakes the idle thread when the last channel goes idle, or to stop
  int busyChannels_ = 0;            ///< channels with operations posted (guarded by mu_)
  bool stopping_ = false;           ///< the idle thread must exit (guarded by mu_)
  int wakeFd_ = -1;                 ///< eventfd that interrupts the idle thread's poll
  std::thread idleThread_;          ///< the idle progress thread
};

/// "UCX: <ucs_status_string>".
std::string statusText(ucs_status_t status);

}  // namespace hoccl::transport::ucx
