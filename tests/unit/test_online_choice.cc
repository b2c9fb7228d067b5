// The online choice's state machine (src/comm/online_choice.h) driven by made-up call times: what each call runs,
// which calls are timed, when the ranks agree, what wins, how a change of the times is followed and what the
// re-checks cost; two rank threads with different local times agree through a real max exchange and run the same
// variant on every call; sameBitsEveryVariant's table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/online_choice.h"

using namespace hoccl;

namespace {

// One rank alone: the agreement leaves the values as they are.
const OnlineChoice::Agree kAlone = [](double*, int) {};

// Runs `calls` calls, each taking timeOf(call index, variant) seconds; returns the variant of each call.
std::vector<int> drive(OnlineChoice& c, int calls, const std::function<double(int, int)>& timeOf,
                       const OnlineChoice::Agree& agree = kAlone) {
  std::vector<int> ran;
  for (int i = 0; i < calls; ++i) {
    c.beforeCall();
    ran.push_back(c.variant());
    c.afterCall(timeOf(i, c.variant()), agree);
  }
  return ran;
}

// Fixed times per variant.
std::function<double(int, int)> fixed(double t0, double t1) {
  return [=](int, int v) { return v == 0 ? t0 : t1; };
}

}  // namespace

TEST_CASE("the online choice runs the pick first, then a block of the runner-up, timing the second half of each run") {
  OnlineChoice c;
  const int start = static_cast<int>(OnlineChoice::kStartAfter), block = OnlineChoice::kBlock;
  std::vector<int> variants;
  std::vector<bool> timed;
  std::vector<int> agreedAfter;
  for (int i = 1; i <= start + block + 4; ++i) {
    c.beforeCall();
    variants.push_back(c.variant());
    timed.push_back(c.timed());
    if (c.afterCall(c.variant() == 0 ? 10e-6 : 40e-6, kAlone)) agreedAfter.push_back(i);
  }
  for (int i = 1; i <= start + block + 4; ++i) {
    CAPTURE(i);
    const bool runnerUp = i >= start && i < start + block;
    CHECK(variants[i - 1] == (runnerUp ? 1 : 0));
    // Timed: the second half of each run of one variant.
    const int runLength = runnerUp ? i - start + 1 : i < start ? i : i - (start + block) + 1;
    CHECK(timed[i - 1] == (runLength > block / 2));
  }
  CHECK(agreedAfter == std::vector<int>{start + block - 1});
  CHECK(c.estimates()[0] == Approx(10e-6));
  CHECK(c.estimates()[1] == Approx(40e-6));
  CHECK(c.winner() == 0);
}

TEST_CASE("a shape called fewer times than kStartAfter only ever runs the tuner's pick") {
  OnlineChoice c;
  const std::vector<int> ran = drive(c, static_cast<int>(OnlineChoice::kStartAfter) - 1, fixed(10, 1));
  CHECK(std::count(ran.begin(), ran.end(), 1) == 0);
  CHECK(c.agreements() == 0);
}

TEST_CASE("the faster variant wins and the loser's blocks cost at most about 2% of the time") {
  // Up to a ratio of 1 + kMaxInterval x kOverheadShare / kBlock (21.5); beyond it the interval's cap holds instead.
  for (auto [t0, t1] : {std::pair{10.0, 40.0}, {40.0, 10.0}, {10.0, 13.0}, {13.0, 10.0}, {1.0, 20.0}}) {
    CAPTURE(t0, t1);
    OnlineChoice c;
    const int calls = 200000;
    const std::vector<int> ran = drive(c, calls, fixed(t0, t1));
    const int fast = t0 < t1 ? 0 : 1;
    CHECK(c.winner() == fast);
    // From the end of the exploration: the extra time the slower variant's calls cost.
    double extra = 0, total = 0;
    for (int i = static_cast<int>(OnlineChoice::kStartAfter) + OnlineChoice::kBlock; i < calls; ++i) {
      const double t = ran[i] == 0 ? t0 : t1;
      total += t;
      extra += t - std::min(t0, t1);
    }
    CHECK(extra / total <= OnlineChoice::kOverheadShare * 1.05);
    CHECK(c.agreements() > 2);  // re-checks kept happening
  }
}

