// The bootstrap's gather tree (base/boot/tree_shape.h, gather_tree.cc): the shape's index math against a brute-force
// check, all-gathers of random payloads over 1 to 200 ranks (threads of this process around a real root) against a
// reference, and a rank killed in the middle of an exchange named on every other rank, without a hang.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/tree_shape.h"
#include "base/error.h"
#include "base/health.h"
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
