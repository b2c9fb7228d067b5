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
#include "base/health.h"

namespace hoccl::transport {

/// Consumes received bytes as they arrive: called with consecutive pieces; offset counts bytes already delivered
/// for this receive. Every piece's length is a multiple of the receive's granule.
using RecvSink = std::function<void(const void* data, size_t offset, size_t len)>;

/// Where a receive puts its bytes: either straight into `direct`, or through `sink` (for reductions).
/// Which call a message belongs to: a hash of the collective's number and what it is (src/comm/plan.h: callTagOf),
/// the same on every rank for the same call; 0 = untagged (point-to-point, the mismatch check's own messages).
using CallTag = uint32_t;

struct RecvTarget {
  void* direct = nullptr;  ///< if non-null, bytes are written here and sink is unused
  RecvSink sink;           ///< called with pieces when direct is null
  size_t granule = 1;      ///< piece lengths passed to sink are multiples of this (1, 2, 4 or 8)
  /// The call this receive belongs to: a channel that carries tags (all of the library's) fails a message of the
  /// right size that is tagged for another call (a mismatch), where sizes alone would let wrong data through. 0: not
  /// compared.
  CallTag tag = 0;
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
  /// postSend for a message of call `tag` (RecvTarget::tag). Every channel of the library carries the tag (shm,
  /// tcp, ucx, ibverbs, the device channels); the default, which drops it, is for channels that compare sizes only.
  virtual void postTaggedSend(const void* data, size_t bytes, CallTag tag) {
    (void)tag;
    postSend(data, bytes);
  }
  /// Moves data without blocking. Returns true if any byte moved. Throws hoccl::Error(hocclRemoteError) naming
  /// the peer when the peer is gone (closed connection, dead process).
  virtual bool progress() = 0;
  /// Number of posted sends and receives not yet complete.
  virtual size_t pending() const = 0;
  /// Blocks up to timeoutMicros for activity on this channel (data or space). May return early; the default just
  /// sleeps. Used by the executor after spinning and yielding found nothing to do.
  virtual void waitForActivity(int timeoutMicros);

  /// Closing an idle connection (HOCCL_MAX_CONNS; the handshakes of transports/tcp/tcp_close.cc and
  /// transports/shm/shm_close.cc).
  enum class Link {
    Open,     ///< usable
    Closing,  ///< this side asked the peer to close; nothing may be posted until the answer
    Closed,   ///< both sides agreed: the channel must be destroyed (and connected again before its next use)
  };
  /// Whether this channel takes part in the close handshake (the default: no, it is never closed before the end).
  virtual bool closable() const { return false; }
  /// Asks the peer to close this idle channel (nothing pending, no call in flight uses it). Returns false (nothing
  /// sent) when the channel cannot ask now (not closable, an earlier request unanswered, not idle).
  virtual bool requestClose() { return false; }
  /// Reads and answers the handshake's messages without blocking, when nothing is pending (else does nothing).
  /// `inUse`: a call in flight will use the channel (a peer's request is then refused). `needed`: the caller waits
  /// for a Closing channel to settle, so a peer that left without answering throws hocclRemoteError naming it (when
  /// not needed, that is left for the next use to find). Returns the state after it.
  virtual Link serviceClose(bool inUse, bool needed);
  /// The state of the handshake.
  virtual Link link() const { return Link::Open; }
};

/// What a transport knows about the job when it connects.
struct ConnectContext {
  boot::Bootstrap* bootstrap = nullptr;  ///< for exchanging addresses (collective over all ranks)
  int rank = 0;                          ///< this rank
  int nranks = 1;                        ///< ranks in the communicator
  std::vector<boot::RankInfo> peers;     ///< one per rank (host id, pid, ...)
  std::string jobTag;                    ///< unique per communicator; use it in shared-memory names
  const Health* health = nullptr;        ///< the communicator's (abort, recorded failure): lazy connects check it
  /// The network interface this rank should use: when the rank sits on a GPU, that of the GPU's nearest NIC
  /// (src/comm/gpu_host.h); "" otherwise, and a network transport picks the NIC nearest to the rank's NUMA node.
  std::string nic;
  /// The RDMA device of that NIC ("mlx5_0"), whose ports the ibverbs transport prefers; "" without a GPU.
  std::string rdmaDevice;
};

struct ShortcutContext;
class Shortcut;
class HostLevel;

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
  /// Whether this transport connects lazily (HOCCL_CONNECT=lazy): prepare() at init, then connectPeers() the first
  /// time a call needs a peer. Default false: the communicator connects its peers at init with connect().
  virtual bool connectsLazily() const { return false; }
  /// Whether this transport's channels can be closed while idle and connected again (HOCCL_MAX_CONNS counts them).
  virtual bool closesIdle() const { return false; }
  /// Lazy connections, at init: publishes what a peer needs to connect to this rank later (e.g. a listener's
  /// address) for `peers` (those this transport was chosen for). Collective like connect(). Default: nothing.
  virtual void prepare(const ConnectContext& ctx, const std::vector<int>& peers);
  /// Lazy connections: connects to `peers` (a subset of those given to prepare(), none connected yet). Not
  /// collective: each of these peers calls it too, with this rank in its list, for the same call of the
  /// communicator (the calls and their schedules match on every rank). It starts every connection in a way that
  /// needs nothing from the peer before it waits for any, so ranks that need each other in different orders do not
  /// deadlock. Fails with hocclRemoteError naming a peer that died or stays silent (HOCCL_TIMEOUT), or with the
  /// communicator's recorded failure (the bootstrap's verdict). Default: hocclInternalError.
  virtual std::map<int, std::unique_ptr<Channel>> connectPeers(const ConnectContext& ctx,
                                                               const std::vector<int>& peers);
  /// The collective shortcuts (transports/shortcut.h) this transport offers on the communicator; `reachesAll` says
  /// whether it was chosen for every peer (the same on every rank). Collective: every rank calls it after connect,
  /// in transport order. Default: none.
  virtual std::vector<std::unique_ptr<Shortcut>> shortcuts(const ShortcutContext& ctx, bool reachesAll);
  /// The host level of hierarchical collectives (transports/shortcut.h: HostLevel) among this rank and the same-host
  /// peers of `peers` (those this transport was chosen for), when it offers one and does not reach every rank.
  /// Not collective over the communicator: only the ranks of this host meet in it. Default: none.
  virtual std::unique_ptr<HostLevel> hostLevel(const ShortcutContext& ctx, const std::vector<int>& peers,
                                               bool reachesAll);
};

}  // namespace hoccl::transport
