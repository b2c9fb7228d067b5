/// @file ibv_transport.h
/// The ibverbs transport: RC queue pairs over InfiniBand or RoCE, with libibverbs loaded at run time (ibv_lib.h).
/// It steps aside (canConnect is false for every peer, so shm and tcp carry the job) when HOCCL_IB_DISABLE=1, when
/// libibverbs is absent, or when no active port is admitted by HOCCL_IB_HCA; the reason is logged once per process
/// at INFO. Otherwise it reaches every other rank (peers on this host normally go to shm first). Each rank uses
/// one port: its index among the ranks of its host picks among the admitted ports, round robin.
/// Parameters: HOCCL_IB_DISABLE, HOCCL_IB_HCA, HOCCL_IB_GID_INDEX, HOCCL_IB_TIMEOUT, HOCCL_IB_RETRY_CNT,
/// HOCCL_IB_ADAPTIVE_ROUTING, HOCCL_IB_SLOTS, HOCCL_IB_SLOT_SIZE (base/param_list.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transports/ibverbs/ibv_device.h"
#include "transports/ibverbs/ibv_lib.h"
#include "transports/transport.h"

namespace hoccl::transport::ibverbs {

/// The ibverbs transport.
class IbvTransport final : public Transport {
 public:
  /// Reads the parameters (hocclInvalidArgument for a malformed HOCCL_IB_HCA or HOCCL_IB_GID_INDEX) and looks for
  /// ports through IbvLib::get().
  IbvTransport();
  /// The same with another library table (tests: a library that does not exist).
  explicit IbvTransport(const IbvLib& lib);
  /// "ibverbs".
  const char* name() const override { return "ibverbs"; }
  /// True for every other rank when this rank has a usable port.
  bool canConnect(const ConnectContext& ctx, int peer) const override { return available() && peer != ctx.rank; }
  /// Collective, run by every rank even when it stepped aside: all-gathers whether each rank has a port and wants
  /// queue pairs; when some rank does, creates the queue pairs, all-gathers their connection data (conn_info.h)
  /// and brings them up. A peer that chose ibverbs for this rank while this rank cannot use it (another
  /// HOCCL_IB_DISABLE, no device there) is an error on every rank naming both.
  std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext& ctx, const std::vector<int>& peers) override;

  /// Whether this rank has a usable port.
  bool available() const { return !probe_.ports.empty(); }
  /// The same, for assignPeers' exchange between ranks.
  bool availableHere() const override { return available(); }
  /// Why it stepped aside ("" when available).
  const std::string& whyNot() const { return probe_.why; }

 private:
  const IbvLib& lib_;
  Probe probe_;
};

}  // namespace hoccl::transport::ibverbs
