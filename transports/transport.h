/// @file transport.h
/// The one interface every transport implements (shm, tcp, later ucx, ibverbs, cuda_ipc). The core never names a
/// concrete transport: it asks the registry (transports/registry.h) which transport reaches each peer, in priority
/// order, and talks to the resulting Channels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/boot/bootstrap.h"

namespace hoccl::transport {

/// Consumes received bytes as they arrive: called with consecutive pieces; offset counts bytes already delivered
/// for this receive. Every piece's length is a multiple of the receive's granule.
using RecvSink = std::function<void(const void* data, size_t offset, size_t len)>;

/// Where a receive puts its bytes: either straight into `direct`, or through `sink` (for reductions).
struct RecvTarget {
  void* direct = nullptr;  ///< if non-null, bytes are written here and sink is unused
  RecvSink sink;           ///< called with pieces when direct is null
  size_t granule = 1;      ///< piece lengths passed to sink are multiples of this (1, 2, 4 or 8)
};

/// A bidirectional, ordered connection to one peer rank. Not thread-safe: one thread drives it.
class Channel {
 public:
  virtual ~Channel() = default;
  /// The peer's rank in the communicator.
  virtual int peer() const = 0;
  /// Posts a send of `bytes` bytes from `data`; data stays valid until pending() no longer counts it.
  virtual void postSend(const void* data, size_t bytes) = 0;
  /// Posts a receive of exactly `bytes` bytes. Receives complete in posting order, as do sends.
  virtual void postRecv(size_t bytes, RecvTarget target) = 0;
  /// Moves data without blocking. Returns true if any byte moved. Throws hoccl::Error(hocclRemoteError) naming
  /// the peer when the peer is gone (closed connection, dead process).
  virtual bool progress() = 0;
  /// Number of posted sends and receives not yet complete.
  virtual size_t pending() const = 0;
  /// Blocks up to timeoutMicros for activity on this channel (data or space). May return early; the default just
  /// sleeps. Used by the executor after spinning and yielding found nothing to do.
  virtual void waitForActivity(int timeoutMicros);
};

/// What a transport knows about the job when it connects.
struct ConnectContext {
  boot::Bootstrap* bootstrap = nullptr;  ///< for exchanging addresses (collective over all ranks)
  int rank = 0;                          ///< this rank
  int nranks = 1;                        ///< ranks in the communicator
  std::vector<boot::RankInfo> peers;     ///< one per rank (host id, pid, ...)
  std::string jobTag;                    ///< unique per communicator; use it in shared-memory names
};

struct ShortcutContext;
class Shortcut;

/// A transport: says which peers it reaches, builds Channels to them, and may offer collective shortcuts.
class Transport {
 public:
  virtual ~Transport() = default;
  /// Short name ("shm", "tcp").
  virtual const char* name() const = 0;
  /// Whether this transport can connect this rank to `peer`. Must give the same answer on both sides, given that
  /// the transport is available on both (availableHere: assignPeers checks that part across ranks).
  virtual bool canConnect(const ConnectContext& ctx, int peer) const = 0;
  /// Whether this transport can run on this rank at all (false: it stepped aside here, e.g. no RDMA port). The
  /// ranks exchange these answers, so a peer never chooses a transport this rank lacks.
  virtual bool availableHere() const { return true; }
  /// Connects to every peer in `peers` (those this transport was chosen for). Collective: every rank of the
  /// communicator calls it, in the same order across transports, even with an empty list.
  virtual std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext& ctx, const std::vector<int>& peers) = 0;
  /// The collective shortcuts (transports/shortcut.h) this transport offers on the communicator; `reachesAll` says
  /// whether it was chosen for every peer (the same on every rank). Collective: every rank calls it after connect,
  /// in transport order. Default: none.
  virtual std::vector<std::unique_ptr<Shortcut>> shortcuts(const ShortcutContext& ctx, bool reachesAll);
};

}  // namespace hoccl::transport