TEST_CASE("a lead within the margin does not replace the tuner's pick; a larger one does") {
  OnlineChoice within, beyond;
  drive(within, 1000, fixed(10, 9.7));  // 3% faster
  CHECK(within.winner() == 0);
  drive(beyond, 1000, fixed(10, 9));  // 10% faster
  CHECK(beyond.winner() == 1);
}

TEST_CASE("a burst of slow calls in the winner's window does not switch: the switch needs a confirmation") {
  // The pick (0) runs at 10 except for a burst at 30 over the calls whose times fill its window before the
  // exploration; the runner-up (1) runs at 12. The first agreement sees 30 against 12; the confirmation's fresh
  // block of the pick sees 10, and the pick stays.
  const int start = static_cast<int>(OnlineChoice::kStartAfter);
  auto times = [&](int i, int v) { return v == 1 ? 12.0 : (i >= start - 12 && i < start - 1 ? 30.0 : 10.0); };
  OnlineChoice c;
  const std::vector<int> ran = drive(c, start + 4 * OnlineChoice::kBlock, times);
  CHECK(c.agreements() == 2);
  CHECK(c.winner() == 0);
  CHECK(std::count(ran.begin(), ran.end(), 1) == 2 * OnlineChoice::kBlock);  // the exploration and the confirmation
  // A lasting change does switch, after the confirmation; the log line between the two agreements says which
  // variant measured faster and when the confirmation ends, not that the slower one wins.
  OnlineChoice d;
  drive(d, start + OnlineChoice::kBlock, fixed(30, 12));
  CHECK(d.agreements() == 1);
  // The exploration's agreement at call 79, the winner's 16 calls, the challenger's block of calls 96-111.
  const int confirmedAt = start + (OnlineChoice::kBlock - 1) + (OnlineChoice::kBlock + 1) + (OnlineChoice::kBlock - 1);
  CHECK(d.describe().find("variant 1 measured faster than variant 0 (12000000.0 us against 30000000.0 us") == 0);
  CHECK(d.describe().find("wins again after call " + std::to_string(confirmedAt)) != std::string::npos);
  drive(d, 3 * OnlineChoice::kBlock, fixed(30, 12));
  CHECK(d.agreements() == 2);
  CHECK(d.winner() == 1);
  CHECK(d.describe().find("variant 1 wins (12000000.0 us against 30000000.0 us") == 0);
}

TEST_CASE("three variants: a block of each other variant in turn, the fastest wins after a confirmation of it alone") {
  const int start = static_cast<int>(OnlineChoice::kStartAfter), block = OnlineChoice::kBlock;
  auto three = [](double t0, double t1, double t2) {
    return [=](int, int v) { return v == 0 ? t0 : v == 1 ? t1 : t2; };
  };
  OnlineChoice c(3);
  CHECK(c.variants() == 3);
  std::vector<int> ran;
  std::vector<int> agreedAfter;
  const auto times = three(30, 20, 12);
  for (int i = 1; i <= start + 4 * block + 2; ++i) {
    c.beforeCall();
    ran.push_back(c.variant());
    if (c.afterCall(times(i, c.variant()), kAlone)) agreedAfter.push_back(i);
  }
  // The exploration: variant 1's block, then variant 2's, one agreement at the end of both.
  for (int i = 1; i < start + 2 * block; ++i) {
    CAPTURE(i);
    CHECK(ran[i - 1] == (i < start ? 0 : i < start + block ? 1 : 2));
  }
  REQUIRE(agreedAfter.size() == 2);
  CHECK(agreedAfter[0] == start + 2 * block - 1);
  // The confirmation: the pick's next kBlock calls, then a block of variant 2 alone (variant 1 lost), then it wins.
  const int confirmFrom = start + 3 * block;
  for (int i = start + 2 * block; i < confirmFrom; ++i) CHECK(ran[i - 1] == 0);
  for (int i = confirmFrom; i < confirmFrom + block; ++i) CHECK(ran[i - 1] == 2);
  CHECK(agreedAfter[1] == confirmFrom + block - 1);
  CHECK(c.winner() == 2);
  CHECK(c.estimates()[2] == Approx(12));
  CHECK(c.describe().find("variant 2 wins (12000000.0 us against ") == 0);
  // Afterwards the winner runs, and a re-check runs a block of each of the other two.
  drive(c, 20000, three(30, 20, 12));
  CHECK(c.winner() == 2);
  // The middle variant wins where it is fastest; a third variant slower than the pick never wins.
  OnlineChoice middle(3), slow(3);
  drive(middle, 1000, three(30, 12, 20));
  CHECK(middle.winner() == 1);
  drive(slow, 1000, three(10, 30, 40));
  CHECK(slow.winner() == 0);
  CHECK(slow.estimates()[1] == Approx(30));
  CHECK(slow.estimates()[2] == Approx(40));
  // The re-checks of a 3-variant choice cost about kOverheadShare as well: two blocks per interval.
  OnlineChoice cost(3);
  const std::vector<int> all = drive(cost, 40000, three(10, 13, 11));
  const double extra = 3.0 * std::count(all.begin(), all.end(), 1) + 1.0 * std::count(all.begin(), all.end(), 2);
  CHECK(extra / (10.0 * all.size()) < 2 * OnlineChoice::kOverheadShare);
  CHECK(std::count(all.begin(), all.end(), 2) > 0);
  // Out-of-range counts are clamped.
  CHECK(OnlineChoice(1).variants() == 2);
  CHECK(OnlineChoice(7).variants() == OnlineChoice::kMaxVariants);
}

