// The ibverbs transport's logic, without an RDMA device (none exists on the build machines): HOCCL_IB_HCA parsing
// and matching, the port choice (the GPU's nearest NIC), the default GID choice, the connection-info wire format
// (round trip, fixed offsets, version and size mismatches, every single-bit corruption, random garbage, impossible
// fields), the registration cache (against a
// fake registrar that records every call, and a randomized run checked against a model), credit accounting (a
// simulated sender and receiver), the mapping of every ibv_wc_status, and the real step-aside path: libibverbs
// dlopened on this machine finds no device, a library that does not exist is reported, and the collective connect
// agrees across ranks through a real bootstrap. The data path (queue-pair setup, chunks, credits, length check,
// failed completions) runs on a SIMULATED device (fake_verbs.h): no RDMA hardware exists here.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "channel_exchange.h"
#include "scoped_env.h"
#include "fake_verbs.h"
#include "rank_runner.h"
#include "base/boot/bootstrap.h"
#include "base/error.h"
#include "base/hash.h"
#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/credits.h"
#include "transports/ibverbs/hca_list.h"
#include "transports/ibverbs/ibv_channel.h"
#include "transports/ibverbs/ibv_device.h"
#include "transports/ibverbs/ibv_lib.h"
#include "transports/ibverbs/ibv_transport.h"
#include "transports/ibverbs/port_choice.h"
#include "transports/ibverbs/reg_cache.h"
#include "transports/ibverbs/wc_error.h"
#include "transports/registry.h"

using namespace hoccl;
using hoccl::test::ScopedEnv;
using namespace hoccl::transport::ibverbs;
using Catch::Matchers::Contains;
using hoccl::test::FakeVerbs;

namespace {

hocclResult_t codeOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return hocclSuccess;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// HOCCL_IB_HCA

TEST_CASE("ibverbs: HCA list matching", "[ibverbs][hca]") {
  struct Case {
    const char* spec;
    std::vector<std::pair<std::string, int>> yes, no;
  };
  const std::vector<Case> cases = {
      {"", {{"mlx5_0", 1}, {"anything", 7}}, {}},
      {"mlx5_0:1", {{"mlx5_0", 1}, {"mlx5_01", 1}}, {{"mlx5_0", 2}, {"mlx5_1", 1}, {"mlx4_0", 1}}},
      {"mlx5", {{"mlx5_0", 1}, {"mlx5_10", 2}}, {{"mlx4_0", 1}, {"mlx", 1}}},
      {"=mlx5_1", {{"mlx5_1", 1}, {"mlx5_1", 2}}, {{"mlx5_10", 1}, {"mlx5_0", 1}}},
      {"^mlx5_0", {{"mlx5_1", 1}, {"mlx4_0", 1}}, {{"mlx5_0", 1}, {"mlx5_0", 2}, {"mlx5_01", 1}}},
      {"^mlx5_0,mlx5_1", {{"mlx4_0", 1}, {"mlx5_2", 1}}, {{"mlx5_0", 1}, {"mlx5_1", 1}}},  // NCCL: ^ is for all
      {"^=mlx5_1", {{"mlx5_10", 1}, {"mlx5_0", 1}}, {{"mlx5_1", 1}}},
      {"mlx5_0:1,^mlx5_1", {{"mlx5_0", 1}}, {{"mlx5_0", 2}, {"mlx5_1", 1}, {"mlx4_0", 1}}},
      {"mlx5_0:1,mlx5_1:2", {{"mlx5_0", 1}, {"mlx5_1", 2}}, {{"mlx5_0", 2}, {"mlx5_1", 1}}},
      {"mlx5,^mlx5_3", {{"mlx5_0", 1}, {"mlx5_2", 1}}, {{"mlx5_3", 1}, {"bnxt_re0", 1}}},
      {"^mlx5_0:2", {{"mlx5_0", 1}, {"mlx5_1", 2}}, {{"mlx5_0", 2}}},
      {"=mlx5_0:1,=mlx5_1", {{"mlx5_0", 1}, {"mlx5_1", 1}}, {{"mlx5_01", 1}, {"mlx5_0", 2}, {"mlx5_10", 1}}},
      {" mlx5_0:1 , irdma ", {{"mlx5_0", 1}, {"irdma0", 1}}, {{"mlx5_0", 2}}},
      {"rxe_eth0", {{"rxe_eth0", 1}}, {{"rxe_eth1", 1}}},
  };
  for (const Case& c : cases) {
    INFO("spec '" << c.spec << "'");
    const HcaFilter f = HcaFilter::parse(c.spec);
    for (auto& [d, p] : c.yes) {
      INFO(d << ":" << p << " should match");
      CHECK(f.matches(d, p));
    }
    for (auto& [d, p] : c.no) {
      INFO(d << ":" << p << " should not match");
      CHECK_FALSE(f.matches(d, p));
    }
  }
  const HcaFilter f = HcaFilter::parse("^=mlx5_0:1,mlx5_2");
  REQUIRE(f.entries().size() == 2);
  CHECK(f.entries()[0].name == "mlx5_0");
  CHECK(f.entries()[0].port == 1);
  CHECK(f.entries()[0].exact);
  CHECK(f.entries()[0].exclude);
  CHECK(f.entries()[1].name == "mlx5_2");
  CHECK(f.entries()[1].port == 0);
  CHECK(f.entries()[1].exact);
  CHECK(f.entries()[1].exclude);
}

TEST_CASE("ibverbs: malformed HCA lists are refused naming the entry", "[ibverbs][hca]") {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {",", "empty"},
      {"mlx5_0,", "empty"},
      {",mlx5_0", "empty"},
      {"mlx5_0,,mlx5_1", "empty"},
      {"mlx5_0:", "without"},
      {"mlx5_0:x", "not a"},
      {"mlx5_0:0", "outside"},
      {"mlx5_0:256", "outside"},
      {"mlx5_0:1000", "outside"},
      {"mlx5_0:1:2", "not a"},
      {":1", "no device"},
      {"^", "no device"},
      {"=", "no device"},
      {"^=", "no device"},
      {"mlx5 0", "character"},
      {"mlx5_0:-1", "not a"},
      {"mlx5_0:+1", "not a"},
      {"mlx5_0 :1", "character"},
      {"mlx5_0,^", "no device"},
      {"mlx/5", "character"},
  };
  for (auto& [spec, why] : bad) {
    INFO("spec '" << spec << "'");
    try {
      HcaFilter::parse(spec);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == hocclInvalidArgument);
      CHECK_THAT(e.what(), Contains("HOCCL_IB_HCA") && Contains(why));
    }
  }
}

