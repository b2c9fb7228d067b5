// The tcp transport: address exchange and connection setup.
//
// Connect protocol (collective over the communicator; every rank runs it, even with no tcp peer):
//   1. a rank with a tcp peer above it listens on its local address (net::localAddress, HOCCL_SOCKET_IFNAME);
//   2. all ranks all-gather a card {listening, connections, stripe size, address};
//   3. for every tcp peer below it, a rank opens min(its, peer's) connections, each starting with the handshake
//      (base/boot/handshake.h: both sides prove the job secret; the hello names the communicator tag, own rank, the
//      peer's rank and the connection index);
//   4. it then accepts until every connection expected from the peers above it has arrived, running the handshakes
//      of all accepted connections at once. A connection that fails the handshake (wrong secret, garbage, silence
//      for 2 s), carries another communicator's tag, claims a rank that is not an expected peer, or repeats an index
//      is closed and logged (rate-limited); the wait goes on.
// Step 3 waits for the peer's answer to the handshake, so for step 4 of that lower peer. That is no cycle: the
// lowest rank has nothing to connect to and goes straight to step 4, and by induction every rank reaches its accept
// loop once the ranks below it have.
#include "transports/tcp/tcp_transport.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "base/boot/handshake.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "transports/tcp/tcp_channel.h"
#include "topology/host_hw.h"
#include "transports/transport_util.h"

namespace hoccl::transport::tcp {
namespace {

/// What each rank publishes about its listener.
struct Card {
  int32_t listening = 0;
  int32_t conns = 0;
  uint64_t stripeBytes = 0;
  net::Address addr;
};

/// Accepts the connections expected from higher peers; returns them by peer, indexed by connection.
std::map<int, std::vector<net::Fd>> acceptAll(const ConnectContext& ctx, int listenFd, std::map<int, int> expected,
                                              net::Deadline deadline) {
  std::map<int, std::vector<net::Fd>> got;
  size_t missing = 0;
  for (auto& [p, n] : expected) {
    got[p].resize(n);
    missing += n;
  }
  const uint64_t tag = ctx.bootstrap->commTag();
  boot::Acceptor acceptor(listenFd, ctx.bootstrap->secret(), ctx.rank, fmt::format("tcp: rank {}", ctx.rank));
  while (missing > 0) {
    std::optional<boot::Acceptor::Peer> peer = acceptor.next(deadline);
    if (!peer) {
      std::string who;
      for (auto& [p, socks] : got)
        for (size_t i = 0; i < socks.size(); ++i)
          if (!socks[i]) who += fmt::format(" {}#{}", describePeer(ctx.peers.at(p)), i);
      throwTimeout(
          fmt::format("tcp: rank {} timed out waiting for connections from:{}. Those ranks may have failed during "
                      "init, or cannot reach this host (firewall, HOCCL_SOCKET_IFNAME); raise HOCCL_TIMEOUT if they "
                      "are only slow",
                      ctx.rank, who));
    }
    const boot::Hello& hello = peer->hello;
    auto it = got.find(hello.rank);
    bool ok = hello.tag == tag && it != got.end() && hello.index >= 0 &&
              static_cast<size_t>(hello.index) < it->second.size() && !it->second[hello.index];
    if (!ok) {
      boot::noteRejected(fmt::format("tcp: rank {}", ctx.rank), peer->from,
                         fmt::format("it proved the job secret but claims rank {} connection {} with tag {:#x} "
                                     "(expected tag {:#x}); a stale or misconfigured process of this job?",
                                     hello.rank, hello.index, hello.tag, tag));
      continue;
    }
    net::Fd& fd = peer->fd;
    it->second[hello.index] = std::move(fd);
    --missing;
  }
  return got;
}

}  // namespace

TcpTransport::TcpTransport() {
  conns_ = static_cast<int>(params::TCP_CONNS.get());
  const int64_t stripe = params::TCP_STRIPE_SIZE.get();
  stripeBytes_ = static_cast<size_t>((stripe + 4095) / 4096 * 4096);
}

std::map<int, std::unique_ptr<Channel>> TcpTransport::connect(const ConnectContext& ctx,
                                                              const std::vector<int>& peers) {
  std::set<int> peerSet(peers.begin(), peers.end());
  net::Fd listener;
  std::vector<Card> cards(ctx.nranks);
  Card& me = cards[ctx.rank];
  me.conns = conns_;
  me.stripeBytes = stripeBytes_;
  if (!peerSet.empty() && *peerSet.rbegin() > ctx.rank) {
    listener = net::listenOn(net::localAddress(topo::thisHost().nearestNic(topo::thisHost().currentNuma)), &me.addr);
    me.listening = 1;
    if (onListening) onListening(me.addr);
  }
  ctx.bootstrap->allGather(cards.data(), sizeof(Card));

  const net::Deadline deadline = net::defaultDeadline();
  const boot::RankInfo& self = ctx.peers.at(ctx.rank);
  std::map<int, std::vector<net::Fd>> sockets;
  std::map<int, int> expected;
  for (int p : peerSet) {
    const Card& card = cards.at(p);
    int n = std::min(conns_, card.conns);
    if (p > ctx.rank) {
      expected[p] = n;
      continue;
    }
    if (!card.listening)
      throwInternalError(
          fmt::format("tcp: rank {} wants a tcp channel to rank {}, which does not expect one; the "
                      "ranks disagree on the transport (different HOCCL_SHM_DISABLE or host ids?)",
                      ctx.rank, p));
    std::string what = fmt::format("tcp: rank {} connecting to {} at {}", ctx.rank, describePeer(ctx.peers.at(p)),
                                   card.addr.toString());
    for (int i = 0; i < n; ++i) {
      net::Fd fd = net::connectUntil(card.addr, deadline, what);
      boot::authenticate(fd.get(), ctx.bootstrap->secret(), boot::Hello{ctx.bootstrap->commTag(), ctx.rank, p, i},
                         deadline, what,
                         "Every rank must come from the same job (the same unique id / HOCCL_AUTH_TOKEN); the "
                         "address may now belong to another process (a stale or restarted rank?)");
      sockets[p].push_back(std::move(fd));
    }
  }
  if (!expected.empty()) {
    auto accepted = acceptAll(ctx, listener.get(), expected, deadline);
    for (auto& [p, socks] : accepted) sockets[p] = std::move(socks);
  }

  std::map<int, std::unique_ptr<Channel>> channels;
  for (auto& [p, socks] : sockets) {
    for (auto& fd : socks) net::tuneTcp(fd.get());
    size_t stripe = std::min<uint64_t>(stripeBytes_, cards[p].stripeBytes);
    channels[p] = std::make_unique<TcpChannel>(self, ctx.peers.at(p), std::move(socks), stripe);
  }
  HOCCL_INFO(kNet, "tcp: rank {} connected to {} peer(s), {} connection(s) each", ctx.rank, channels.size(), conns_);
  return channels;
}

}  // namespace hoccl::transport::tcp
