// The ucx transport: worker creation, address exchange and wire-up.
//
// Connect protocol (collective over the communicator; every rank runs it, even with no ucx peer):
//   1. a rank with a ucx peer creates its UCP context and worker (ucx_worker.h); every rank then agrees that no rank
//      failed (so a rank where UCX cannot start stops every rank, with its reason);
//   2. all ranks all-gather the lengths of their worker addresses, then the addresses (padded to the longest);
//   3. each rank creates an endpoint to every ucx peer (peer error handling on) and agrees again;
//   4. each rank flushes its endpoints, which completes UCX's wire-up in both directions (both sides progress their
//      workers here), bounded by HOCCL_TIMEOUT, and agrees a last time. A peer with which UCX has no transport in
//      common fails here or in 3, by name, instead of in the first collective.
#include "transports/ucx/ucx_transport.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/socket.h"
#include "transports/transport_util.h"
#include "transports/ucx/ucx_channel.h"
#include "transports/ucx/ucx_worker.h"

namespace hoccl::transport::ucx {

std::map<int, std::unique_ptr<Channel>> UcxTransport::connect(const ConnectContext& ctx,
                                                              const std::vector<int>& peers) {
  std::shared_ptr<Worker> worker;
  std::optional<Error> failure;
  if (ctx.nranks > kMaxRanks)  // the same answer on every rank
    throwInvalidUsage(fmt::format("ucx: a communicator of {} ranks is more than the {} a UCX tag can name; use "
                                  "HOCCL_NET=tcp or ibverbs",
                                  ctx.nranks, kMaxRanks));
  if (!peers.empty()) {
    try {
      worker = std::make_shared<Worker>(ctx.rank, ctx.nranks, peers.size());
    } catch (const Error& e) {
      failure = e;
    }
  }
  agreeOnPhase(ctx, "starting UCX", failure ? &*failure : nullptr);

  std::vector<uint64_t> lengths(ctx.nranks);
  if (worker) lengths[ctx.rank] = worker->address().size();
  ctx.bootstrap->allGather(lengths.data(), sizeof(uint64_t));
  const size_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::vector<char>> addresses(ctx.nranks);
  if (longest > 0) {
    std::vector<char> all(longest * ctx.nranks);
    if (worker) std::memcpy(all.data() + longest * ctx.rank, worker->address().data(), worker->address().size());
    ctx.bootstrap->allGather(all.data(), longest);
    for (int r = 0; r < ctx.nranks; ++r)
      addresses[r].assign(all.begin() + longest * r, all.begin() + longest * r + lengths[r]);
  }

  try {
    for (int p : peers) {
      if (addresses[p].empty())
        throwInternalError(
            fmt::format("ucx: rank {} wants a ucx channel to {}, which has no UCX worker; the ranks "
                        "disagree on the transport (different HOCCL_NET or HOCCL_SHM_DISABLE?)",
                        ctx.rank, describePeer(ctx.peers.at(p))));
      worker->connect(p, addresses[p], describePeer(ctx.peers.at(p)));
    }
  } catch (const Error& e) {
    failure = e;
  }
  agreeOnPhase(ctx, "creating UCX endpoints", failure ? &*failure : nullptr);

  if (worker) {
    auto bad = worker->flushAll(net::defaultDeadline());
    if (!bad.empty()) {
      std::string who;
      for (auto& [p, why] : bad)
        who += fmt::format("{}{} ({})", who.empty() ? "" : ", ", describePeer(ctx.peers.at(p)), why);
      failure = Error(hocclRemoteError,
                      fmt::format("ucx: rank {} could not complete UCX's wire-up with {}. Check that UCX_TLS and "
                                  "UCX_NET_DEVICES name transports both hosts have (ucx_info -d) and that the "
                                  "network between them is open",
                                  ctx.rank, who));
    }
  }
  agreeOnPhase(ctx, "completing UCX's wire-up", failure ? &*failure : nullptr);

  std::map<int, std::unique_ptr<Channel>> channels;
  const boot::RankInfo& self = ctx.peers.at(ctx.rank);
  for (int p : peers) {
    HOCCL_INFO(kNet, "ucx: rank {} reaches rank {} over {}", ctx.rank, p, worker->describeEndpoint(p));
    channels[p] = std::make_unique<UcxChannel>(worker, self, ctx.peers.at(p));
  }
  if (worker) worker->startIdleProgress();
  if (!peers.empty()) HOCCL_INFO(kNet, "ucx: rank {} connected to {} peer(s)", ctx.rank, channels.size());
  return channels;
}

}  // namespace hoccl::transport::ucx
