// The shm and tcp transports, for real: ranks as threads of this process and as forked processes, connected through
// a real bootstrap (the root served by this process), moving random payloads that are checked byte for byte
// against a regenerated copy. Failure cases: a peer process killed mid-transfer, and stray connections to the tcp
// listener without the job secret.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "scoped_env.h"
#include "channel_exchange.h"
#include "rank_runner.h"
#include "base/boot/bootstrap.h"
#include "base/boot/handshake.h"
#include "base/error.h"
#include "base/socket.h"
#include "transports/registry.h"
#include "transports/shm/shm_channel.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

using namespace hoccl;
using hoccl::test::drive;
using hoccl::test::firstError;
using hoccl::test::payload;
using hoccl::test::runProcesses;
using hoccl::test::runThreads;
using hoccl::test::ScopedEnv;
using namespace hoccl::transport;
using Clock = std::chrono::steady_clock;

namespace {

enum class Kind { Shm, Tcp };

const char* kindName(Kind k) { return k == Kind::Shm ? "shm" : "tcp"; }

/// One rank's connected state.
struct RankState {
  std::unique_ptr<boot::Bootstrap> boot;
  std::unique_ptr<Transport> transport;
  std::string jobTag;
  std::map<int, std::unique_ptr<Channel>> channels;
  std::vector<Channel*> list() const {
    std::vector<Channel*> v;
    for (auto& [p, ch] : channels) v.push_back(ch.get());
    return v;
  }
};

/// Joins the bootstrap of `id` as `rank` and connects `kind` to every other rank.
RankState connectRank(const boot::UniqueId& id, int rank, int nranks, Kind kind,
                      std::function<void(const net::Address&)> onListening = {}) {
  boot::RankInfo self;
  self.rank = rank;
  self.pid = getpid();
  self.hostHash = 0x7e57;
  std::snprintf(self.hostname, sizeof(self.hostname), "testhost");
  RankState st;
  st.boot = std::make_unique<boot::Bootstrap>(id, rank, nranks, self);
  if (kind == Kind::Shm) {
    st.transport = std::make_unique<shm::ShmTransport>();
  } else {
    auto tcp = std::make_unique<tcp::TcpTransport>();
    tcp->onListening = std::move(onListening);
    st.transport = std::move(tcp);
  }
  ConnectContext ctx;
  ctx.bootstrap = st.boot.get();
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = st.boot->ranks();
  st.jobTag = fmt::format("{:016x}-{}", st.boot->commTag(), ctx.peers[0].pid);
  ctx.jobTag = st.jobTag;
  std::vector<int> peers;
  for (int p = 0; p < nranks; ++p)
    if (p != rank) peers.push_back(p);
  st.channels = st.transport->connect(ctx, peers);
  return st;
}

/// A transport under test.
struct Mode {
  Kind kind;
  const char* label;
};
const Mode kModes[] = {{Kind::Shm, "shm"}, {Kind::Tcp, "tcp"}};

const std::vector<size_t> kSizes = {0, 1, 7, 4096, (1u << 20) + 3, 64u << 20};

/// Every rank sends one message of each size to every other rank (both directions at once) and checks what it
/// receives; receives alternate between a direct buffer and a sink.
void exchangeSizes(const RankState& st, int rank) {
  for (size_t si = 0; si < kSizes.size(); ++si) {
    size_t bytes = kSizes[si];
    std::map<int, std::vector<unsigned char>> out, in;
    std::map<int, size_t> sunk;
    for (auto& [p, ch] : st.channels) {
      out[p] = payload(rank, p, si, bytes);
      in[p].assign(bytes, 0);
      if ((si + p) % 2 == 0) {
        ch->postRecv(bytes, RecvTarget{in[p].data(), {}, 1});
      } else {
        unsigned char* dst = in[p].data();
        size_t* got = &sunk[p];
        RecvTarget t;
        t.granule = 1;
        t.sink = [dst, got](const void* data, size_t offset, size_t len) {
          if (offset != *got) throw std::runtime_error(fmt::format("sink offset {} != {}", offset, *got));
          std::memcpy(dst + offset, data, len);
          *got += len;
        };
        ch->postRecv(bytes, std::move(t));
      }
      ch->postSend(out[p].data(), bytes);
    }
    drive(st.list());
    for (auto& [p, ch] : st.channels) {
      auto expect = payload(p, rank, si, bytes);
      if (expect != in[p]) throw std::runtime_error(fmt::format("{} bytes from rank {} arrived corrupted", bytes, p));
    }
  }
}

/// Many messages in flight in both directions: random sizes (multiples of a random granule, some zero), random mix
/// of direct and sink receives, all posted before any progress.
void exchangeMany(const RankState& st, int rank, int count) {
  test::exchangeMany(
      st.channels, rank, count,
      [](int i, size_t, std::mt19937& gen) -> size_t {
        return gen() % 5 == 0 ? 0 : gen() % (i % 10 == 0 ? 600000 : 3000);
      },
      std::chrono::seconds(30));
}

/// Names in /dev/shm that belong to this job.
int leftoverSegments(const std::string& jobTag) {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().find(jobTag) != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("registry: shm first unless HOCCL_SHM_DISABLE=1, tcp always last", "[transports]") {
  unsetenv("HOCCL_SHM_DISABLE");
  auto all = makeTransports();
  REQUIRE(all.size() >= 2);
  CHECK(std::string(all.front()->name()) == "shm");
  CHECK(std::string(all.back()->name()) == "tcp");
  setenv("HOCCL_SHM_DISABLE", "1", 1);
  auto noShm = makeTransports();
  REQUIRE(noShm.size() == all.size() - 1);
  CHECK(std::string(noShm.back()->name()) == "tcp");
  setenv("HOCCL_SHM_DISABLE", "yes", 1);
  CHECK_THROWS_AS(makeTransports(), Error);
  unsetenv("HOCCL_SHM_DISABLE");
  setenv("HOCCL_TCP_CONNS", "0", 1);
  CHECK_THROWS_AS(tcp::TcpTransport(), Error);
  unsetenv("HOCCL_TCP_CONNS");
}

namespace {

/// A transport that only answers the registry's questions (never connects): `name` and whether it runs here.
class ListedTransport final : public Transport {
 public:
  ListedTransport(const char* name, bool here) : name_(name), here_(here) {}
  const char* name() const override { return name_; }
  bool canConnect(const ConnectContext& ctx, int peer) const override { return here_ && peer != ctx.rank; }
  bool availableHere() const override { return here_; }
  std::map<int, std::unique_ptr<Channel>> connect(const ConnectContext&, const std::vector<int>&) override {
    throw std::logic_error("ListedTransport cannot connect");
  }

 private:
  const char* name_;
  bool here_;
};

}  // namespace

TEST_CASE("registry: both ranks of a pair choose the same transport when one lacks it", "[transports]") {
  // 3 ranks over a real bootstrap. ucx runs on ranks 0 and 2 only (rank 1: stepped aside, as ibverbs does without
  // an RDMA port); every list ends with tcp. Each pair must agree: 0-2 over ucx, every pair with rank 1 over tcp.
  // Then rank 1 leaves ucx out of its list altogether (as when its HOCCL_NET differs): the same plan.
  for (bool listedOnRank1 : {true, false}) {
    DYNAMIC_SECTION("ucx " << (listedOnRank1 ? "stepped aside on" : "not listed by") << " rank 1") {
      auto id = boot::createUniqueId();
      std::vector<std::vector<std::string>> seen(3);
      auto errors = runThreads(3, [&](int r) {
        boot::RankInfo self;
        self.rank = r;
        self.pid = getpid();
        std::snprintf(self.hostname, sizeof(self.hostname), "testhost");
        boot::Bootstrap boot(id, r, 3, self);
        std::vector<std::unique_ptr<Transport>> list;
        if (r != 1 || listedOnRank1) list.push_back(std::make_unique<ListedTransport>("ucx", r != 1));
        list.push_back(std::make_unique<ListedTransport>("tcp", true));
        ConnectContext ctx;
        ctx.bootstrap = &boot;
        ctx.rank = r;
        ctx.nranks = 3;
        ctx.peers = boot.ranks();
        seen[r] = assignPeers(list, ctx).transportOf;
        boot.barrier();
      });
      INFO(test::allErrors(errors));
      REQUIRE(firstError(errors).empty());
      CHECK(seen[0] == std::vector<std::string>{"self", "tcp", "ucx"});
      CHECK(seen[1] == std::vector<std::string>{"tcp", "self", "tcp"});
      CHECK(seen[2] == std::vector<std::string>{"ucx", "tcp", "self"});
    }
  }
}

TEST_CASE("shm segment names are per job and never reuse a live name", "[transports][shm]") {
  CHECK(shm::ShmTransport::segmentName("abc", 1, 2) != shm::ShmTransport::segmentName("abc", 2, 1));
  CHECK(shm::ShmTransport::segmentName("a/b", 0, 1).find('/', 1) == std::string::npos);
  // A pair connected again after HOCCL_MAX_CONNS closed it uses new names (the old files may still be held).
  CHECK(shm::ShmTransport::segmentName("abc", 1, 2, 1) != shm::ShmTransport::segmentName("abc", 1, 2));
  CHECK(shm::ShmTransport::segmentName("abc", 1, 2, 1) != shm::ShmTransport::segmentName("abc", 1, 2, 2));
  CHECK(shm::ShmTransport::segmentName("abc", 1, 21) != shm::ShmTransport::segmentName("abc", 1, 2, 1));
  auto seg = shm::Segment::create("/hoccl-unit-test-dup", 4096, 2, 0, 1);
  CHECK_THROWS_AS(shm::Segment::create("/hoccl-unit-test-dup", 4096, 2, 0, 1), Error);
  CHECK_THROWS_AS(shm::Segment::open("/hoccl-unit-test-dup", getpid(), 1, 0), Error);  // wrong direction
  {
    auto mapped = shm::Segment::open("/hoccl-unit-test-dup", getpid(), 0, 1);  // what a peer sees
    CHECK(mapped->header()->slots == 2);
    seg->header()->head.store(7);
    CHECK(mapped->header()->head.load() == 7);  // the same memory
  }
  CHECK(leftoverSegments("hoccl-unit-test-dup") == 0);  // never named in /dev/shm
  seg->unlink();
  CHECK_THROWS_AS(shm::Segment::open("/hoccl-unit-test-dup", getpid(), 0, 1), Error);  // its creator let go
}

TEST_CASE("transports between threads: sizes 0..64 MiB, both directions", "[transports]") {
  for (const Mode& mode : kModes) {
    DYNAMIC_SECTION(mode.label) {
      Kind kind = mode.kind;
      auto id = boot::createUniqueId();
      std::string jobTag;
      auto errors = runThreads(2, [&](int r) {
        RankState st = connectRank(id, r, 2, kind);
        if (r == 0) jobTag = st.jobTag;
        st.boot->barrier();
        if (kind == Kind::Shm && leftoverSegments(st.jobTag) != 0)
          throw std::runtime_error("segments left in /dev/shm after connect");
        exchangeSizes(st, r);
      });
      INFO(firstError(errors));
      CHECK(firstError(errors).empty());
    }
  }
}

TEST_CASE("transports between threads: many messages in flight, sinks get granule pieces", "[transports]") {
  for (Kind kind : {Kind::Shm, Kind::Tcp}) {
    DYNAMIC_SECTION(kindName(kind)) {
      auto id = boot::createUniqueId();
      auto errors = runThreads(3, [&](int r) {
        RankState st = connectRank(id, r, 3, kind);
        exchangeMany(st, r, 300);
      });
      INFO(firstError(errors));
      CHECK(firstError(errors).empty());
    }
  }
  SECTION("small rings and stripes: shm 2 slots of 4 KiB, tcp 3 connections with 4 KiB stripes") {
    ScopedEnv a("HOCCL_SHM_SLOTS", "2"), b("HOCCL_SHM_SLOT_SIZE", "4096");
    ScopedEnv c("HOCCL_TCP_CONNS", "3"), d("HOCCL_TCP_STRIPE_SIZE", "4096");
    for (Kind kind : {Kind::Shm, Kind::Tcp}) {
      auto id = boot::createUniqueId();
      auto errors = runThreads(2, [&](int r) {
        RankState st = connectRank(id, r, 2, kind);
        exchangeMany(st, r, 200);
      });
      INFO(kindName(kind) << ": " << firstError(errors));
      CHECK(firstError(errors).empty());
    }
  }
}

TEST_CASE("transports between processes: sizes, then many messages among 8 ranks", "[transports][fork]") {
  for (const Mode& mode : kModes) {
    Kind kind = mode.kind;
    DYNAMIC_SECTION(mode.label << " sizes") {
      auto id = boot::createUniqueId();
      auto results = runProcesses(2, [&](int r) {
        RankState st = connectRank(id, r, 2, kind);
        exchangeSizes(st, r);
        st.boot->barrier();  // keep the channels open until the peer is done too
        return std::string();
      });
      INFO(firstError(results));
      CHECK(firstError(results).empty());
    }
    DYNAMIC_SECTION(mode.label << " many, 8 ranks on 2 cores") {
      auto id = boot::createUniqueId();
      auto results = runProcesses(8, [&](int r) {
        RankState st = connectRank(id, r, 8, kind);
        exchangeMany(st, r, 40);
        st.boot->barrier();
        return std::string();
      });
      INFO(firstError(results));
      CHECK(firstError(results).empty());
    }
  }
}

TEST_CASE("a peer process killed mid-transfer is reported, naming it, within seconds", "[transports][fork]") {
  for (const Mode& mode : kModes) {
    Kind kind = mode.kind;
    DYNAMIC_SECTION(mode.label) {
      auto id = boot::createUniqueId();
      // Rank 1 receives a few 1 MiB messages of an endless stream, notes the time and dies by SIGKILL. Rank 0 keeps
      // sending and also waits for a message from rank 1 that never comes; it must fail with a RemoteError.
      // Nobody reaps rank 1 before rank 0 is done, so the shm check must see through the zombie.
      auto start = Clock::now();
      auto results = runProcesses(2, [&](int r) -> std::string {
        RankState st = connectRank(id, r, 2, kind);
        Channel& ch = *st.channels.at(1 - r);
        std::vector<unsigned char> buf(1 << 20, 7);
        if (r == 1) {
          for (int i = 0; i < 5; ++i) {
            ch.postRecv(buf.size(), RecvTarget{buf.data(), {}, 1});
            drive({&ch});
          }
          raise(SIGKILL);
        }
        std::vector<unsigned char> never(1 << 20);
        ch.postRecv(never.size(), RecvTarget{never.data(), {}, 1});
        std::string seen;
        try {
          for (int i = 0; i < 100000; ++i) {
            ch.postSend(buf.data(), buf.size());
            auto limit = Clock::now() + std::chrono::seconds(20);
            while (ch.pending() > 1) {  // the receive that never completes stays pending
              if (!ch.progress()) ch.waitForActivity(500);
              if (Clock::now() > limit) return "sending to a dead peer hung for 20 s without an error";
            }
          }
          return "the stream to a dead peer never failed";
        } catch (const Error& e) {
          seen = e.what();
          if (e.code() != hocclRemoteError) return fmt::format("wrong error code {}: {}", e.code(), e.what());
          std::string what = e.what();
          if (what.find("rank 1") == std::string::npos || what.find("testhost") == std::string::npos)
            return "error does not name the peer: " + what;
        }
        if (getenv("HOCCL_TEST_SHOW_ERRORS")) fprintf(stderr, "rank 0 saw: %s\n", seen.c_str());
        return std::string();
      });
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      INFO(results[0]);
      CHECK(results[0].empty());
      CHECK(seconds < 10);
    }
  }
}

TEST_CASE("tcp: connections without the job secret are dropped, real ones still work", "[transports][tcp]") {
  // Strays reach rank 0's listener before the real peer: garbage, a hello that never proves anything, an idle
  // socket. The listener handshakes with all of them at once (base/boot/handshake.h), so rank 1 still connects at
  // once; each stray gets at most the listener's challenge (80 bytes), then the connection closes.
  auto id = boot::createUniqueId();
  std::vector<int> strays;
  auto deadline = [] { return Clock::now() + std::chrono::seconds(5); };
  const uint64_t rejectedBefore = boot::rejectedConnections();
  double seconds = 0;  // rank 1's connect
  auto errors = runThreads(2, [&](int r) {
    auto hook = [&](const net::Address& addr) {
      net::Fd garbage = net::connectUntil(addr, deadline(), "stray: garbage");
      std::vector<char> junk(256, 'x');
      net::writeAll(garbage.get(), junk.data(), junk.size(), deadline(), "stray: garbage");
      net::Fd helloOnly = net::connectUntil(addr, deadline(), "stray: hello only");
      boot::sendHelloOnly(helloOnly.get(), boot::Hello{id.nonce, 1, 0, 0}, deadline());
      net::Fd idle = net::connectUntil(addr, deadline(), "stray: idle");
      for (net::Fd* f : {&garbage, &helloOnly, &idle}) strays.push_back(f->release());
    };
    auto start = Clock::now();
    RankState st = connectRank(id, r, 2, Kind::Tcp, r == 0 ? hook : std::function<void(const net::Address&)>());
    if (r == 1) seconds = std::chrono::duration<double>(Clock::now() - start).count();
    exchangeSizes(st, r);
  });
  INFO(firstError(errors));
  CHECK(firstError(errors).empty());
  CHECK(seconds < 1.9);  // less than one handshake deadline: no stray held up the real connection
  REQUIRE(strays.size() == 3);
  for (size_t i = 0; i < strays.size(); ++i) {
    // The listener has closed each stray (it gave up on them when its accept loop ended): EOF or a reset after at
    // most the challenge, within a second.
    size_t got = 0;
    ssize_t n = 1;
    char buf[256];
    while (n > 0) {
      pollfd pfd{strays[i], POLLIN, 0};
      if (poll(&pfd, 1, 1000) != 1) break;
      n = recv(strays[i], buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) got += static_cast<size_t>(n);
    }
    INFO("stray connection " << i << " got " << got << " bytes");
    CHECK(n <= 0);
    CHECK((got == 0 || got == 80));
    close(strays[i]);
  }
  CHECK(boot::rejectedConnections() >= rejectedBefore + 3);
}

TEST_CASE("streaming bandwidth between two processes (64 MiB messages)", "[.bench]") {
  for (const Mode& mode : kModes) DYNAMIC_SECTION(mode.label) {
      Kind kind = mode.kind;
      auto id = boot::createUniqueId();
      const size_t bytes = 64u << 20;
      const int iters = 20;
      auto results = runProcesses(
          2,
          [&](int r) -> std::string {
            RankState st = connectRank(id, r, 2, kind);
            Channel& ch = *st.channels.at(1 - r);
            std::vector<unsigned char> buf(bytes, static_cast<unsigned char>(r));
            std::vector<double> sum(bytes / sizeof(double), 0.0);
            auto once = [&](bool sink) {
              if (r == 0) {
                ch.postSend(buf.data(), bytes);
              } else if (!sink) {
                ch.postRecv(bytes, RecvTarget{buf.data(), {}, 1});
              } else {
                RecvTarget t;
                t.granule = 8;
                double* acc = sum.data();
                t.sink = [acc](const void* data, size_t offset, size_t len) {  // a reduction straight from the buffer
                  const double* in = static_cast<const double*>(data);
                  double* o = acc + offset / 8;
                  for (size_t i = 0; i < len / 8; ++i) o[i] += in[i];
                };
                ch.postRecv(bytes, std::move(t));
              }
            };
            // Reports "memcpy GB/s, then per phase (direct, sink): GB/s and CPU seconds of this process".
            std::string report;
            if (r == 1) {  // the machine's own copy speed in the same run, to compare against
              std::vector<unsigned char> other(bytes, 3);
              auto t0 = Clock::now();
              for (int i = 0; i < 5; ++i) std::memcpy(other.data(), buf.data(), bytes);
              report += fmt::format("{} ", bytes * 5 / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
            }
            auto cpuSeconds = [] {
              timespec ts{};
              clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
              return ts.tv_sec + ts.tv_nsec * 1e-9;
            };
            for (bool sink : {false, true}) {
              once(sink);
              drive({&ch});
              st.boot->barrier();
              auto t0 = Clock::now();
              double c0 = cpuSeconds();
              for (int i = 0; i < iters; ++i) once(sink);
              drive({&ch}, std::chrono::seconds(120));
              double s = std::chrono::duration<double>(Clock::now() - t0).count();
              report += fmt::format("{} {} ", bytes * iters / s / 1e9, cpuSeconds() - c0);
              st.boot->barrier();
            }
            return "bw " + report;
          },
          std::chrono::seconds(240));
      double v0[5] = {}, v1[6] = {};
      REQUIRE(std::sscanf(results[0].c_str(), "bw %lf %lf %lf %lf", &v0[0], &v0[1], &v0[2], &v0[3]) == 4);
      REQUIRE(std::sscanf(results[1].c_str(), "bw %lf %lf %lf %lf %lf", &v1[0], &v1[1], &v1[2], &v1[3], &v1[4]) == 5);
      double gb = bytes * iters / 1e9;
      WARN(fmt::format(
          "{}: memcpy {:.2f} GB/s | direct {:.2f} GB/s, cpu {:.3f} s/GB | sink(sum) {:.2f} GB/s, cpu {:.3f} "
          "s/GB",
          mode.label, v1[0], v1[1], (v0[1] + v1[2]) / gb, v1[3], (v0[3] + v1[4]) / gb));
    }
}

TEST_CASE("a message of the right size tagged for another call is an error on shm and tcp; untagged ones pass",
          "[transports][tag]") {
  // The executor tags each collective's messages with its call (comm/plan.h: callTagOf); two ranks making different
  // calls whose messages have the same sizes (float against int32) must not exchange data silently. Rank 0 sends
  // with one tag, rank 1 receives the same size with another: equal tags, or 0 on either side, deliver the bytes;
  // different tags fail the receiver with hocclInvalidUsage naming the peer, and nothing is written past its buffer.
  struct Tags {
    transport::CallTag send, recv;
    bool mismatch;
  };
  const Tags cases[] = {{0x1234abcd, 0x1234abcd, false}, {0x1234abcd, 0, false}, {0, 0x1234abcd, false},
                        {0, 0, false},                   {0x1234abcd, 0x1234abce, true}, {7, 0x70001, true}};
  for (Kind kind : {Kind::Shm, Kind::Tcp}) {
    for (const Tags& t : cases) {
      for (size_t bytes : {size_t{24}, size_t{4000}, size_t{3} << 20}) {
        for (bool sink : {false, true}) {
          DYNAMIC_SECTION(kindName(kind) << ": tags " << t.send << "/" << t.recv << ", " << bytes << " bytes"
                                         << (sink ? ", sink" : "")) {
            auto id = boot::createUniqueId();
            CHECK(test::taggedCase([&](int r) { return connectRank(id, r, 2, kind); }, bytes, t.send, t.recv, sink,
                                   t.mismatch, "rank 0 (host testhost") == "");
          }
        }
      }
    }
  }
}

TEST_CASE("a receive that does not match the message's length is an error naming both, on shm and tcp",
          "[transports]") {
  // Rank 0 sends `sent` bytes, rank 1 posts a receive of `posted` bytes (guard bytes after it). Rank 1 must fail with
  // hocclInvalidUsage naming both lengths and the peer, and nothing may be written beyond its buffer. tcp carries each
  // message's length ahead of its first stripe; shm carries it in every slot's descriptor.
  for (Kind kind : {Kind::Shm, Kind::Tcp}) {
    for (auto [sent, posted] : {std::pair<size_t, size_t>{200, 100}, {100, 200}, {3u << 20, 1u << 20}}) {
      DYNAMIC_SECTION(kindName(kind) << ": sent " << sent << ", posted " << posted) {
        auto id = boot::createUniqueId();
        test::MismatchOutcome seen;
        auto errors = runThreads(2, [&](int r) {
          RankState st = connectRank(id, r, 2, kind);
          test::MismatchOutcome mine = test::exchangeMismatched(*st.channels.at(1 - r), r, sent, posted);
          if (r == 1) seen = mine;
          st.boot->barrier();
        });
        INFO(firstError(errors));
        CHECK(firstError(errors).empty());
        INFO(seen.error);
        CHECK(seen.code == hocclInvalidUsage);
        CHECK(seen.error.find("mismatch") != std::string::npos);
        CHECK(seen.guardIntact);
        CHECK(seen.error.find("a receive of " + std::to_string(posted) + " bytes") != std::string::npos);
        CHECK(seen.error.find(std::to_string(sent) + " bytes") != std::string::npos);
        CHECK(seen.error.find("rank 0 (host testhost") != std::string::npos);
      }
    }
  }
}
