/// @file tcp_transport.h
/// The tcp transport: reaches every peer (always available, always last). One listener per rank during connect;
/// the higher rank of a pair connects, the lower accepts; both sides of every connection first prove the job secret
/// to each other (base/boot/handshake.h). Parameters (base/param_list.h): HOCCL_TCP_CONNS (connections per peer), HOCCL_TCP_STRIPE_SIZE
/// (bytes per stripe); a pair uses the smaller of the two sides' values.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/socket.h"
#include "transports/transport.h"

namespace hoccl::transport::tcp {

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

  /// For tests: called with the listener's address after it is listening and before the address exchange.
  std::function<void(const net::Address&)> onListening;

 private:
  int conns_;
  size_t stripeBytes_;
};

}  // namespace hoccl::transport::tcp
