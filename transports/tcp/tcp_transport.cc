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
//
// Lazy connections (HOCCL_CONNECT=lazy) split this: steps 1-2 at init (prepare, a 48-byte card per rank), steps 3-4
// when a call first needs a set of peers (connectPeers, not collective: those peers make the same call). The same
// induction holds within a call, and a rank still busy with an earlier call answers late, not never; and the accepts
// of step 4 run in a thread of their own while step 3 connects, so no rank waits for a chain of others' connects (the
// eager order costs a chain as long as the job: seconds at 64 ranks on 2 cores). Differences:
//   - the listener and its acceptor live as long as the communicator; a valid connection from a peer that reached a
//     later call first is kept (early_) for the call that needs it;
//   - the listener exists since init, so a refused connection means the peer's process is gone: it fails at once,
//     naming the peer; while accepting, a peer on this host whose process exited, or the communicator's recorded
//     failure (the bootstrap's verdict), ends the wait too.
#include "transports/tcp/tcp_transport.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <exception>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "base/boot/handshake.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "transports/tcp/tcp_channel.h"
#include "topology/host_hw.h"
#include "transports/transport_util.h"

namespace hoccl::transport::tcp {
namespace {

constexpr const char* kSameJobAdvice =
    "Every rank must come from the same job (the same unique id / HOCCL_AUTH_TOKEN); the address may now belong to "
    "another process (a stale or restarted rank?)";

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

// Whether the process of `peer` (on this host) is known to be gone.
bool processGone(const boot::RankInfo& self, const boot::RankInfo& peer) {
  if (peer.hostHash != self.hostHash || peer.pid == self.pid || peer.pid <= 0) return false;
  return ::kill(peer.pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

std::string chooseInterface(const ConnectContext& ctx, const topo::HostHardware& host, std::string* why) {
  if (!ctx.nic.empty()) {
    if (why) *why = "the nearest NIC of this rank's GPU";
    return ctx.nic;
  }
  if (why) *why = fmt::format("the NIC nearest to NUMA node {}", host.currentNuma);
  return host.nearestNic(host.currentNuma);
}

namespace {

// The address this rank listens on: on chooseInterface's interface when it is up, else net::localAddress's choice.
net::Address listenAddress(const ConnectContext& ctx) {
  std::string why;
  const std::string nic = chooseInterface(ctx, topo::thisHost(), &why);
  const net::Address addr = net::localAddress(nic);
  HOCCL_INFO(kNet, "tcp: rank {} listens on {} (preferred interface: {}, {})", ctx.rank, addr.toString(),
             nic.empty() ? "none" : nic, why);
  return addr;
}

}  // namespace

void TcpTransport::prepare(const ConnectContext& ctx, const std::vector<int>& peers) {
  lazyPeers_ = std::set<int>(peers.begin(), peers.end());
  cards_.assign(static_cast<size_t>(ctx.nranks), LazyCard{});
  LazyCard& me = cards_[static_cast<size_t>(ctx.rank)];
  me.stripeBytes = stripeBytes_;
  me.conns = conns_;
  if (!lazyPeers_.empty() && *lazyPeers_.rbegin() > ctx.rank) {
    net::Address addr;
    listener_ = net::listenOn(listenAddress(ctx), &addr);
    if (addr.length > sizeof(me.addr))
      throwInternalError(
          fmt::format("tcp: rank {}: listener address {} does not fit a card", ctx.rank, addr.toString()));
    me.addrLen = static_cast<uint32_t>(addr.length);
    std::memcpy(me.addr, &addr.storage, addr.length);
    acceptor_ = std::make_unique<boot::Acceptor>(listener_.get(), ctx.bootstrap->secret(), ctx.rank,
                                                 fmt::format("tcp: rank {}", ctx.rank));
    if (onListening) onListening(addr);
  }
  ctx.bootstrap->allGather(cards_.data(), sizeof(LazyCard));
}

std::map<int, std::unique_ptr<Channel>> TcpTransport::connectPeers(const ConnectContext& ctx,
                                                                   const std::vector<int>& peers) {
  const net::Deadline deadline = net::defaultDeadline();
  const boot::RankInfo& self = ctx.peers.at(ctx.rank);
  const uint64_t tag = ctx.bootstrap->commTag();
  auto connsWith = [&](int p) { return std::min(conns_, cards_.at(static_cast<size_t>(p)).conns); };
  // Every peer's entry exists before the accepting thread starts: from then on the map's shape never changes.
  std::map<int, std::vector<net::Fd>> sockets;
  size_t missing = 0;
  for (int p : peers) {
    if (!lazyPeers_.count(p))
      throwInternalError(
          fmt::format("tcp: rank {} asked to connect to rank {}, which is not one of its tcp peers", ctx.rank, p));
    auto& socks = sockets[p];
    if (p < ctx.rank) continue;
    socks.resize(static_cast<size_t>(connsWith(p)));  // accepted; connections that came early are taken now
    auto e = early_.find(p);
    if (e != early_.end()) {
      for (size_t i = 0; i < e->second.size() && i < socks.size(); ++i) socks[i] = std::move(e->second[i]);
      early_.erase(e);
    }
    for (auto& fd : socks) missing += !fd;
  }

  // Accepts from the peers above this rank (in a thread of its own while this one connects to the peers below, so
  // that no rank's connects wait for another rank's connects to finish); keeps connections meant for a later call.
  std::atomic<bool> stop{false};
  auto acceptAll = [&] {
    while (missing > 0 && !stop.load()) {
      if (ctx.health) ctx.health->check(fmt::format("tcp: rank {}", ctx.rank), "connecting to its peers");
      if (auto v = ctx.bootstrap->verdict())
        throwRemoteError(fmt::format("tcp: rank {} stopped connecting to its peers: {}", ctx.rank, v->text));
      std::optional<boot::Acceptor::Peer> got = acceptor_->next(
          std::min(deadline, net::Clock::now() + std::chrono::milliseconds(100)));
      if (!got) {
        std::string who;
        for (auto& [p, socks] : sockets) {
          if (p < ctx.rank) continue;
          for (size_t i = 0; i < socks.size(); ++i) {
            if (socks[i]) continue;
            if (processGone(self, ctx.peers.at(p)))
              throwRemoteError(fmt::format("tcp: rank {} waited for a connection from {}, whose process has exited",
                                           ctx.rank, describePeer(ctx.peers.at(p))));
            who += fmt::format(" {}#{}", describePeer(ctx.peers.at(p)), i);
          }
        }
        if (net::Clock::now() >= deadline)
          throwTimeout(silentPeerMessage(fmt::format("tcp: rank {}", ctx.rank),
                                         "accepting connections from its peers (lazily, HOCCL_CONNECT=lazy)",
                                         params::TIMEOUT.get(), who.substr(1)));
        continue;
      }
      const boot::Hello& hello = got->hello;
      const int p = hello.rank;
      const bool valid = hello.tag == tag && p > ctx.rank && lazyPeers_.count(p) && hello.index >= 0 &&
                         hello.index < connsWith(p);
      const auto now = valid ? sockets.find(p) : sockets.end();
      std::vector<net::Fd>* slot = nullptr;
      if (valid) {
        slot = now != sockets.end() ? &now->second : &early_[p];
        if (slot->size() < static_cast<size_t>(connsWith(p))) slot->resize(static_cast<size_t>(connsWith(p)));
      }
      if (!slot || (*slot)[static_cast<size_t>(hello.index)]) {
        boot::noteRejected(fmt::format("tcp: rank {}", ctx.rank), got->from,
                           fmt::format("it proved the job secret but claims rank {} connection {} with tag {:#x} "
                                       "(expected tag {:#x}); a stale or misconfigured process of this job?",
                                       hello.rank, hello.index, hello.tag, tag));
        continue;
      }
      (*slot)[static_cast<size_t>(hello.index)] = std::move(got->fd);
      if (now != sockets.end()) --missing;
    }
  };
  std::exception_ptr acceptError;
  std::thread accepting;
  if (missing > 0)
    accepting = std::thread([&] {
      try {
        acceptAll();
      } catch (...) {
        acceptError = std::current_exception();
      }
    });
  std::exception_ptr connectError;
  try {
    for (int p : peers) {
      if (p > ctx.rank) continue;
      const LazyCard& card = cards_.at(static_cast<size_t>(p));
      if (card.addrLen == 0)
        throwInternalError(
            fmt::format("tcp: rank {} wants a tcp channel to rank {}, which does not expect one; the "
                        "ranks disagree on the transport (different HOCCL_SHM_DISABLE, HOCCL_CONNECT "
                        "or host ids?)",
                        ctx.rank, p));
      net::Address addr;
      std::memcpy(&addr.storage, card.addr, card.addrLen);
      addr.length = static_cast<socklen_t>(card.addrLen);
      const std::string what = fmt::format("tcp: rank {} connecting to {} at {}", ctx.rank,
                                           describePeer(ctx.peers.at(p)), addr.toString());
      std::vector<net::Fd>& socks = sockets.find(p)->second;
      auto open = [&] {
        try {  // the peer has listened since init: a refusal that lasts a second means its process is gone
          return net::connectUntil(addr, std::min(deadline, net::Clock::now() + std::chrono::seconds(1)), what);
        } catch (const Error& e) {
          // Refused until the second passed: the peer is gone. Anything else failed here (no descriptor left, no
          // route): this rank's problem, said as such.
          if (e.code() != hocclTimeout)
            throw Error(e.code(), fmt::format("{}: this rank could not open the connection: {}. If the open-files "
                                              "limit is the cause, raise it (ulimit -n; this process holds {} "
                                              "connection(s) per connected peer)",
                                              what, e.what(), connsWith(p)));
          throwRemoteError(
              fmt::format("{}: {} is gone (its listener refuses connections: the process exited or "
                          "was killed) [{}]",
                          what, describePeer(ctx.peers.at(p)), e.what()));
        }
      };
      for (int i = 0; i < connsWith(p); ++i)
        socks.push_back(boot::connectAuthenticated(open, ctx.bootstrap->secret(), boot::Hello{tag, ctx.rank, p, i},
                                                   deadline, what, kSameJobAdvice));
    }
  } catch (...) {
    connectError = std::current_exception();
    stop = true;
  }
  if (accepting.joinable()) accepting.join();
  if (connectError) std::rethrow_exception(connectError);
  if (acceptError) std::rethrow_exception(acceptError);

  std::map<int, std::unique_ptr<Channel>> channels;
  for (auto& [p, socks] : sockets) {
    for (auto& fd : socks) net::tuneTcp(fd.get());
    size_t stripe = std::min<uint64_t>(stripeBytes_, cards_[static_cast<size_t>(p)].stripeBytes);
    channels[p] = std::make_unique<TcpChannel>(self, ctx.peers.at(p), std::move(socks), stripe);
  }
  HOCCL_INFO(kNet, "tcp: rank {} connected lazily to {} more peer(s)", ctx.rank, channels.size());
  return channels;
}

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
    listener = net::listenOn(listenAddress(ctx), &me.addr);
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
    for (int i = 0; i < n; ++i)
      sockets[p].push_back(boot::connectAuthenticated([&] { return net::connectUntil(card.addr, deadline, what); },
                                                      ctx.bootstrap->secret(),
                                                      boot::Hello{ctx.bootstrap->commTag(), ctx.rank, p, i}, deadline,
                                                      what, kSameJobAdvice));
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
