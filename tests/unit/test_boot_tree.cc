// The bootstrap's gather tree (base/boot/tree_shape.h, gather_tree.cc): the shape's index math against a brute-force
// check, all-gathers of random payloads over 1 to 200 ranks (threads of this process around a real root) against a
// reference, a rank killed in the middle of an exchange named on every other rank, without a hang, and a rank that
// drops out after joining (before the others join, or while they link the tree; with one id or with a sub-root)
// failing every other rank's init within seconds, naming it, instead of at HOCCL_TIMEOUT.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/tree_shape.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/health.h"
#include "base/socket.h"
#include "raw_rank.h"

using namespace hoccl;
using namespace hoccl::boot;
using test::infoFor;
using Clock = std::chrono::steady_clock;

TEST_CASE("every rank has one place in the gather tree, and every subtree is a contiguous range", "[boot_tree]") {
  for (int fanout : {1, 2, 3, 4, 7}) {
    for (int n = 1; n <= 260; n += (n < 40 ? 1 : 13)) {
      std::vector<int> parentOf(n, -2), depthOf(n, -1);
      std::vector<RankRange> rangeOf(n);
      for (int r = 0; r < n; ++r) {
        TreePlace p = treePlace(n, r, fanout);
        INFO("n " << n << " fanout " << fanout << " rank " << r);
        REQUIRE(p.range.lo == r);
        REQUIRE(p.range.hi > r);
        REQUIRE(p.range.hi <= n);
        REQUIRE(static_cast<int>(p.children.size()) <= fanout);
        parentOf[r] = p.parent;
        depthOf[r] = p.depth;
        rangeOf[r] = p.range;
        // The children's ranges cut [r + 1, hi) into contiguous parts, in order.
        int at = r + 1;
        for (const RankRange& c : p.children) {
          CHECK(c.lo == at);
          CHECK(c.size() >= 1);
          at = c.hi;
        }
        CHECK(at == p.range.hi);
      }
      CHECK(parentOf[0] == -1);
      CHECK(rangeOf[0].hi == n);
      int deepest = 0;
      for (int r = 1; r < n; ++r) {
        const int p = parentOf[r];
        REQUIRE(p >= 0);
        REQUIRE(p < r);
        // Brute force: r lies in its parent's range, and its own range is one of its parent's children.
        CHECK(rangeOf[p].lo < r);
        CHECK(rangeOf[r].hi <= rangeOf[p].hi);
        CHECK(depthOf[r] == depthOf[p] + 1);
        deepest = std::max(deepest, depthOf[r]);
      }
      if (fanout >= 2) {  // about log_fanout(n): each level cuts the rest into `fanout` nearly equal parts
        int bound = 0;
        for (long long reach = 1; reach < n; reach = reach * fanout + 1) ++bound;
        CHECK(deepest <= bound + 1);
      }
    }
  }
}

namespace {

// n Bootstraps as threads of this process on one root.
struct Ranks {
  UniqueId id = createUniqueId();
  std::deque<Health> health;
  std::vector<std::unique_ptr<Bootstrap>> ranks;
  explicit Ranks(int n) : health(n), ranks(n) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([this, r, n] {
        ranks[r] = std::make_unique<Bootstrap>(id, r, n, infoFor(r, 5000 + r, "treehost"), &health[r]);
      });
    for (auto& t : threads) t.join();
  }
};

// The payload of rank r in round k: `bytes` pseudo-random bytes from a seed both the rank and the reference know.
std::vector<char> payload(int r, int k, size_t bytes) {
  std::mt19937 gen(static_cast<unsigned>(r * 7919 + k * 104729 + 17));
  std::vector<char> out(bytes);
  for (char& c : out) c = static_cast<char>(gen());
  return out;
}

}  // namespace

