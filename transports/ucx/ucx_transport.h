/// @file ucx_transport.h
/// The ucx transport: UCX (UCP tagged messages) to the peers it is chosen for (HOCCL_NET=ucx). UCX picks its own
/// wires (shared memory, CMA, TCP, InfiniBand/RoCE verbs) from UCX_TLS and UCX_NET_DEVICES. One UCP context and
/// worker per communicator (ucx_worker.h), made only on ranks with a ucx peer; the worker addresses travel through
/// the bootstrap.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "transports/transport.h"

namespace hoccl::transport::ucx {

/// The ucx transport.
class UcxTransport final : public Transport {
 public:
  /// "ucx".
  const char* name() const override { return "ucx"; }
  /// Any other rank (UCX decides how at connect).
  bool canConnect(const ConnectContext& ctx, int peer) const override { return peer != ctx.rank; }
  /// Creates the worker (when there is a peer), all-gathers the addresses, creates an endpoint per peer and completes
  /// UCX's wire-up with a flush. Collective; a failure on any rank stops every rank with an error naming it.
  std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext& ctx, const std::vector<int>& peers) override;
};

}  // namespace hoccl::transport::ucx