TEST_CASE("ibverbs: a rank uses a port of its GPU's nearest NIC; without one the host's ranks spread",
          "[ibverbs][port]") {
  auto port = [](const char* device, int n) {
    PortInfo p;
    p.device = device;
    p.port = n;
    return p;
  };
  const std::vector<PortInfo> ports = {port("mlx5_0", 1), port("mlx5_1", 1), port("mlx5_1", 2), port("mlx5_2", 1)};
  SECTION("the GPU's NIC: its ports, spread by the rank's index on the host") {
    const size_t want[] = {1, 2, 1, 2, 1};
    for (int local = 0; local < 5; ++local) {
      const PortChoice c = choosePort(ports, "mlx5_1", local);
      CHECK(c.index == want[local]);
      CHECK(c.why == "the nearest NIC of this rank's GPU (mlx5_1)");
    }
    CHECK(choosePort(ports, "mlx5_2", 3).index == 3);
    CHECK(choosePort(ports, "mlx5_0", 7).index == 0);
  }
  SECTION("no GPU: every admitted port in turn") {
    for (int local = 0; local < 9; ++local) {
      const PortChoice c = choosePort(ports, "", local);
      CHECK(c.index == static_cast<size_t>(local) % ports.size());
      CHECK(c.why == "the ranks of one host spread over the admitted ports");
    }
  }
  SECTION("a GPU whose NIC has no admitted port (or a name that only starts like one): spread, saying why") {
    for (const char* near : {"mlx5_9", "mlx5", "mlx5_10"}) {
      const PortChoice c = choosePort(ports, near, 5);
      CHECK(c.index == 1);
      CHECK(c.why.find(std::string("(") + near + ") has no admitted active port") != std::string::npos);
      CHECK(c.why.find("HOCCL_IB_HCA") != std::string::npos);
    }
  }
  SECTION("no port at all is a bug of the caller") {
    CHECK_THROWS_AS(choosePort({}, "mlx5_0", 0), Error);
  }
}

TEST_CASE("ibverbs: default GID choice prefers IPv4-mapped RoCE v2", "[ibverbs][gid]") {
  auto gid = [](std::initializer_list<int> head, bool v4) {
    std::array<uint8_t, 16> g{};
    int i = 0;
    for (int b : head) g[i++] = static_cast<uint8_t>(b);
    if (v4) {
      g[10] = g[11] = 0xff;
      g[12] = 10, g[15] = 7;
    }
    return g;
  };
  const auto linkLocal = gid({0xfe, 0x80}, false);
  const auto v4 = gid({}, true);
  const std::array<uint8_t, 16> zero{};
  CHECK(chooseGidIndex({}) == -1);
  CHECK(chooseGidIndex({{0, zero, "RoCE v2"}}) == -1);
  CHECK(chooseGidIndex({{0, linkLocal, "IB/RoCE v1"}}) == 0);
  CHECK(chooseGidIndex({{0, linkLocal, "IB/RoCE v1"}, {1, linkLocal, "RoCE v2"}}) == 1);
  CHECK(chooseGidIndex(
            {{0, linkLocal, "IB/RoCE v1"}, {1, linkLocal, "RoCE v2"}, {2, v4, "IB/RoCE v1"}, {3, v4, "RoCE v2"}}) == 3);
  CHECK(chooseGidIndex({{0, zero, ""}, {4, linkLocal, ""}}) == 4);
  CHECK(gidIsIpv4Mapped(v4));
  CHECK_FALSE(gidIsIpv4Mapped(linkLocal));
  CHECK(gidIsZero(zero));
}

// ---------------------------------------------------------------------------------------------------------------
// Connection-info wire format