TEST_CASE("all-gathers over the tree deliver every rank's random slot", "[boot_tree]") {
  const int n = GENERATE(1, 2, 3, 7, 64, 200);
  Ranks job(n);
  for (int r = 0; r < n; ++r) {
    REQUIRE(job.ranks[r]);
    // The rank table came over the tree too.
    const auto& table = job.ranks[r]->ranks();
    REQUIRE(static_cast<int>(table.size()) == n);
    for (int q = 0; q < n; ++q) {
      CHECK(table[q].rank == q);
      CHECK(table[q].pid == 5000 + q);
    }
  }
  // Rounds of odd sizes, and empty slots, one after the other on every rank.
  const std::vector<size_t> sizes = {1, 13, 0, 224, 4099};
  std::vector<int> bad(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t bytes = sizes[k];
        std::vector<char> slots(bytes * n, 'x');
        std::vector<char> mine = payload(r, static_cast<int>(k), bytes);
        if (bytes) std::memcpy(slots.data() + bytes * r, mine.data(), bytes);
        try {
          job.ranks[r]->allGather(slots.data(), bytes);
        } catch (const Error&) {
          ++bad[r];
          return;
        }
        for (int q = 0; q < n; ++q) {
          std::vector<char> want = payload(q, static_cast<int>(k), bytes);
          if (bytes && std::memcmp(slots.data() + bytes * q, want.data(), bytes) != 0) ++bad[r];
        }
      }
      job.ranks[r]->barrier();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) CHECK(bad[r] == 0);
  for (int r = 0; r < n; ++r) CHECK_FALSE(job.health[r].failed());
}

TEST_CASE("a rank killed during an exchange is named on every rank, without a hang", "[boot_tree]") {
  // 7 ranks, fanout 4: rank 0's children are 1, 3, 5, 6; rank 3 (an inner rank) has child 4; kill a leaf or it.
  const int n = 7;
  const int victim = GENERATE(3, 6);
  UniqueId id = createUniqueId();
  std::deque<Health> health(n);
  std::vector<std::unique_ptr<Bootstrap>> ranks(n);
  std::unique_ptr<test::RawRank> raw;
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        if (r == victim) raw = std::make_unique<test::RawRank>(id, r, n, infoFor(r, 5000 + r, "treehost"));
        else ranks[r] = std::make_unique<Bootstrap>(id, r, n, infoFor(r, 5000 + r, "treehost"), &health[r]);
      });
    for (auto& t : threads) t.join();
  }
  const std::string victimName = describeRank(infoFor(victim, 5000 + victim, "treehost"));
  std::vector<std::string> errors(n);
  std::vector<double> took(n, 0);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    threads.emplace_back([&, r] {
      try {
        ranks[r]->barrier();
        errors[r] = "(the barrier succeeded)";
      } catch (const Error& e) {
        errors[r] = e.what();
      }
      took[r] = std::chrono::duration<double>(Clock::now() - start).count();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every other rank waits in the exchange now
  raw->crash();
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].find(victimName) != std::string::npos);
    CHECK(errors[r].find("exited or was killed") != std::string::npos);
    CHECK(took[r] < 10.0);
    auto v = ranks[r]->verdict();
    REQUIRE(v);
    CHECK(v->kind == Verdict::Kind::Died);
    CHECK(v->culprit == victim);
    CHECK(health[r].failed());
  }
}

