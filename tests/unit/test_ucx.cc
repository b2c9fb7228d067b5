// The ucx transport for real, over UCX's tcp and its shared memory (UCX_TLS=tcp, UCX_TLS=sm): ranks as threads and as
// forked processes joined by a real bootstrap, random payloads checked byte for byte against a regenerated copy,
// direct and sink receives. Then a receive whose length differs from the message's (both lengths named, nothing
// written past the buffer), a killed peer (an error naming it, in bounded time), and the choice of transports per
// peer from HOCCL_NET (transports/registry.h). Built only when meson found UCX.
#include <sched.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "scoped_env.h"
#include "channel_exchange.h"
#include "rank_runner.h"
#include "base/boot/bootstrap.h"
#include "base/error.h"
#include "transports/registry.h"
#include "transports/ucx/ucx_transport.h"

using namespace hoccl;
using hoccl::test::allErrors;
using hoccl::test::drive;
using hoccl::test::firstError;
using hoccl::test::payload;
using hoccl::test::runProcesses;
using hoccl::test::runThreads;
using hoccl::test::ScopedEnv;
using namespace hoccl::transport;
using Clock = std::chrono::steady_clock;

namespace {

/// One rank's connected state.
struct RankState {
  std::unique_ptr<boot::Bootstrap> boot;
  std::unique_ptr<Transport> transport;
  std::map<int, std::unique_ptr<Channel>> channels;
  std::vector<Channel*> list() const {
    std::vector<Channel*> v;
    for (auto& [p, ch] : channels) v.push_back(ch.get());
    return v;
  }
};

RankState connectRank(const boot::UniqueId& id, int rank, int nranks) {
  boot::RankInfo self;
  self.rank = rank;
  self.pid = getpid();
  self.hostHash = 0x7e57;
  std::snprintf(self.hostname, sizeof(self.hostname), "testhost");
  RankState st;
  st.boot = std::make_unique<boot::Bootstrap>(id, rank, nranks, self);
  st.transport = std::make_unique<ucx::UcxTransport>();
  ConnectContext ctx;
  ctx.bootstrap = st.boot.get();
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = st.boot->ranks();
  ctx.jobTag = fmt::format("{:016x}", st.boot->commTag());
  std::vector<int> peers;
  for (int p = 0; p < nranks; ++p)
    if (p != rank) peers.push_back(p);
  st.channels = st.transport->connect(ctx, peers);
  return st;
}

/// Many messages in flight both ways, all posted before any progress: sizes from 0 to 16 MiB (UCX's eager and
/// rendezvous), direct and sink receives (sinks get one consecutive piece that is a multiple of the granule).
void exchange(const RankState& st, int rank, int count) {
  test::exchangeMany(
      st.channels, rank, count,
      [](int i, size_t granule, std::mt19937& gen) -> size_t {
        if (i == 0) return (16u << 20) / granule;  // the first message: 16 MiB (UCX's rendezvous)
        return gen() % 5 == 0 ? 0 : gen() % (i % 8 == 0 ? 300000 : 3000);
      },
      std::chrono::seconds(60));
}

/// A context for assignPeers: `hosts[r]` is rank r's host.
ConnectContext fakeContext(int rank, const std::vector<int>& hosts) {
  ConnectContext ctx;
  ctx.rank = rank;
  ctx.nranks = static_cast<int>(hosts.size());
  for (int r = 0; r < ctx.nranks; ++r) {
    boot::RankInfo info;
    info.rank = r;
    info.pid = 1000 + r;
    info.hostHash = 0x100 + hosts[r];
    std::snprintf(info.hostname, sizeof(info.hostname), "host%d", hosts[r]);
    ctx.peers.push_back(info);
  }
  return ctx;
}

std::vector<std::string> names(const std::vector<std::unique_ptr<Transport>>& list) {
  std::vector<std::string> v;
  for (auto& t : list) v.push_back(t->name());
  return v;
}

}  // namespace

