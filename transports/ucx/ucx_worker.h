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
/// The tag of every message: the sender's rank in the high 24 bits, the message's length in the low 40 bits.
/// Receives match on the rank bits only, so the receiver learns the sender's length (sender_tag) and compares it with
/// the length it posted. UCX keeps tagged messages between two endpoints in order, so receives posted in order
/// match messages in sending order.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hoccl::transport::ucx {

/// Bits of the tag that carry the message's length.
inline constexpr int kLengthBits = 40;
/// The largest message a tag can describe.
inline constexpr uint64_t kMaxMessage = (uint64_t{1} << kLengthBits) - 1;
/// The mask that matches the sender's rank and ignores the length.
inline constexpr ucp_tag_t kRankMask = ~kMaxMessage;
/// The tag of a message of `bytes` bytes from `rank`.
inline ucp_tag_t makeTag(int rank, uint64_t bytes) { return (static_cast<ucp_tag_t>(rank) << kLengthBits) | bytes; }

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
  /// Reads UCX's configuration (UCX_TLS, UCX_NET_DEVICES, ...), creates the context and the worker of `rank` (one
  /// endpoint slot per rank of `nranks`). Throws hoccl::Error (hocclSystemError) with UCX's reason when UCX cannot
  /// start.
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

  /// Runs ucp_worker_progress until it finds nothing more to do. Returns true if anything happened.
  bool progress();
  /// Sleeps until UCX signals activity or `timeoutMicros` passed (may return early).
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
  /// This rank.
  int rank() const { return rank_; }

 private:
  void closeEndpoints();

  int rank_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;                ///< the worker's event descriptor (-1: no wakeup support: naps)
  bool peerErrorsWork_ = true;  ///< false once UCX found no transport with peer error handling
  std::vector<char> address_;
  std::vector<PeerEp> peers_;
  std::vector<std::unique_ptr<Staging>> staging_;
  std::vector<std::unique_ptr<Op>> orphans_;
};

/// "UCX: <ucs_status_string>".
std::string statusText(ucs_status_t status);

}  // namespace hoccl::transport::ucx