namespace {

// HOCCL_TIMEOUT for one test case, restored after it (params are read from the environment at every use).
struct TimeoutFor {
  std::string before;
  bool had;
  explicit TimeoutFor(const char* seconds) {
    const char* b = std::getenv("HOCCL_TIMEOUT");
    had = b != nullptr;
    if (had) before = b;
    setenv("HOCCL_TIMEOUT", seconds, 1);
  }
  ~TimeoutFor() {
    if (had) setenv("HOCCL_TIMEOUT", before.c_str(), 1);
    else unsetenv("HOCCL_TIMEOUT");
  }
};

// Plays rank `victim` that joins with joinRoot and then drops out: at once (`afterPlan` false: while the root still
// waits for the others), or once the root's plan arrived (while the others link the tree; it never links).
void dropOut(net::Fd root, net::Fd listener, bool afterPlan) {
  if (afterPlan) {
    const net::Deadline d = Clock::now() + std::chrono::seconds(30);
    while (true) {
      RootHeader h{};
      net::readAll(root.get(), &h, sizeof(h), d, "test victim");
      std::vector<char> payload(h.bytes);
      net::readAll(root.get(), payload.data(), payload.size(), d, "test victim");
      if (h.type == kRootPlan) break;
    }
  }
  root.reset();  // no goodbye: a rank whose bootstrap connection broke, or that was killed
  listener.reset();
}

// Runs the ranks of `contacts` (all but the victim) as Bootstraps; returns each one's error and the seconds it took.
struct InitOutcome {
  std::vector<std::string> errors;
  std::vector<double> took;
};
InitOutcome initAll(int n, int victim, const std::function<Contact(int)>& contact) {
  InitOutcome out{std::vector<std::string>(n), std::vector<double>(n, 0)};
  std::deque<Health> health(n);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    threads.emplace_back([&, r] {
      try {
        Bootstrap b(contact(r), r, n, infoFor(r, 7000 + r, "inithost"), &health[r]);
        out.errors[r] = "(init succeeded)";
      } catch (const Error& e) {
        out.errors[r] = e.what();
      }
      out.took[r] = std::chrono::duration<double>(Clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("a rank that drops out after joining fails init on every rank at once, naming it", "[boot_tree]") {
  TimeoutFor timeout("60");  // the others must not wait for it: seconds, not HOCCL_TIMEOUT
  // 7 ranks, fanout 4: rank 3 is the parent of rank 4 (its child connects to its listener, which refuses).
  const int n = 7, victim = 3;
  const bool afterPlan = GENERATE(false, true);
  INFO((afterPlan ? "drops out after its plan, while the others link the tree" : "drops out before the others join"));
  UniqueId id = createUniqueId();
  const RankInfo victimInfo = infoFor(victim, 7000 + victim, "inithost");
  net::Fd listener;
  net::Fd root = test::joinRoot(id, victim, n, victimInfo, &listener);
  std::thread drop;
  if (afterPlan) drop = std::thread(dropOut, std::move(root), std::move(listener), true);
  else dropOut(std::move(root), std::move(listener), false);
  InitOutcome o = initAll(n, victim, [&](int) { return Contact(id); });
  if (drop.joinable()) drop.join();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << " after " << o.took[r] << " s: " << o.errors[r]);
    CHECK(o.errors[r].find(describeRank(victimInfo) + " dropped out during init") != std::string::npos);
    CHECK(o.took[r] < 10.0);
  }
}

TEST_CASE("a rank of a sub-root's share that drops out stops the ranks of every id", "[boot_tree]") {
  TimeoutFor timeout("60");
  // hocclCommInitRankScalable with 2 ids over 4 ranks: ranks 0, 1 join the head root (id 0), ranks 2, 3 the sub-root
  // (id 1, served by this process as rank 2's must be). Rank 3 joins and drops out before rank 2 arrives.
  const int n = 4, victim = 3;
  const UniqueId ids[2] = {createUniqueId(), createUniqueId()};
  const RankInfo victimInfo = infoFor(victim, 7000 + victim, "inithost");
  net::Fd listener;
  dropOut(test::joinRoot(ids[1], victim, n, victimInfo, &listener, shareOf(victim, n, 2)), std::move(listener), false);
  InitOutcome o = initAll(n, victim, [&](int r) {
    const Share s = shareOf(r, n, 2);
    return Contact(ids[s.idIndex], ids[0], s);
  });
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << " after " << o.took[r] << " s: " << o.errors[r]);
    CHECK(o.errors[r].find(describeRank(victimInfo) + " dropped out during init") != std::string::npos);
    CHECK(o.took[r] < 10.0);
  }
}