TEST_CASE("the re-check interval keeps the loser's cost bounded and stays within its limits") {
  const int explored = static_cast<int>(OnlineChoice::kStartAfter) + OnlineChoice::kBlock - 1;
  // Interval: (16 x (slow / fast - 1) + 8 settling calls) / 0.02.
  OnlineChoice close, far, twice;
  drive(close, explored, fixed(10, 10.2));  // 2% apart: (0.32 + 8) / 0.02 = 416 calls
  CHECK(close.nextCheck() == close.calls() + 416);
  drive(far, explored, fixed(1, 1e6));  // a million times slower: the most calls between re-checks
  CHECK(far.nextCheck() == far.calls() + OnlineChoice::kMaxInterval);
  drive(twice, explored, fixed(10, 20));  // twice as slow: (16 + 8) / 0.02 = 1200 calls
  CHECK(twice.nextCheck() == twice.calls() + 1200);
}

TEST_CASE("the choice follows a change of the times in both directions") {
  // Near cores: the ring (0) 10, the single copy (1) 20; from call 2000 far cores: the ring 60; from call 9000 near.
  auto times = [](int i, int v) {
    if (v == 1) return 20.0;
    return i >= 2000 && i < 9000 ? 60.0 : 10.0;
  };
  OnlineChoice c;
  const std::vector<int> ran = drive(c, 14000, times);
  CHECK(ran[1990] == 0);
  auto settled = [&](int i, int v) { return ran[i] == v && ran[i + 1] == v && ran[i + 60] == v; };
  int switchedAt = -1, backAt = -1;
  for (int i = 2000; i < 13900 && backAt < 0; ++i) {
    if (switchedAt < 0 && settled(i, 1)) switchedAt = i;
    if (switchedAt >= 0 && i >= 9000 && settled(i, 0)) backAt = i;
  }
  CAPTURE(switchedAt, backAt);
  // Within one re-check interval and the confirmation: (16 x (20/10 - 1) + 8) / 0.02 = 1200 calls near,
  // (16 x (60/20 - 1) + 8) / 0.02 = 2000 calls far.
  CHECK(switchedAt >= 2000);
  CHECK(switchedAt <= 2000 + 1200 + 3 * OnlineChoice::kBlock + 1);
  CHECK(backAt >= 9000);
  CHECK(backAt <= 9000 + 2000 + 3 * OnlineChoice::kBlock + 1);
  CHECK(ran[13990] == 0);
}

