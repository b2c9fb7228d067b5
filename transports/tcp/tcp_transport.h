/// @file tcp_transport.h
/// The tcp transport: reaches every peer (always available, always last). One listener per rank during connect;
/// the higher rank of a pair connects, the lower accepts; both sides of every connection first prove the job secret
/// to each other (base/boot/handshake.h). Parameters (base/param_list.h): HOCCL_TCP_CONNS (connections per peer), HOCCL_TCP_STRIPE_SIZE
/// (bytes per stripe); a pair uses the smaller of the two sides' values. Lazy connections (HOCCL_CONNECT=lazy): the
/// listener and the address exchange happen at init (prepare), the connections of a pair when a call first needs it
/// (connectPeers), by the same rule; so sockets and stripe buffers exist only for the peers a job's calls use. A pair
/// whose channel was closed while idle (HOCCL_MAX_CONNS, tcp_close.cc) connects again the same way.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/boot/handshake.h"

#include "base/socket.h"
#include "transports/transport.h"

namespace hoccl::topo {
struct HostHardware;
}

namespace hoccl::transport::tcp {

/// The network interface a rank's listener prefers (net::localAddress; HOCCL_SOCKET_IFNAME, when set, still wins):
/// ctx.nic (the interface of the nearest NIC of the rank's GPU) when there is one, else the NIC of `host` nearest
/// to the NUMA node the rank runs on ("" when the host shows none). `why` (optional) says which rule chose it.
std::string chooseInterface(const ConnectContext& ctx, const topo::HostHardware& host, std::string* why = nullptr);

/// The tcp transport.
class TcpTransport final : public Transport {
 public:
  /// Reads HOCCL_TCP_CONNS and HOCCL_TCP_STRIPE_SIZE (InvalidArgument if malformed).
  TcpTransport();
  /// "tcp".
  const char* name() const override { return "tcp"; }
  /// Always true for another rank.
  bool canConnect(const ConnectContext& ctx, int peer) const override { return peer != ctx.rank; }
  /// Listens, all-gathers the addresses, connects to lower peers and accepts from higher ones. Collective.
  std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext& ctx, const std::vector<int>& peers) override;

  /// Lazy connections are supported.
  bool connectsLazily() const override { return true; }
  /// Idle channels can be closed (the handshake of tcp_close.cc) and are connected again by connectPeers.
  bool closesIdle() const override { return true; }
  /// Listens when a peer above this rank may connect, and all-gathers a small card per rank (connections, stripe
  /// size, address). Collective.
  void prepare(const ConnectContext& ctx, const std::vector<int>& peers) override;
  /// Connects to the peers below this rank (a refused connection means the peer's process is gone), then accepts
  /// from those above, keeping connections that arrive early for a later call. See transport.h.
  std::map<int, std::unique_ptr<Channel>> connectPeers(const ConnectContext& ctx,
                                                       const std::vector<int>& peers) override;

  /// For tests: called with the listener's address after it is listening and before the address exchange.
  std::function<void(const net::Address&)> onListening;

 private:
  /// What prepare() publishes about each rank (48 bytes: an IPv4 or IPv6 socket address fits).
  struct LazyCard {
    int32_t conns = 0;         ///< connections per peer
    uint32_t addrLen = 0;      ///< valid bytes of addr (0: not listening)
    uint64_t stripeBytes = 0;  ///< stripe size
    char addr[32] = {};        ///< sockaddr_in or sockaddr_in6
  };
  int conns_;
  size_t stripeBytes_;
  // Lazy connections (prepare / connectPeers).
  net::Fd listener_;
  std::unique_ptr<boot::Acceptor> acceptor_;
  std::vector<LazyCard> cards_;
  std::set<int> lazyPeers_;
  std::map<int, std::vector<net::Fd>> early_;  // accepted for a later call: by peer, indexed by connection
};

}  // namespace hoccl::transport::tcp
