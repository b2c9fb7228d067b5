// The ibverbs transport: stepping aside, and the collective connect of the queue pairs.
//
// Connect protocol (collective over the communicator; every rank runs it, even with no ibverbs peer):
//   1. all-gather a card {has a port, number of ibverbs peers}. If no rank wants ibverbs peers, done (this is the
//      whole cost on hosts without RDMA). A rank asked to reach a peer whose card has no port fails this phase and
//      every rank stops with its message (agreeOnPhase).
//   2. choose the port (port_choice.h: the GPU's nearest NIC, else spread over the host's ranks), create one channel
//      (RC queue pair in INIT, receives posted, rings registered) per ibverbs peer and encode its connection data
//      (conn_info.h) into this rank's row of an nranks x nranks table; agree on the phase.
//   3. all-gather the table; decode and validate the entry each peer wrote for this rank (an entry that is all zeros
//      means the peer did not choose ibverbs for this rank: an error naming both); move the queue pairs to RTR and
//      RTS; agree on the phase. That last all-gather is also the barrier after which every queue pair is ready to
//      receive, so no rank writes before its peer listens.
// The table is nranks^2 x 112 bytes through the bootstrap (0.5 MB at 64 ranks): fine for the sizes hoccl targets;
// a point-to-point bootstrap exchange would be the next step beyond some hundreds of ranks.
#include "transports/ibverbs/ibv_transport.h"

#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "transports/ibverbs/ibv_channel.h"
#include "transports/ibverbs/port_choice.h"
#include "transports/transport_util.h"

namespace hoccl::transport::ibverbs {
namespace {

struct Card {
  int32_t hasPort = 0;
  int32_t peers = 0;
};

void logOnce(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] { HOCCL_INFO(kNet, "ibverbs: not used: {}; peers on other hosts use tcp", why); });
}

/// Runs `body`; on a hoccl::Error agrees on the failure with every rank, else agrees on success.
template <typename F>
void phase(const ConnectContext& ctx, const std::string& what, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    agreeOnPhase(ctx, what, &e);
  }
  agreeOnPhase(ctx, what, nullptr);
}

}  // namespace

IbvTransport::IbvTransport() : IbvTransport(IbvLib::get()) {}

IbvTransport::IbvTransport(const IbvLib& lib) : lib_(lib) {
  if (params::IB_DISABLE.get() != 0) {
    probe_.why = "HOCCL_IB_DISABLE=1";
  } else {
    const HcaFilter filter = HcaFilter::parse(params::IB_HCA.get());  // bad input fails even without devices
    probe_ = probePorts(lib_, filter);
  }
  if (probe_.ports.empty()) logOnce(probe_.why);
  else HOCCL_INFO(kNet, "ibverbs: {} usable port(s), first {}", probe_.ports.size(), probe_.ports[0].name());
}

std::map<int, std::unique_ptr<Channel>> IbvTransport::connect(const ConnectContext& ctx,
                                                              const std::vector<int>& peers) {
  std::map<int, std::unique_ptr<Channel>> channels;
  std::vector<Card> cards(ctx.nranks);
  cards[ctx.rank] = Card{available() ? 1 : 0, static_cast<int32_t>(peers.size())};
  ctx.bootstrap->allGather(cards.data(), sizeof(Card));
  bool anyone = false;
  for (const Card& c : cards) anyone = anyone || c.peers > 0;
  if (!anyone) return channels;

  const boot::RankInfo& self = ctx.peers.at(ctx.rank);
  phase(ctx, "checking that its ibverbs peers have RDMA ports", [&] {
    for (int p : peers)
      if (p == ctx.rank || !cards.at(p).hasPort)
        throwInvalidUsage(
            fmt::format("ibverbs: rank {} chose ibverbs for {}, which has no usable RDMA port; the "
                        "ranks see different devices or settings (HOCCL_IB_DISABLE, HOCCL_IB_HCA): "
                        "set HOCCL_IB_DISABLE=1 on every rank, or fix that host (`ibv_devinfo`)",
                        ctx.rank, describePeer(ctx.peers.at(p))));
  });

  const int64_t slots = params::IB_SLOTS.get();
  const int64_t slotBytes = (params::IB_SLOT_SIZE.get() + 4095) / 4096 * 4096;
  const bool ar = params::IB_ADAPTIVE_ROUTING.get() != 0;
  std::vector<uint8_t> table(static_cast<size_t>(ctx.nranks) * ctx.nranks * kConnInfoBytes, 0);
  std::map<int, std::unique_ptr<IbvChannel>> made;
  phase(ctx, "creating its ibverbs queue pairs", [&] {
    if (peers.empty()) return;
    // The GPU's nearest NIC, else the ranks of one host spread over the admitted ports (port_choice.h).
    int local = 0;
    for (int r = 0; r < ctx.rank; ++r) local += ctx.peers[r].hostHash == self.hostHash;
    const PortChoice choice = choosePort(probe_.ports, ctx.rdmaDevice, local);
    const PortInfo& port = probe_.ports[choice.index];
    auto dev = std::make_shared<IbvDevice>(lib_, port);
    for (int p : peers) {
      auto ch = std::make_unique<IbvChannel>(dev, self, ctx.peers.at(p), static_cast<uint32_t>(slots),
                                             static_cast<size_t>(slotBytes), ar);
      const ConnInfoWire w = encodeConnInfo(ch->localInfo());
      std::memcpy(table.data() + (static_cast<size_t>(ctx.rank) * ctx.nranks + p) * kConnInfoBytes, w.data(),
                  kConnInfoBytes);
      made[p] = std::move(ch);
    }
    HOCCL_INFO(kNet, "ibverbs: rank {} uses {} ({}, lid {}, gid index {}) for {} peer(s): {}", ctx.rank, port.name(),
               port.linkLayer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand", port.lid, port.gidIndex, peers.size(),
               choice.why);
  });
  ctx.bootstrap->allGather(table.data(), static_cast<size_t>(ctx.nranks) * kConnInfoBytes);

  phase(ctx, "connecting its ibverbs queue pairs", [&] {
    for (auto& [p, ch] : made) {
      const uint8_t* entry = table.data() + (static_cast<size_t>(p) * ctx.nranks + ctx.rank) * kConnInfoBytes;
      bool empty = true;
      for (size_t i = 0; i < kConnInfoBytes && empty; ++i) empty = entry[i] == 0;
      if (empty)
        throwInvalidUsage(
            fmt::format("ibverbs: rank {} chose ibverbs for {}, which chose another transport for it; "
                        "the ranks disagree on the transport (different HOCCL_IB_DISABLE, "
                        "HOCCL_SHM_DISABLE or host ids?)",
                        ctx.rank, describePeer(ctx.peers.at(p))));
      ch->connect(decodeConnInfo(entry, kConnInfoBytes, p, ctx.rank, describePeer(ctx.peers.at(p))));
    }
  });
  for (auto& [p, ch] : made) channels[p] = std::move(ch);
  return channels;
}

}  // namespace hoccl::transport::ibverbs