TEST_CASE("ucx: HOCCL_NET chooses the network transport; shm keeps the peers of its host", "[ucx][registry]") {
  ScopedEnv noShm("HOCCL_SHM_DISABLE", "0");
  {
    ScopedEnv net("HOCCL_NET", "ucx");
    CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "ucx"});
    // Ranks 0 and 1 on host 0, rank 2 on host 1: shm for 1, ucx for 2.
    auto list = makeTransports();
    PeerPlan plan = assignPeers(list, fakeContext(0, {0, 0, 1}));
    CHECK(plan.transportOf == std::vector<std::string>{"self", "shm", "ucx"});
    CHECK(plan.peersOf == std::vector<std::vector<int>>{{1}, {2}});
  }
  {
    ScopedEnv net("HOCCL_NET", "UCX");  // NCCL_NET=UCX spelling: case does not matter
    ScopedEnv off("HOCCL_SHM_DISABLE", "1");
    auto list = makeTransports();
    CHECK(names(list) == std::vector<std::string>{"ucx"});
    PeerPlan plan = assignPeers(list, fakeContext(1, {0, 0, 1}));
    CHECK(plan.transportOf == std::vector<std::string>{"ucx", "self", "ucx"});
  }
  {
    ScopedEnv net("HOCCL_NET", "Socket");  // NCCL's name for its socket transport
    CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "tcp"});
  }
  {
    ScopedEnv net("HOCCL_NET", "tcp");
    CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "tcp"});
  }
#if HOCCL_HAVE_IBVERBS
  // Unset: ibverbs ahead of tcp (it steps aside by itself where no rank has an RDMA port, as here).
  CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "ibverbs", "tcp"});
  {
    ScopedEnv net("HOCCL_NET", "IB");  // NCCL's name for verbs
    CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "ibverbs"});
  }
#else
  CHECK(names(makeTransports()) == std::vector<std::string>{"shm", "tcp"});  // unset: tcp
#endif
  {
    ScopedEnv net("HOCCL_NET", "carrier-pigeon");
    try {
      makeTransports();
      FAIL("an unknown HOCCL_NET was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == hocclInvalidArgument);
      CHECK(std::string(e.what()).find("carrier-pigeon") != std::string::npos);
      CHECK(std::string(e.what()).find("tcp, ucx") != std::string::npos);
    }
  }
}

TEST_CASE("ucx between threads and processes: many messages up to 16 MiB, over tcp and sm", "[ucx]") {
  for (const char* tls : {"tcp", "sm"}) {
    ScopedEnv env("UCX_TLS", tls);
    DYNAMIC_SECTION("threads, UCX_TLS=" << tls) {
      auto id = boot::createUniqueId();
      auto errors = runThreads(3, [&](int r) {
        RankState st = connectRank(id, r, 3);
        exchange(st, r, 60);
        st.boot->barrier();
      });
      INFO(allErrors(errors));
      CHECK(firstError(errors).empty());
    }
    DYNAMIC_SECTION("processes, UCX_TLS=" << tls) {
      auto id = boot::createUniqueId();
      auto results = runProcesses(
          2,
          [&](int r) {
        RankState st = connectRank(id, r, 2);
        exchange(st, r, 60);
        st.boot->barrier();
        return std::string();
          },
          std::chrono::seconds(120));
      INFO(allErrors(results));
      CHECK(firstError(results).empty());
    }
  }
}