TEST_CASE("a variant no rank timed keeps the current winner") {
  OnlineChoice c;
  // The agreement hands back no estimate for the runner-up (as when no rank had a timed call of it).
  drive(c, static_cast<int>(OnlineChoice::kStartAfter) + OnlineChoice::kBlock, fixed(10, 1),
        [](double* v, int) { v[1] = 0; });
  CHECK(c.agreements() == 1);
  CHECK(c.winner() == 0);
}

TEST_CASE("two ranks with different times agree on the slowest rank's medians and run the same variants") {
  // A max exchange between two threads, as the small shortcut's all-reduce gives between processes.
  std::mutex m;
  std::condition_variable cv;
  double posted[2][2][2] = {};  // [generation parity][rank][value]: a rank that runs ahead posts into the other half
  int arrived = 0, generation = 0;
  auto agreeAs = [&](int rank) {
    return OnlineChoice::Agree([&, rank](double* v, int n) {
      std::unique_lock<std::mutex> lock(m);
      const int gen = generation;
      double(&slot)[2][2] = posted[gen % 2];
      for (int k = 0; k < n; ++k) slot[rank][k] = v[k];
      if (++arrived == 2) {
        arrived = 0;
        ++generation;
        cv.notify_all();
      } else {
        cv.wait(lock, [&] { return generation != gen; });
      }
      for (int k = 0; k < n; ++k) v[k] = std::max(slot[0][k], slot[1][k]);
    });
  };
  const int calls = 20000;
  std::vector<int> ran[2];
  double estimates[2][2] = {};
  int winners[2] = {-1, -1};  // Catch2's assertions are for the main thread: checked after the join
  auto rank = [&](int r) {
    OnlineChoice c;
    std::mt19937 rng(r + 1);
    std::uniform_real_distribution<double> noise(0.8, 1.25);
    // Rank 0 sees the ring (0) at 10 and the single copy (1) at 5; rank 1 the ring at 6 and the single copy at 12:
    // the slowest rank's view is the ring 10 and the single copy 12, so the ring must win on both.
    auto times = [&](int, int v) { return (r == 0 ? (v == 0 ? 10.0 : 5.0) : (v == 0 ? 6.0 : 12.0)) * noise(rng); };
    ran[r] = drive(c, calls, times, agreeAs(r));
    estimates[r][0] = c.estimates()[0];
    estimates[r][1] = c.estimates()[1];
    winners[r] = c.winner();
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  CHECK(winners[0] == 0);
  CHECK(winners[1] == 0);
  CHECK(ran[0] == ran[1]);
  CHECK(estimates[0][0] == estimates[1][0]);
  CHECK(estimates[0][1] == estimates[1][1]);
}

TEST_CASE("sameBitsEveryVariant: data movement, min/max, integers and two-rank sums only") {
  struct Row {
    Coll coll;
    hocclDataType_t dtype;
    hocclRedOp_t op;
    int nranks;
    bool same;
  };
  const Row rows[] = {
      {Coll::AllGather, hocclFloat, hocclSum, 7, true},      {Coll::Broadcast, hocclHalf, hocclSum, 3, true},
      {Coll::AlltoAll, hocclDouble, hocclProd, 5, true},     {Coll::AllReduce, hocclFloat, hocclMax, 5, true},
      {Coll::ReduceScatter, hocclBfloat16, hocclMin, 4, true}, {Coll::AllReduce, hocclInt32, hocclSum, 5, true},
      {Coll::AllReduce, hocclUint8, hocclProd, 3, true},     {Coll::AllReduce, hocclFloat, hocclSum, 2, true},
      {Coll::ReduceScatter, hocclHalf, hocclProd, 2, true},  {Coll::AllReduce, hocclFloat, hocclSum, 3, false},
      {Coll::Reduce, hocclDouble, hocclSum, 4, false},       {Coll::AllReduce, hocclFloat, hocclAvg, 2, false},
      {Coll::AllReduce, hocclInt64, hocclAvg, 2, false},
  };
  for (const Row& r : rows) {
    CAPTURE(collName(r.coll), static_cast<int>(r.dtype), static_cast<int>(r.op), r.nranks);
    CHECK(sameBitsEveryVariant(r.coll, r.dtype, r.op, r.nranks) == r.same);
  }
}
