// The transports of this build and the choice per peer (see registry.h). The only file that names concrete
// transports.
//
// Device buffers (makeDeviceChannel): the direct path between the devices (cuda_ipc) for peers on this host, the
// staging pipeline for the others.
//
// Choice: shm first (peers on this host), then the network transport of HOCCL_NET for the rest; with HOCCL_NET unset,
// ibverbs (when built; it steps aside by itself without a usable RDMA port) ahead of tcp. Every rank reads the
// same environment in a normal launch; a rank whose choice differs from its peer's fails at connect naming both
// (each transport's connect checks that the peer expects it).
#include "transports/registry.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <iterator>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/transport_util.h"
#ifdef HOCCL_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#if HOCCL_HAVE_IBVERBS
#include "transports/ibverbs/ibv_transport.h"
#endif

namespace hoccl::transport {
namespace {

/// A network transport HOCCL_NET can name.
struct NetEntry {
  const char* name;                                  ///< lower case, as HOCCL_NET names it
  std::function<std::unique_ptr<Transport>()> make;  ///< builds it (reading its parameters)
};

/// The network transports of this build, one entry each; the first is the default.
const std::vector<NetEntry>& netTable() {
  static const std::vector<NetEntry> table = {
    {"tcp", [] { return std::make_unique<tcp::TcpTransport>(); }},
#ifdef HOCCL_HAVE_UCX
    {"ucx", [] { return std::make_unique<ucx::UcxTransport>(); }},
#endif
#if HOCCL_HAVE_IBVERBS
    {"ib", [] { return std::make_unique<ibverbs::IbvTransport>(); }},
#endif
  };
  return table;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// The name HOCCL_NET asks for, lower case; "" when unset.
std::string wantedNet() {
  std::string want = lower(params::NET.get());
  if (want == "socket") want = "tcp";  // NCCL's name for its socket transport
  if (want == "ibverbs") want = "ib";  // NCCL's name is IB
  return want;
}

bool sameHost(const ConnectContext& ctx, int peer) {
  return ctx.peers.at(peer).hostHash == ctx.peers.at(ctx.rank).hostHash;
}

/// Why `t` carries `peer` (it is the first of the list that reaches it).
std::string reason(const Transport& t, const ConnectContext& ctx, int peer) {
  const bool local = sameHost(ctx, peer);
  const std::string name = t.name();
  const std::string net = wantedNet();
  const std::string byNet = net.empty() ? fmt::format("HOCCL_NET unset, so the default {}", name)
                                        : fmt::format("HOCCL_NET={}", params::NET.get());
  if (name == "shm") return "same host: shared memory comes first";
  if (name == "ibverbs" && net.empty())
    return "both ranks have a usable RDMA port (HOCCL_NET unset: ibverbs before tcp)";
  if (local && params::SHM_DISABLE.get() != 0) return fmt::format("same host, but HOCCL_SHM_DISABLE=1; {}", byNet);
  if (local) return fmt::format("same host, but shm cannot reach it; {}", byNet);
  return fmt::format("another host; {}", byNet);
}

}  // namespace

std::vector<std::string> networkTransportNames() {
  std::vector<std::string> names;
  for (const auto& e : netTable()) names.push_back(e.name);
  return names;
}

std::vector<std::unique_ptr<Transport>> makeTransports() {
  std::vector<std::unique_ptr<Transport>> list;
  const std::string want = wantedNet();
  const NetEntry* net = &netTable().front();
  if (!want.empty()) {
    auto it = std::find_if(netTable().begin(), netTable().end(), [&](const NetEntry& e) { return want == e.name; });
    if (it == netTable().end()) {
      std::string have;
      for (const auto& n : networkTransportNames()) have += (have.empty() ? "" : ", ") + n;
      throwInvalidArgument(fmt::format(
          "HOCCL_NET={} names no network transport of this build; it has: {}{}", params::NET.get(), have,
          want == "ucx" ? " (this build has no UCX: install libucx-dev and rebuild, or leave HOCCL_NET unset)" : ""));
    }
    net = &*it;
  }
  if (params::SHM_DISABLE.get() == 0) list.push_back(std::make_unique<shm::ShmTransport>());
#if HOCCL_HAVE_IBVERBS
  if (want.empty()) list.push_back(std::make_unique<ibverbs::IbvTransport>());  // steps aside without an RDMA port
#endif
  list.push_back(net->make());
  return list;
}

std::unique_ptr<DeviceChannel> makeDeviceChannel(const ConnectContext& ctx, int peer, Channel& wire,
                                                 device::Device& dev, DeviceFallback fallback) {
  if (cuda_ipc::reaches(ctx, peer)) return cuda_ipc::makeChannel(ctx, peer, wire, dev, std::move(fallback));
  HOCCL_INFO(kNet, "rank {} -> {}: device buffers staged through host memory (another host)", ctx.rank,
             describePeer(ctx.peers.at(peer)));
  return fallback();
}

PeerPlan assignPeers(const std::vector<std::unique_ptr<Transport>>& transports, const ConnectContext& ctx) {
  PeerPlan plan;
  plan.peersOf.resize(transports.size());
  plan.transportOf.assign(ctx.nranks, "self");
  // Which transports each rank has (bit t: transports[t] runs there), so that both sides of a pair pick the same one
  // when a transport stepped aside on some ranks only (an RDMA port on some hosts). Every rank builds the same list
  // from the same environment; without a bootstrap (unit tests) every rank is assumed to have them all.
  // A transport's bit is its place in kKnownNames, so ranks whose lists differ (HOCCL_NET set differently) still
  // compare the same transports.
  static const char* const kKnownNames[] = {"shm", "tcp", "ucx", "ibverbs"};
  auto bitOf = [](const Transport& t) {
    for (size_t i = 0; i < std::size(kKnownNames); ++i)
      if (std::strcmp(t.name(), kKnownNames[i]) == 0) return static_cast<int>(i);
    return 63;  // a transport this table does not know yet: assumed present everywhere
  };
  std::vector<uint64_t> haveMask(ctx.nranks, ~uint64_t{0});
  if (ctx.bootstrap && ctx.nranks > 1) {
    uint64_t mine = uint64_t{1} << 63;
    for (const auto& t : transports)
      if (t->availableHere()) mine |= uint64_t{1} << bitOf(*t);
    haveMask[ctx.rank] = mine;
    ctx.bootstrap->allGather(haveMask.data(), sizeof(uint64_t));
  }
  for (int p = 0; p < ctx.nranks; ++p) {
    if (p == ctx.rank) continue;
    for (size_t t = 0; t < transports.size(); ++t) {
      if (!transports[t]->canConnect(ctx, p)) continue;
      if (!(haveMask[p] >> bitOf(*transports[t]) & 1)) {
        HOCCL_INFO(kNet,
                   "rank {} -> {}: not {}, which that rank does not have (stepped aside there, or its HOCCL_NET "
                   "differs; its HOCCL_DEBUG=INFO says why)",
                   ctx.rank, describePeer(ctx.peers.at(p)), transports[t]->name());
        continue;
      }
      plan.peersOf[t].push_back(p);
      plan.transportOf[p] = transports[t]->name();
      HOCCL_INFO(kNet, "rank {} -> {}: {} ({})", ctx.rank, describePeer(ctx.peers.at(p)), transports[t]->name(),
                 reason(*transports[t], ctx, p));
      break;
    }
    if (plan.transportOf[p] == "self")
      throwInvalidUsage(
          fmt::format("rank {}: no transport of this job can reach {} (HOCCL_NET={}: {} stepped aside; "
                      "HOCCL_DEBUG=INFO says why); leave HOCCL_NET unset to fall back to tcp",
                      ctx.rank, describePeer(ctx.peers.at(p)), params::NET.get(), transports.back()->name()));
  }
  return plan;
}

}  // namespace hoccl::transport