TEST_CASE("ucx: a receive that does not match the message's length is an error naming both", "[ucx]") {
  // Rank 0 sends `sent` bytes, rank 1 posts a receive of `posted` bytes (guard bytes after it): rank 1 fails with
  // hocclInvalidUsage naming both lengths; nothing is written beyond its buffer. Eager and rendezvous sizes.
  ScopedEnv env("UCX_TLS", "tcp");
  for (auto [sent, posted] :
       {std::pair<size_t, size_t>{200, 100}, {100, 200}, {3u << 20, 1u << 20}, {1u << 20, 3u << 20}}) {
    DYNAMIC_SECTION("sent " << sent << ", posted " << posted) {
      auto id = boot::createUniqueId();
      test::MismatchOutcome seen;
      auto errors = runThreads(2, [&](int r) {
        RankState st = connectRank(id, r, 2);
        test::MismatchOutcome mine = test::exchangeMismatched(*st.channels.at(1 - r), r, sent, posted);
        if (r == 1) seen = mine;
        st.boot->barrier();
      });
      INFO(firstError(errors));
      CHECK(firstError(errors).empty());
      INFO(seen.error);
      CHECK(seen.code == hocclInvalidUsage);
      CHECK(seen.error.find("mismatch") != std::string::npos);
      CHECK(seen.error.find(std::to_string(sent)) != std::string::npos);
      CHECK(seen.error.find(std::to_string(posted)) != std::string::npos);
      CHECK(seen.guardIntact);
    }
  }
}

TEST_CASE("ucx: a message of the right size tagged for another call is an error; untagged ones pass", "[ucx][tag]") {
  // As test_transports "[tag]": 8 bits of the call tag travel in the UCX tag (ucx_worker.h: makeTag). Equal tags, or
  // 0 on either side, deliver the bytes; tags whose 8 bits differ fail the receiver naming the peer. Eager and
  // rendezvous sizes, direct and sink receives.
  ScopedEnv env("UCX_TLS", "tcp");
  struct Tags {
    transport::CallTag send, recv;
    bool mismatch;
  };
  const Tags cases[] = {{0x1234abcd, 0x1234abcd, false}, {0x1234abcd, 0, false}, {0, 0x1234abcd, false},
                        {0x1234abcd, 0x1234abce, true}};
  for (const Tags& t : cases) {
    for (size_t bytes : {size_t{24}, size_t{3} << 20}) {
      for (bool sink : {false, true}) {
        DYNAMIC_SECTION("tags " << t.send << "/" << t.recv << ", " << bytes << " bytes" << (sink ? ", sink" : "")) {
          auto id = boot::createUniqueId();
          CHECK(test::taggedCase([&](int r) { return connectRank(id, r, 2); }, bytes, t.send, t.recv, sink,
                                 t.mismatch, "") == "");
        }
      }
    }
  }
}

TEST_CASE("ucx: a peer killed mid-transfer is a RemoteError naming it, within seconds", "[ucx][fork]") {
  // Rank 1 exits abruptly (no goodbye) while rank 0 waits for a large message from it. Only UCX can tell rank 0
  // (no communicator health here): its endpoint error must surface as hocclRemoteError naming rank 1, not a hang.
  ScopedEnv env("UCX_TLS", "tcp");
  auto id = boot::createUniqueId();
  auto results = runProcesses(
      2,
      [&](int r) -> std::string {
        RankState st = connectRank(id, r, 2);
        Channel& ch = *st.channels.at(1 - r);
        std::vector<unsigned char> buf(8u << 20);
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          _exit(0);
        }
        ch.postRecv(buf.size(), RecvTarget{buf.data(), {}, 1});
        auto t0 = Clock::now();
        try {
          drive({&ch}, std::chrono::seconds(30));
        } catch (const Error& e) {
          double s = std::chrono::duration<double>(Clock::now() - t0).count();
          std::string what = e.what();
          if (e.code() != hocclRemoteError) return "wrong code: " + what;
          if (what.find("rank 1 (host testhost, pid") == std::string::npos) return "does not name rank 1: " + what;
          if (s > 10) return fmt::format("took {:.1f} s: {}", s, what);
          return "";
        } catch (const std::exception& e) {
          return std::string("not a hoccl error: ") + e.what();
        }
        return "the receive completed although the peer died";
      },
      std::chrono::seconds(60));
  INFO(results[0]);
  CHECK(results[0].empty());
}