namespace {

ConnInfo sampleInfo(std::mt19937_64& gen) {
  ConnInfo c;
  c.fromRank = static_cast<uint32_t>(gen() % 1000);
  c.toRank = static_cast<uint32_t>(gen() % 1000);
  c.linkLayer = gen() % 2 ? LinkLayer::Ethernet : LinkLayer::InfiniBand;
  c.lid = static_cast<uint16_t>(1 + gen() % 60000);
  c.mtu = static_cast<uint8_t>(1 + gen() % 5);
  c.port = static_cast<uint8_t>(1 + gen() % 2);
  c.gidIndex = static_cast<uint8_t>(gen() % 8);
  c.adaptiveRouting = gen() % 2;
  for (auto& b : c.gid) b = static_cast<uint8_t>(gen());
  c.gid[0] |= 1;
  c.qpn = static_cast<uint32_t>(1 + gen() % ((1u << 24) - 1));
  c.psn = static_cast<uint32_t>(gen() % (1u << 24));
  c.ringAddr = (gen() | 1) << 12;
  c.ringRkey = static_cast<uint32_t>(gen());
  c.slots = static_cast<uint32_t>(2 + gen() % 63);
  c.slotBytes = 4096 * (1 + gen() % 256);
  c.creditAddr = (gen() | 1) << 6;
  c.creditRkey = static_cast<uint32_t>(gen());
  return c;
}

uint64_t readLe(const ConnInfoWire& w, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(w[at + i]) << (8 * i);
  return v;
}

void writeLe(ConnInfoWire& w, size_t at, size_t n, uint64_t v) {
  for (size_t i = 0; i < n; ++i) w[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

/// Recomputes the checksum after a test edits a field, so that only the field's validation can refuse it.
void reseal(ConnInfoWire& w) { writeLe(w, 104, 8, fnv1a(w.data(), 104)); }

ConnInfo decode(const ConnInfoWire& w, const ConnInfo& c) {
  return decodeConnInfo(w.data(), w.size(), static_cast<int>(c.fromRank), static_cast<int>(c.toRank), "rank 9");
}

}  // namespace

TEST_CASE("ibverbs: connection info round trip and fixed layout", "[ibverbs][wire]") {
  std::mt19937_64 gen(12);
  for (int i = 0; i < 200; ++i) {
    const ConnInfo c = sampleInfo(gen);
    const ConnInfoWire w = encodeConnInfo(c);
    CHECK(decode(w, c) == c);
    // The layout is fixed: read the fields back at their documented offsets.
    CHECK(readLe(w, 0, 4) == 0x56424948);
    CHECK(std::string(reinterpret_cast<const char*>(w.data()), 4) == "HIBV");
    CHECK(readLe(w, 4, 2) == kConnInfoVersion);
    CHECK(readLe(w, 6, 2) == 112);
    CHECK(readLe(w, 8, 4) == c.fromRank);
    CHECK(readLe(w, 12, 4) == c.toRank);
    CHECK(readLe(w, 16, 2) == c.lid);
    CHECK(readLe(w, 19, 1) == c.mtu);
    CHECK(readLe(w, 22, 2) == (c.adaptiveRouting ? 1u : 0u));
    CHECK(std::memcmp(w.data() + 24, c.gid.data(), 16) == 0);
    CHECK(readLe(w, 40, 4) == c.qpn);
    CHECK(readLe(w, 48, 8) == c.ringAddr);
    CHECK(readLe(w, 64, 8) == c.slotBytes);
    CHECK(readLe(w, 72, 8) == c.creditAddr);
    CHECK(readLe(w, 104, 8) == fnv1a(w.data(), 104));
  }
}

TEST_CASE("ibverbs: connection info of another version or size is refused as a usage error", "[ibverbs][wire]") {
  std::mt19937_64 gen(3);
  const ConnInfo c = sampleInfo(gen);
  const ConnInfoWire good = encodeConnInfo(c);
  ConnInfoWire w = good;
  writeLe(w, 4, 2, kConnInfoVersion + 1);
  reseal(w);
  try {
    decode(w, c);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == hocclInvalidUsage);
    CHECK_THAT(e.what(), Contains("version") && Contains("rank 9") && Contains("same hoccl build"));
  }
  w = good;
  writeLe(w, 6, 2, 120);
  reseal(w);
  CHECK(codeOf([&] { decode(w, c); }) == hocclInvalidUsage);
  w = good;
  writeLe(w, 0, 4, 0x12345678);
  reseal(w);
  CHECK(codeOf([&] { decode(w, c); }) == hocclInvalidUsage);
  // A short or long buffer, whatever its contents.
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  CHECK(codeOf([&] { decodeConnInfo(longer.data(), longer.size(), c.fromRank, c.toRank, "x"); }) == hocclInvalidUsage);
  CHECK(codeOf([&] { decodeConnInfo(good.data(), 111, c.fromRank, c.toRank, "x"); }) == hocclInvalidUsage);
  CHECK(codeOf([&] { decodeConnInfo(good.data(), 4, c.fromRank, c.toRank, "x"); }) == hocclInvalidUsage);
  CHECK(codeOf([&] { decodeConnInfo(nullptr, 112, c.fromRank, c.toRank, "x"); }) == hocclInvalidUsage);
  // Meant for another pair.
  CHECK(codeOf([&] { decodeConnInfo(good.data(), 112, c.fromRank + 1, c.toRank, "x"); }) == hocclInternalError);
  CHECK(codeOf([&] { decodeConnInfo(good.data(), 112, c.fromRank, c.toRank + 1, "x"); }) == hocclInternalError);
}

TEST_CASE("ibverbs: every single-bit corruption and random garbage is refused", "[ibverbs][wire]") {
  std::mt19937_64 gen(5);
  const ConnInfo c = sampleInfo(gen);
  const ConnInfoWire good = encodeConnInfo(c);
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    ConnInfoWire w = good;
    w[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    INFO("bit " << bit);
    const hocclResult_t code = codeOf([&] { decode(w, c); });
    CHECK((code == hocclInvalidUsage || code == hocclInternalError));
  }
  for (int i = 0; i < 2000; ++i) {
    ConnInfoWire w;
    for (auto& b : w) b = static_cast<uint8_t>(gen());
    if (i % 2) writeLe(w, 0, 8, readLe(good, 0, 8));  // a good header over garbage
    CHECK(codeOf([&] { decode(w, c); }) != hocclSuccess);
  }
}

TEST_CASE("ibverbs: impossible fields are refused even with a valid checksum", "[ibverbs][wire]") {
  std::mt19937_64 gen(8);
  ConnInfo c = sampleInfo(gen);
  c.linkLayer = LinkLayer::Ethernet;
  const ConnInfoWire good = encodeConnInfo(c);
  struct Edit {
    const char* what;
    size_t at, n;
    uint64_t value;
  };
  const std::vector<Edit> edits = {
      {"link layer", 18, 1, 3},   {"mtu", 19, 1, 0},
      {"mtu", 19, 1, 6},          {"port", 20, 1, 0},
      {"flags", 22, 2, 2},        {"qpn", 40, 4, 0},
      {"qpn", 40, 4, 1u << 24},   {"psn", 44, 4, 1u << 24},
      {"ring address", 48, 8, 0}, {"slots", 60, 4, 1},
      {"slots", 60, 4, 65},       {"slot bytes", 64, 8, 4095},
      {"slot bytes", 64, 8, 0},   {"credit address", 72, 8, 0},
      {"reserved", 84, 4, 1},     {"reserved", 96, 1, 1},
      {"GID", 24, 8, 0},
  };
  for (const Edit& e : edits) {
    ConnInfoWire w = good;
    writeLe(w, e.at, e.n, e.value);
    if (std::string(e.what) == "GID") writeLe(w, 32, 8, 0);  // the whole GID is zero on a RoCE port
    reseal(w);
    INFO(e.what << " = " << e.value);
    try {
      decode(w, c);
      FAIL("accepted");
    } catch (const Error& err) {
      CHECK(err.code() == hocclInternalError);
      CHECK_THAT(err.what(), Contains("rank 9"));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Registration cache

namespace {

/// A registrar that records every call; handles are serial numbers.
struct FakeRegistrar {
  struct Reg {
    uintptr_t base;
    size_t len;
    bool live;
  };
  std::vector<Reg> regs;  // index + 1 is the handle
  bool failNext = false;
  RegCache make(size_t maxEntries) {
    return RegCache(
        [this](uintptr_t base, size_t len) -> void* {
          if (failNext) {
            failNext = false;
            throw Error(hocclSystemError, "fake registration failure");
          }
          regs.push_back({base, len, true});
          return reinterpret_cast<void*>(regs.size());
        },
        [this](void* h) {
      Reg& r = regs.at(reinterpret_cast<uintptr_t>(h) - 1);
      if (!r.live) throw std::logic_error("double deregistration");
      r.live = false;
        },
        maxEntries);
  }
  size_t live() const {
    return static_cast<size_t>(std::count_if(regs.begin(), regs.end(), [](const Reg& r) { return r.live; }));
  }
  bool isLive(void* h) const { return regs.at(reinterpret_cast<uintptr_t>(h) - 1).live; }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

}  // namespace

TEST_CASE("ibverbs: registration cache hits, page alignment and reference counts", "[ibverbs][regcache]") {
  FakeRegistrar f;
  {
    RegCache cache = f.make(8);
    auto a = cache.acquire(at(0x10010), 100);
    REQUIRE(f.regs.size() == 1);
    CHECK(f.regs[0].base == 0x10000);
    CHECK(f.regs[0].len == 0x1000);
    CHECK(a.base() == 0x10000);
    auto b = cache.acquire(at(0x10800), 0x800);  // inside the same page: a hit
    CHECK(f.regs.size() == 1);
    CHECK(cache.hits() == 1);
    CHECK(b.handle() == a.handle());
    auto c = cache.acquire(at(0x10800), 0x801);  // crosses into the next page: a new, larger registration
    CHECK(f.regs.size() == 2);
    CHECK(f.regs[1].base == 0x10000);
    CHECK(f.regs[1].len == 0x2000);
    CHECK(f.isLive(a.handle()));  // still leased: superseded, not dropped
    a.reset();
    CHECK(f.isLive(b.handle()));
    void* old = b.handle();
    b.reset();
    CHECK_FALSE(f.isLive(old));  // last lease of a superseded entry: deregistered
    auto d = cache.acquire(at(0x10000), 0x2000);
    CHECK(d.handle() == c.handle());
    CHECK(cache.entries() == 1);
  }
  CHECK(f.live() == 0);  // the destructor deregisters everything
}

TEST_CASE("ibverbs: registration cache merges overlapping ranges", "[ibverbs][regcache]") {
  FakeRegistrar f;
  RegCache cache = f.make(8);
  cache.acquire(at(0x1000), 0x1000).reset();
  cache.acquire(at(0x3000), 0x1000).reset();
  cache.acquire(at(0x6000), 0x1000).reset();
  REQUIRE(cache.entries() == 3);
  auto m = cache.acquire(at(0x1800), 0x2000);  // overlaps the first two: one registration over both
  CHECK(m.base() == 0x1000);
  CHECK(m.length() == 0x3000);
  CHECK(cache.entries() == 2);
  CHECK(f.live() == 2);
  auto big = cache.acquire(at(0x3800), 0x3000);  // reaches the third: the union grows over all of them
  CHECK(big.base() == 0x1000);
  CHECK(big.length() == 0x6000);
  CHECK(f.isLive(m.handle()));
  m.reset();
  CHECK(cache.entries() == 1);
  CHECK(f.live() == 1);
}

TEST_CASE("ibverbs: registration cache evicts least recently used, never a leased entry", "[ibverbs][regcache]") {
  FakeRegistrar f;
  RegCache cache = f.make(2);
  cache.acquire(at(0x10000), 10).reset();  // A
  cache.acquire(at(0x20000), 10).reset();  // B
  cache.acquire(at(0x10000), 10).reset();  // A used again: B is now the least recent
  cache.acquire(at(0x30000), 10).reset();  // C: over the limit, B goes
  CHECK(cache.entries() == 2);
  CHECK(f.regs[0].live);
  CHECK_FALSE(f.regs[1].live);
  CHECK(f.regs[2].live);
  // Held leases exceed the limit rather than lose a registration in use.
  auto x = cache.acquire(at(0x40000), 10);
  auto y = cache.acquire(at(0x50000), 10);
  auto z = cache.acquire(at(0x60000), 10);
  CHECK(cache.entries() == 3);
  CHECK(f.isLive(x.handle()));
  CHECK(f.isLive(y.handle()));
  CHECK(f.isLive(z.handle()));
  void* hx = x.handle();
  x.reset();  // over the limit: the released one is the least recent unreferenced entry
  CHECK_FALSE(f.isLive(hx));
  CHECK(cache.entries() == 2);
}

TEST_CASE("ibverbs: registration cache invalidation and failed registrations", "[ibverbs][regcache]") {
  FakeRegistrar f;
  RegCache cache = f.make(8);
  auto held = cache.acquire(at(0x10000), 0x100);
  cache.acquire(at(0x20000), 0x100).reset();
  // Freeing memory under a lease is refused, and nothing changes.
  CHECK(codeOf([&] { cache.invalidate(at(0x10000), 0x100); }) == hocclInternalError);
  CHECK(cache.entries() == 2);
  cache.invalidate(at(0x20010), 1);
  CHECK(cache.entries() == 1);
  CHECK_FALSE(f.regs[1].live);
  held.reset();
  cache.invalidate(at(0xf000), 0x2000);
  CHECK(cache.entries() == 0);
  CHECK(f.live() == 0);
  // A registration that fails leaves the cache as it was.
  cache.acquire(at(0x30000), 0x100).reset();
  f.failNext = true;
  CHECK(codeOf([&] { cache.acquire(at(0x30800), 0x1000); }) == hocclSystemError);
  CHECK(cache.entries() == 1);
  CHECK(f.live() == 1);
  CHECK(codeOf([&] { cache.acquire(nullptr, 10); }) == hocclInternalError);
  CHECK(codeOf([&] { cache.acquire(at(0x1000), 0); }) == hocclInternalError);
}

TEST_CASE("ibverbs: registration cache under random use keeps every lease valid", "[ibverbs][regcache]") {
  FakeRegistrar f;
  std::mt19937_64 gen(77);
  {
    RegCache cache = f.make(6);
    struct Held {
      RegCache::Lease lease;
      uintptr_t addr;
      size_t len;
    };
    std::vector<Held> held;
    for (int step = 0; step < 5000; ++step) {
      if (held.size() < 12 && (held.empty() || gen() % 2)) {
        const uintptr_t addr = 0x100000 + (gen() % 64) * 0x800 + gen() % 0x800;
        const size_t len = 1 + gen() % 0x3000;
        held.push_back({cache.acquire(at(addr), len), addr, len});
      } else {
        held.erase(held.begin() + static_cast<long>(gen() % held.size()));
      }
      for (const Held& h : held) {
        // Every held lease is registered and covers what was asked.
        REQUIRE(f.isLive(h.lease.handle()));
        const auto& r = f.regs.at(reinterpret_cast<uintptr_t>(h.lease.handle()) - 1);
        REQUIRE(r.base <= h.addr);
        REQUIRE(r.base + r.len >= h.addr + h.len);
        REQUIRE(r.base % 4096 == 0);
        REQUIRE(r.len % 4096 == 0);
      }
      REQUIRE(f.live() == cache.entries());
      std::set<void*> distinct;
      for (const Held& h : held) distinct.insert(h.lease.handle());
      REQUIRE(cache.entries() <= std::max<size_t>(6, distinct.size()));
    }
    CHECK(cache.hits() > 0);
  }
  CHECK(f.live() == 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Credits

TEST_CASE("ibverbs: send credits never over-commit and come back", "[ibverbs][credits]") {
  SendCredits s(4);
  for (uint64_t i = 0; i < 4; ++i) CHECK(s.post() == i);
  CHECK_FALSE(s.canPost());
  CHECK(codeOf([&] { s.post(); }) == hocclInternalError);
  s.remoteConsumed(2);  // the peer freed two slots, but our own writes of them have not completed yet
  CHECK(s.available() == 0);
  s.localComplete();
  CHECK(s.available() == 1);
  s.localComplete();
  CHECK(s.available() == 2);
  CHECK(codeOf([&] { s.remoteConsumed(1); }) == hocclInternalError);  // backwards
  CHECK(codeOf([&] { s.remoteConsumed(5); }) == hocclInternalError);  // beyond what was sent
  s.localComplete();
  s.localComplete();
  CHECK(codeOf([&] { s.localComplete(); }) == hocclInternalError);
  s.remoteConsumed(4);
  CHECK(s.available() == 4);
  CHECK(codeOf([] { SendCredits bad(0); }) == hocclInternalError);
}

TEST_CASE("ibverbs: credit return is cumulative with one write in flight", "[ibverbs][credits]") {
  CreditReturn r(3);
  CHECK_FALSE(r.shouldReturn());
  CHECK(r.arrived() == 0);
  CHECK(r.arrived() == 1);
  CHECK(r.arrived() == 2);
  CHECK(codeOf([&] { r.arrived(); }) == hocclInternalError);  // a fourth chunk into a ring of three
  r.consumed();
  CHECK(r.shouldReturn());
  CHECK(r.startReturn() == 1);
  r.consumed();
  CHECK_FALSE(r.shouldReturn());  // one in flight
  CHECK(r.owed());
  CHECK(r.inFlight());
  r.returnCompleted();
  CHECK_FALSE(r.inFlight());
  CHECK(r.shouldReturn());
  CHECK(r.startReturn() == 2);
  r.returnCompleted();
  r.consumed();
  CHECK(codeOf([&] { r.consumed(); }) == hocclInternalError);
  CHECK(r.waiting() == 0);
}

TEST_CASE("ibverbs: simulated sender and receiver never overflow the ring and deliver everything in order",
          "[ibverbs][credits]") {
  for (uint32_t slots : {2u, 3u, 8u}) {
    DYNAMIC_SECTION(slots << " slots") {
      std::mt19937_64 gen(slots);
      SendCredits send(slots);
      CreditReturn recv(slots);
      std::vector<int64_t> ring(slots, -1);  // which chunk each receive slot holds
      std::vector<uint64_t> inFlight;        // writes posted, not yet landed (in order)
      uint64_t creditWord = 0;               // what the receiver last wrote back
      bool creditInFlight = false;
      uint64_t creditValue = 0;
      uint64_t delivered = 0;
      const uint64_t total = 2000;
      while (delivered < total) {
        switch (gen() % 4) {
          case 0:  // the sender posts what it may
            while (send.canPost() && send.posted() < total) {
              const uint64_t seq = send.post();
              inFlight.push_back(seq);
            }
            break;
          case 1:  // a write lands and completes
            if (!inFlight.empty()) {
              const uint64_t seq = inFlight.front();
              inFlight.erase(inFlight.begin());
              REQUIRE(ring[seq % slots] == -1);  // never overwrites an unconsumed chunk
              ring[seq % slots] = static_cast<int64_t>(seq);
              REQUIRE(recv.arrived() == seq);
              send.localComplete();
            }
            break;
          case 2:  // the receiver consumes and returns credits
            if (recv.waiting() > 0) {
              const uint64_t seq = recv.consumedCount();
              REQUIRE(ring[seq % slots] == static_cast<int64_t>(seq));
              ring[seq % slots] = -1;
              recv.consumed();
              ++delivered;
            }
            if (recv.shouldReturn()) {
              creditValue = recv.startReturn();
              creditInFlight = true;
            }
            break;
          case 3:  // the credit write lands
            if (creditInFlight) {
              creditWord = creditValue;
              creditInFlight = false;
              recv.returnCompleted();
            }
            send.remoteConsumed(creditWord);
            break;
        }
        REQUIRE(send.posted() - send.consumed() <= slots);
      }
      // Drain: every credit comes back.
      if (creditInFlight) {
        creditWord = creditValue;
        recv.returnCompleted();
      }
      if (recv.shouldReturn()) creditWord = recv.startReturn();
      send.remoteConsumed(creditWord);
      CHECK(send.consumed() == total);
      CHECK(send.available() == slots);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Work completion errors

TEST_CASE("ibverbs: every ibv_wc_status maps to an error naming peer, device, status and advice", "[ibverbs][wc]") {
  // verbs.h's enumerators in order: the independent reference for the names.
  const std::vector<std::string> names = {
      "IBV_WC_SUCCESS",
      "IBV_WC_LOC_LEN_ERR",
      "IBV_WC_LOC_QP_OP_ERR",
      "IBV_WC_LOC_EEC_OP_ERR",
      "IBV_WC_LOC_PROT_ERR",
      "IBV_WC_WR_FLUSH_ERR",
      "IBV_WC_MW_BIND_ERR",
      "IBV_WC_BAD_RESP_ERR",
      "IBV_WC_LOC_ACCESS_ERR",
      "IBV_WC_REM_INV_REQ_ERR",
      "IBV_WC_REM_ACCESS_ERR",
      "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",
      "IBV_WC_RNR_RETRY_EXC_ERR",
      "IBV_WC_LOC_RDD_VIOL_ERR",
      "IBV_WC_REM_INV_RD_REQ_ERR",
      "IBV_WC_REM_ABORT_ERR",
      "IBV_WC_INV_EECN_ERR",
      "IBV_WC_INV_EEC_STATE_ERR",
      "IBV_WC_FATAL_ERR",
      "IBV_WC_RESP_TIMEOUT_ERR",
      "IBV_WC_GENERAL_ERR",
      "IBV_WC_TM_ERR",
      "IBV_WC_TM_RNDV_INCOMPLETE",
  };
  REQUIRE(names.size() == static_cast<size_t>(IBV_WC_TM_RNDV_INCOMPLETE) + 1);
  const WcWhere w{3, "rank 5 (host nodeB, pid 77)", "mlx5_0:1", "the RDMA write of chunk 12"};
  for (int s = 0; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
    INFO(names[s]);
    CHECK(wcStatusName(s) == names[s]);
    const Error e = wcError(s, w);
    CHECK(e.breaksCommunicator());
    if (s == IBV_WC_SUCCESS) {
      CHECK(e.code() == hocclInternalError);
      continue;
    }
    CHECK((e.code() == hocclRemoteError || e.code() == hocclSystemError || e.code() == hocclInternalError));
    CHECK_THAT(e.what(), Contains("rank 3") && Contains("rank 5 (host nodeB, pid 77)") && Contains("mlx5_0:1") &&
                             Contains(names[s]) && Contains("chunk 12") && Contains("Try:"));
  }
  CHECK(wcError(IBV_WC_RETRY_EXC_ERR, w).code() == hocclRemoteError);
  CHECK(wcError(IBV_WC_WR_FLUSH_ERR, w).code() == hocclRemoteError);
  CHECK(wcError(IBV_WC_REM_ACCESS_ERR, w).code() == hocclRemoteError);
  CHECK(wcError(IBV_WC_LOC_PROT_ERR, w).code() == hocclInternalError);
  CHECK(wcError(IBV_WC_LOC_LEN_ERR, w).code() == hocclInternalError);
  CHECK(wcError(IBV_WC_FATAL_ERR, w).code() == hocclSystemError);
  CHECK_THAT(wcError(IBV_WC_RETRY_EXC_ERR, w).what(), Contains("HOCCL_IB_TIMEOUT"));
  CHECK(wcStatusName(999) == "IBV_WC_999");
  CHECK(wcError(999, w).code() == hocclSystemError);
}

// ---------------------------------------------------------------------------------------------------------------
// Stepping aside, on this machine's real libibverbs (or its absence)

TEST_CASE("ibverbs: an absent libibverbs is reported and the transport steps aside", "[ibverbs][dlopen]") {
  static const IbvLib missing = IbvLib::load("libhoccl-test-no-such-ibverbs.so.1");
  CHECK_FALSE(missing.ok());
  CHECK_THAT(missing.why(), Contains("libhoccl-test-no-such-ibverbs.so.1") && Contains("rdma-core"));
  CHECK(missing.get_device_list == nullptr);
  IbvTransport t(missing);
  CHECK_FALSE(t.available());
  CHECK_THAT(t.whyNot(), Contains("could not be loaded"));
  transport::ConnectContext ctx;
  ctx.rank = 0;
  ctx.nranks = 4;
  for (int p = 0; p < 4; ++p) CHECK_FALSE(t.canConnect(ctx, p));
  CHECK(probePorts(missing, HcaFilter{}).ports.empty());
}

TEST_CASE("ibverbs: the real libibverbs on this machine loads and finds no device, so the transport steps aside",
          "[ibverbs][dlopen]") {
  const IbvLib& lib = IbvLib::get();
  if (!lib.ok()) {
    WARN("libibverbs.so.1 not usable here: " << lib.why());
    CHECK_FALSE(IbvTransport().available());
    return;
  }
  CHECK(lib.get_device_list != nullptr);
  CHECK(lib.modify_qp != nullptr);
  const Probe probe = probePorts(lib, HcaFilter{});
  if (!probe.ports.empty()) {
    WARN("this machine has RDMA ports (first " << probe.ports[0].name() << "): the no-device path is not checked");
    return;
  }
  CHECK_THAT(probe.why, Contains("no RDMA device") || Contains("no active port"));
  IbvTransport t;
  CHECK_FALSE(t.available());
  CHECK(t.whyNot() == probe.why);
  {
    ScopedEnv off("HOCCL_IB_DISABLE", "1");
    CHECK(IbvTransport().whyNot() == "HOCCL_IB_DISABLE=1");
  }
  {
    ScopedEnv bad("HOCCL_IB_HCA", "mlx5_0:zero");  // bad input is an error even without a device
    CHECK(codeOf([] { IbvTransport x; }) == hocclInvalidArgument);
  }
  {
    ScopedEnv bad("HOCCL_IB_DISABLE", "2");
    CHECK(codeOf([] { IbvTransport x; }) == hocclInvalidArgument);
  }
}

TEST_CASE("ibverbs: the registry lists it between shm and tcp", "[ibverbs]") {
  auto all = transport::makeTransports();
  std::vector<std::string> names;
  for (auto& t : all) names.push_back(t->name());
  CHECK(names == std::vector<std::string>{"shm", "ibverbs", "tcp"});
}

TEST_CASE("ibverbs: the collective connect agrees across ranks when no rank has a device", "[ibverbs][connect]") {
  static const IbvLib missing = IbvLib::load("libhoccl-test-no-such-ibverbs.so.1");
  auto connectAll = [&](int nranks, const std::function<std::vector<int>(int)>& peersOf) {
    auto id = boot::createUniqueId();
    return test::runThreads(nranks, [&](int r) {
      boot::RankInfo self;
      self.rank = r;
      self.pid = getpid();
      self.hostHash = 0x1000 + static_cast<uint64_t>(r);  // every rank on its own host
      std::snprintf(self.hostname, sizeof(self.hostname), "host%d", r);
      boot::Bootstrap boot(id, r, nranks, self);
      IbvTransport t(missing);
      transport::ConnectContext ctx;
      ctx.bootstrap = &boot;
      ctx.rank = r;
      ctx.nranks = nranks;
      ctx.peers = boot.ranks();
      auto channels = t.connect(ctx, peersOf(r));
      if (!channels.empty()) throw std::runtime_error("channels without a device");
      boot.barrier();  // the bootstrap is still in step after the connect
    });
  };
  SECTION("no rank wants ibverbs peers: one all-gather, no channels") {
    auto errors = connectAll(3, [](int) { return std::vector<int>{}; });
    INFO(test::firstError(errors));
    CHECK(test::firstError(errors).empty());
  }
  SECTION("a rank that asks for a peer without a port stops every rank, naming it") {
    auto errors = connectAll(3, [](int r) { return r == 0 ? std::vector<int>{2} : std::vector<int>{}; });
    REQUIRE(errors.size() == 3);
    CHECK_THAT(errors[0], Contains("rank 0 chose ibverbs for rank 2") && Contains("no usable RDMA port"));
    CHECK_THAT(errors[1], Contains("rank 0 failed") && Contains("rank 2"));
    CHECK_THAT(errors[2], Contains("rank 0 failed") && Contains("rank 2"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The data path on the simulated device (fake_verbs.h)

namespace {

/// Deterministic bytes of message `index` from `from` to `to`.
std::vector<unsigned char> bytesOf(int from, int to, size_t index, size_t n) {
  std::mt19937_64 gen((static_cast<uint64_t>(from) << 32) ^ (static_cast<uint64_t>(to) << 16) ^ index ^ (n << 40));
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(gen());
  return v;
}

/// One rank connected through IbvTransport on the simulated device.
struct SimRank {
  std::unique_ptr<boot::Bootstrap> boot;
  std::unique_ptr<IbvTransport> transport;
  std::map<int, std::unique_ptr<transport::Channel>> channels;
};

SimRank connectSim(const boot::UniqueId& id, int r, int nranks, const IbvLib& lib) {
  boot::RankInfo self;
  self.rank = r;
  self.pid = getpid();
  self.hostHash = 0x2000 + static_cast<uint64_t>(r);
  std::snprintf(self.hostname, sizeof(self.hostname), "simhost%d", r);
  SimRank st;
  st.boot = std::make_unique<boot::Bootstrap>(id, r, nranks, self);
  st.transport = std::make_unique<IbvTransport>(lib);
  if (!st.transport->available()) throw std::runtime_error("simulated device not found: " + st.transport->whyNot());
  transport::ConnectContext ctx;
  ctx.bootstrap = st.boot.get();
  ctx.rank = r;
  ctx.nranks = nranks;
  ctx.peers = st.boot->ranks();
  std::vector<int> peers;
  for (int p = 0; p < nranks; ++p)
    if (p != r && st.transport->canConnect(ctx, p)) peers.push_back(p);
  st.channels = st.transport->connect(ctx, peers);
  if (st.channels.size() != peers.size()) throw std::runtime_error("missing channels");
  return st;
}

void driveAll(SimRank& st) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    bool pending = false;
    for (auto& [p, ch] : st.channels) {
      ch->progress();
      pending = pending || ch->pending() > 0;
    }
    if (!pending) return;
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("timed out with operations pending");
    std::this_thread::yield();
  }
}

}  // namespace

TEST_CASE("ibverbs on a simulated device: every size between 3 ranks, direct and sink, both posting modes",
          "[ibverbs][sim]") {
  for (const char* ar : {"0", "1"}) {
    DYNAMIC_SECTION("HOCCL_IB_ADAPTIVE_ROUTING=" << ar) {
      ScopedEnv a("HOCCL_IB_ADAPTIVE_ROUTING", ar), b("HOCCL_IB_SLOTS", "2"), c("HOCCL_IB_SLOT_SIZE", "4096");
      FakeVerbs fake;
      const std::vector<size_t> sizes = {0, 1, 7, 100, 4032, 4033, 4096, 3 * 4032 + 5, 64 * 1024 + 8, (1 << 20) + 3};
      const int nranks = 3;
      auto id = boot::createUniqueId();
      auto errors = test::runThreads(nranks, [&](int r) {
        SimRank st = connectSim(id, r, nranks, fake.lib());
        std::map<int, std::vector<std::vector<unsigned char>>> out, in;
        std::map<int, std::vector<size_t>> sinkNext;
        for (auto& [p, ch] : st.channels) {
          in[p].resize(sizes.size());
          sinkNext[p].assign(sizes.size(), 0);
          for (size_t i = 0; i < sizes.size(); ++i) {
            out[p].push_back(bytesOf(r, p, i, sizes[i]));
            ch->postSend(out[p][i].data(), sizes[i]);
            in[p][i].assign(sizes[i], 0);
            transport::RecvTarget t;
            if (i % 2) {
              t.direct = in[p][i].data();
            } else {
              t.granule = 1;
              t.sink = [&, p = p, i](const void* data, size_t off, size_t len) {
                if (off != sinkNext[p][i]) throw std::runtime_error("sink pieces out of order");
                std::memcpy(in[p][i].data() + off, data, len);
                sinkNext[p][i] += len;
              };
            }
            ch->postRecv(sizes[i], std::move(t));
          }
        }
        driveAll(st);
        for (auto& [p, msgs] : in)
          for (size_t i = 0; i < sizes.size(); ++i)
            if (msgs[i] != bytesOf(p, r, i, sizes[i]))
              throw std::runtime_error(fmt::format("message {} ({} bytes) from rank {} differs", i, sizes[i], p));
        st.boot->barrier();  // nobody tears down while a peer still reads its credit word
      });
      INFO(test::firstError(errors));
      CHECK(test::firstError(errors).empty());
      CHECK(fake.writes() > 1000);     // the 1 MiB messages alone are 261 chunks per pair
      CHECK(fake.liveObjects() == 0);  // queue pairs, queues, registrations, domains and contexts all released
    }
  }
}

TEST_CASE("ibverbs on a simulated device: a receive shorter than the message is an error naming both lengths",
          "[ibverbs][sim]") {
  FakeVerbs fake;
  auto id = boot::createUniqueId();
  std::vector<unsigned char> guard(300, 0xab);
  auto errors = test::runThreads(2, [&](int r) {
    SimRank st = connectSim(id, r, 2, fake.lib());
    transport::Channel& ch = *st.channels.at(1 - r);
    std::vector<unsigned char> data(200, 0x11);
    if (r == 0) {
      ch.postSend(data.data(), 200);
    } else {
      transport::RecvTarget t;
      t.direct = guard.data();
      ch.postRecv(100, std::move(t));
    }
    std::exception_ptr err;
    try {
      driveAll(st);
    } catch (...) {
      err = std::current_exception();
    }
    st.boot->barrier();
    if (err) std::rethrow_exception(err);
  });
  CHECK(errors[0].empty());
  CHECK_THAT(errors[1], Contains("receive of 100 bytes") && Contains("sent 200 bytes") && Contains("rank 0"));
  CHECK(std::all_of(guard.begin(), guard.end(), [](unsigned char b) { return b == 0xab; }));  // nothing written
}

TEST_CASE("ibverbs on a simulated device: a message of the right size tagged for another call is refused",
          "[ibverbs][sim][tag]") {
  // The chunk header carries the call tag (transport.h: RecvTarget::tag): equal tags, or 0 on either side, deliver
  // the bytes; different tags fail the receiver with hocclInvalidUsage naming the peer, nothing past its buffer.
  struct Tags {
    transport::CallTag send, recv;
    bool mismatch;
  };
  const Tags cases[] = {{0x1234abcd, 0x1234abcd, false}, {0x1234abcd, 0, false}, {0, 0x1234abcd, false},
                        {0x1234abcd, 0x1234abce, true}, {7, 0x70001, true}};
  ScopedEnv slots("HOCCL_IB_SLOTS", "2"), slotSize("HOCCL_IB_SLOT_SIZE", "4096");
  for (const Tags& t : cases) {
    for (size_t bytes : {size_t{24}, size_t{3 * 4032 + 5}}) {
      for (bool sink : {false, true}) {
        DYNAMIC_SECTION("tags " << t.send << "/" << t.recv << ", " << bytes << " bytes" << (sink ? ", sink" : "")) {
          FakeVerbs fake;
          auto id = boot::createUniqueId();
          CHECK(test::taggedCase([&](int r) { return connectSim(id, r, 2, fake.lib()); }, bytes, t.send, t.recv, sink,
                                 t.mismatch, "rank 0 (host simhost0") == "");
        }
      }
    }
  }
}

TEST_CASE("ibverbs on a simulated device: a failed write is an error naming peer, device and status",
          "[ibverbs][sim]") {
  FakeVerbs fake;
  auto id = boot::createUniqueId();
  hocclResult_t code = hocclSuccess;
  auto errors = test::runThreads(2, [&](int r) {
    SimRank st = connectSim(id, r, 2, fake.lib());
    st.boot->barrier();
    if (r == 0) {
      fake.failNextWrites(IBV_WC_RETRY_EXC_ERR);
      std::vector<unsigned char> data(10000, 1);
      st.channels.at(1)->postSend(data.data(), data.size());
      try {
        driveAll(st);
      } catch (const Error& e) {
        code = e.code();
        st.boot->barrier();
        throw;
      }
    }
    st.boot->barrier();
  });
  CHECK(code == hocclRemoteError);
  CHECK_THAT(errors[0], Contains("rank 1 (host simhost1") && Contains("fake_rxe0:1") &&
                            Contains("IBV_WC_RETRY_EXC_ERR") && Contains("Try:"));
  CHECK(errors[1].empty());
}

TEST_CASE("ibverbs on a simulated device: one message at a time over a slow link", "[ibverbs][sim]") {
  // Each receive completes while the previous credit write is still in flight: the channel settles it and writes
  // the final count before it goes idle.
  ScopedEnv a("HOCCL_IB_SLOTS", "2"), b("HOCCL_IB_SLOT_SIZE", "4096");
  FakeVerbs fake;
  fake.setLatency(40);
  auto id = boot::createUniqueId();
  auto errors = test::runThreads(2, [&](int r) {
    SimRank st = connectSim(id, r, 2, fake.lib());
    transport::Channel& ch = *st.channels.at(1 - r);
    for (size_t i = 0; i < 40; ++i) {
      const size_t n = 1 + (i * 977) % 20000;
      auto out = bytesOf(r, 1 - r, i, n);
      std::vector<unsigned char> in(n);
      ch.postSend(out.data(), n);
      transport::RecvTarget t;
      t.direct = in.data();
      ch.postRecv(n, std::move(t));
      driveAll(st);
      if (in != bytesOf(1 - r, r, i, n)) throw std::runtime_error(fmt::format("message {} differs", i));
    }
    st.boot->barrier();
  });
  INFO(test::firstError(errors));
  CHECK(test::firstError(errors).empty());
  CHECK(fake.liveObjects() == 0);
}
