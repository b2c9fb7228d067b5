// The shm shortcuts' prices and crowded hosts (transports/shm/shm_price.h, LinkModel::crowded): the prices by hand,
// their rise with more ranks than cores, the schedules' predictions crowded alike, the model file's new keys, and
// the tuner's choice between the shortcuts and the schedules for given calibrated parameters.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "algo/predict.h"
#include "algo/registry.h"
#include "algo/tuner.h"
#include "base/error.h"
#include "base/wait.h"
#include "topology/link_model.h"
#include "transports/shm/shm_price.h"

using namespace hoccl;
using sched::Coll;

namespace {

transport::CollCall callOf(Coll coll, size_t count) {
  transport::CollCall c;
  c.coll = coll;
  c.count = count;
  c.dtype = hocclFloat;
  c.op = hocclSum;
  return c;
}

// A model with round numbers: hand-off 1 us, copy 5 GB/s through the kernel and 9 GB/s over mappings, reduce 2 GB/s.
topo::LinkModel calibrated(int cores) {
  topo::LinkModel m;
  m.alpha[hocclLinkIntraHost] = 1e-6;
  m.beta[hocclLinkIntraHost] = 4e9;
  m.beta[hocclLinkSelf] = 8e9;
  m.shmHandoff = 1e-6;
  m.shmCopy = 5e9;
  m.shmMappedCopy = 9e9;
  m.shmReduce = 2e9;
  m.cores = cores;
  return m;
}

// What the shm transport offers, priced by shm_price.h as the real shortcuts are (never started here).
class ShmPriced final : public transport::Shortcut {
 public:
  ShmPriced(bool small, int nranks) : small_(small), nranks_(nranks) {}
  const char* name() const override { return small_ ? "small" : "single_copy"; }
  bool canRun(const transport::CollCall& c) const override {
    const size_t bytes = c.count * 4;
    return small_ ? bytes <= 2048 : bytes >= (size_t{256} << 10);
  }
  double predictSeconds(const transport::CollCall& c, const topo::LinkModel& m) const override {
    return small_ ? transport::shm::smallSeconds(c, nranks_, m)
                  : transport::shm::singleCopySeconds(c, nranks_, m, false);
  }
  std::optional<double> predictRegisteredSeconds(const transport::CollCall& c,
                                                 const topo::LinkModel& m) const override {
    if (small_) return std::nullopt;
    return transport::shm::singleCopySeconds(c, nranks_, m, true);
  }
  std::unique_ptr<transport::ShortcutOp> start(const transport::CollCall&) override { return nullptr; }

 private:
  bool small_;
  int nranks_;
};

// What the tuner chooses for an all-reduce of `bytes` on one host of `nranks` ranks.
algo::Choice choiceOn(int nranks, size_t bytes, const topo::LinkModel& m) {
  static std::vector<std::unique_ptr<transport::Shortcut>> kept;  // a choice points at its shortcuts
  const topo::Topology one = topo::fromShape(1, 1, nranks);
  std::vector<std::unique_ptr<transport::Shortcut>> shortcuts;
  shortcuts.push_back(std::make_unique<ShmPriced>(true, nranks));
  shortcuts.push_back(std::make_unique<ShmPriced>(false, nranks));
  const size_t count = bytes / 4;
  sched::CollArgs args{Coll::AllReduce, 0, nranks, count, 0, 1 << 18};
  const algo::Choice c = algo::decide(callOf(Coll::AllReduce, count), args, one, 4, shortcuts, &m);
  for (auto& s : shortcuts) kept.push_back(std::move(s));
  return c;
}

// The name of what the tuner chooses for an all-reduce of `bytes` on one host of `nranks` ranks.
std::string decideOn(int nranks, size_t bytes, const topo::LinkModel& m) { return choiceOn(nranks, bytes, m).name(); }

}  // namespace

TEST_CASE("the shm prices by hand, at a core per rank", "[cost][shm]") {
  const topo::LinkModel m = calibrated(0);
  // small: one hand-off, then every rank reads every payload (8 ranks x 64 B at 8 GB/s).
  CHECK(transport::shm::smallSeconds(callOf(Coll::AllReduce, 16), 8, m) == Approx(1e-6 + 8 * 64 / 8e9));
  // single copy, all-reduce of 2 MiB on 4 ranks: 2 hand-offs, 2 x 3/4 of it crossing at 5 GB/s, 3/4 reduced at 2.
  const double b = 2 << 20;
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::AllReduce, (2 << 20) / 4), 4, m, false) ==
        Approx(2e-6 + 1.5 * b / 5e9 + 0.75 * b / 2e9));
  // all-gather: (p-1) blocks cross, nothing is reduced, and the rank copies its own block at beta[self] (8 GB/s).
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::AllGather, (2 << 20) / 4), 4, m, false) ==
        Approx(2e-6 + 3 * b / 5e9 + b / 8e9));
  // all-to-all: the same bytes.
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::AlltoAll, (2 << 20) / 4), 4, m, false) ==
        Approx(2e-6 + 3 * b / 5e9 + b / 8e9));
  // Registered everywhere: over mappings at 9 GB/s, and the reduction reads the peers' inputs where they lie (no
  // pull): an all-reduce's crossing is its push, a reduce-scatter's nothing, an all-gather's the same.
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::AllReduce, (2 << 20) / 4), 4, m, true) ==
        Approx(2e-6 + 0.75 * b / 9e9 + 0.75 * b / 2e9));
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::ReduceScatter, (2 << 20) / 4), 4, m, true) ==
        Approx(2e-6 + 3 * b / 2e9));
  CHECK(transport::shm::singleCopySeconds(callOf(Coll::AllGather, (2 << 20) / 4), 4, m, true) ==
        Approx(2e-6 + 3 * b / 9e9 + b / 8e9));
  // The derived defaults: hand-off = a quarter of the intra-host latency, copy through the kernel = 1.5 x the
  // intra-host rate and over mappings twice it, reduce = beta[self].
  topo::LinkModel d;
  CHECK(d.handoff() == d.alpha[hocclLinkIntraHost] / 4);
  CHECK(d.kernelCopy() == 1.5 * d.beta[hocclLinkIntraHost]);
  CHECK(d.mappedCopy() == 2 * d.beta[hocclLinkIntraHost]);
  CHECK(d.reduceRate() == d.beta[hocclLinkSelf]);
}

TEST_CASE("with more ranks than cores the shm prices rise as modelled", "[cost][shm]") {
  const transport::CollCall tiny = callOf(Coll::AllReduce, 16);
  const transport::CollCall big = callOf(Coll::AllReduce, (2 << 20) / 4);
  const double b = 2 << 20;
  for (int ranks : {2, 4, 8}) {
    // Unknown cores, or a core per rank: no change.
    CHECK(transport::shm::smallSeconds(tiny, ranks, calibrated(0)) ==
          Approx(transport::shm::smallSeconds(tiny, ranks, calibrated(ranks))));
    CHECK(transport::shm::roundWaitSeconds(ranks, calibrated(ranks)) == 0);
  }
  // 4 ranks on 2 cores: twice the hand-off, copies and reduction; the Share policy: no nap.
  const topo::LinkModel two = calibrated(2);
  CHECK(transport::shm::roundWaitSeconds(4, two) == 0);
  CHECK(transport::shm::smallSeconds(tiny, 4, two) == Approx(2 * (1e-6 + 4 * 64 / 8e9)));
  CHECK(transport::shm::singleCopySeconds(big, 4, two, false) == Approx(2 * (2e-6 + 1.5 * b / 5e9 + 0.75 * b / 2e9)));
  CHECK(transport::shm::singleCopySeconds(big, 4, two, true) == Approx(2 * (2e-6 + 0.75 * b / 9e9 + 0.75 * b / 2e9)));
  // 8 ranks on 2 cores: four times; still the Share policy, no nap.
  CHECK(transport::shm::roundWaitSeconds(8, two) == 0);
  CHECK(transport::shm::smallSeconds(tiny, 8, two) == Approx(4 * (1e-6 + 8 * 64 / 8e9)));
  // 20 ranks on 2 cores: ten times, and the Block policy's nap once per arena round (small 1, single copy 2).
  const double nap = Backoff(WaitPolicy::Block).blockMicros() * 1e-6;
  CHECK(nap > 0);
  CHECK(transport::shm::roundWaitSeconds(20, two) == Approx(nap));
  CHECK(transport::shm::smallSeconds(tiny, 20, two) == Approx(10 * (1e-6 + 20 * 64 / 8e9) + nap));
  CHECK(transport::shm::singleCopySeconds(big, 20, two, false) ==
        Approx(10 * (2e-6 + 1.9 * b / 5e9 + 0.95 * b / 2e9) + 2 * nap));
}

TEST_CASE("a crowded host crowds the schedules' predictions alike", "[cost][shm]") {
  topo::LinkModel m = calibrated(0);
  m.step[hocclLinkIntraHost] = 3e-6;
  m.cores = 2;
  const topo::LinkModel c = m.crowded(8);
  CHECK(c.alpha[hocclLinkIntraHost] == Approx(4e-6));
  CHECK(c.step[hocclLinkIntraHost] == Approx(12e-6));
  CHECK(c.beta[hocclLinkIntraHost] == Approx(1e9));
  CHECK(c.beta[hocclLinkSelf] == Approx(2e9));
  CHECK(c.alpha[hocclLinkInterSwitch] == m.alpha[hocclLinkInterSwitch]);  // the network is not a core's work
  CHECK(c.beta[hocclLinkInterSwitch] == m.beta[hocclLinkInterSwitch]);
  CHECK(c.cores == 0);
  const topo::LinkModel twice = c.crowded(8);  // applied once only
  CHECK(twice.alpha[hocclLinkIntraHost] == c.alpha[hocclLinkIntraHost]);
  CHECK(twice.handoff() == c.handoff());
  // On one host every cost of a schedule is a core's, so the whole prediction takes 4 times as long.
  const topo::Topology one = topo::fromShape(1, 1, 8);
  for (const char* name : {"ring", "direct"}) {
    const algo::Algorithm& alg = algo::byName(name);
    sched::CollArgs args{Coll::AllReduce, 0, 8, size_t{1} << 18, 0, 1 << 18};
    topo::LinkModel free = m;
    free.cores = 0;
    const double alone = algo::predict(alg, args, one, 4, free).seconds;
    CHECK(algo::predict(alg, args, one, 4, m).seconds == Approx(4 * alone).epsilon(1e-9));
    m.cores = 8;  // a core per rank: unchanged
    CHECK(algo::predict(alg, args, one, 4, m).seconds == Approx(alone).epsilon(1e-12));
    m.cores = 2;
  }
  CHECK(algo::maxRanksPerHost(topo::fromCounts({{3, 1}, {2, 5}})) == 5);
}

TEST_CASE("a model file round-trips the shm parameters and the cores", "[cost][shm]") {
  topo::LinkModel m = calibrated(2);
  m.shmHandoff = 0.37e-6;
  m.shmCopy = 1.5e9;
  m.shmMappedCopy = 6.5e9;
  m.shmReduce = 2.25e9;
  const topo::LinkModel back = topo::LinkModel::fromJson(m.toJson("test"), "round trip");
  CHECK(back.shmHandoff == Approx(m.shmHandoff));
  CHECK(back.shmCopy == Approx(m.shmCopy));
  CHECK(back.shmMappedCopy == Approx(m.shmMappedCopy));
  CHECK(back.shmReduce == Approx(m.shmReduce));
  CHECK(back.cores == 2);
  // A file from before: derived values, cores unknown.
  const topo::LinkModel old = topo::LinkModel::fromJson(R"({"latency_us": {"intra-host": 0.7}})", "old");
  CHECK(old.shmHandoff == 0);
  CHECK(old.handoff() == Approx(0.7e-6 / 4));
  CHECK(old.cores == 0);
  // Bad values: a clear error naming the key.
  auto error = [](const char* text) {
    try {
      topo::LinkModel::fromJson(text, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error(R"({"shm": {"copy_GBps": -1}})"), Catch::Contains("shm.copy_GBps"));
  CHECK_THAT(error(R"({"shm": {"mapped_copy_GBps": "fast"}})"), Catch::Contains("shm.mapped_copy_GBps"));
  CHECK_THAT(error(R"({"shm": {"copy": 1}})"), Catch::Contains("unknown key 'copy'"));
  CHECK_THAT(error(R"({"shm": 3})"), Catch::Contains("shm must be an object"));
  CHECK_THAT(error(R"({"cores_per_host": 1.5})"), Catch::Contains("cores_per_host"));
  CHECK_THAT(error(R"({"cores_per_host": -2})"), Catch::Contains("cores_per_host"));
}

TEST_CASE("the tuner picks by the calibrated shm prices and the host's cores", "[cost][shm][tuner]") {
  SECTION("64 B: small at a core per rank and on 8 ranks of 2 cores (Share), a schedule on 20 (Block's naps)") {
    CHECK(decideOn(8, 64, calibrated(0)) == "small");
    CHECK(decideOn(8, 64, calibrated(2)) == "small");
    CHECK(decideOn(20, 64, calibrated(2)) == "direct");
  }
  SECTION("4 ranks, 64 B on 2 cores (Share, no nap): small stays") { CHECK(decideOn(4, 64, calibrated(2)) == "small"); }
  SECTION("2 MiB all-reduce: single copy when its copy and reduction are fast, a schedule when they are slow") {
    topo::LinkModel fast = calibrated(0);
    fast.shmCopy = 40e9;
    fast.shmMappedCopy = 80e9;
    fast.shmReduce = 40e9;
    const algo::Choice f = choiceOn(2, 2 << 20, fast);
    CHECK(f.name() == std::string("single_copy"));
    CHECK(f.ifRegistered == nullptr);      // it runs whatever the buffers: over mappings where it can
    topo::LinkModel slow = calibrated(0);  // copy 5 GB/s, reduce 2 GB/s against an 8 GB/s slot path
    slow.beta[hocclLinkIntraHost] = 8e9;
    slow.beta[hocclLinkSelf] = 8e9;
    slow.shmMappedCopy = 5e9;
    const algo::Choice s = choiceOn(2, 2 << 20, slow);
    CHECK(s.algorithm != nullptr);
    CHECK(s.ifRegistered == nullptr);  // not even over mappings
  }
  SECTION(
      "2 MiB all-reduce: slow through the kernel, fast over mappings: a schedule, single copy where all registered") {
    topo::LinkModel m = calibrated(0);  // the schedules' slot path at 4 GB/s
    m.shmCopy = 1e9;
    m.shmMappedCopy = 40e9;
    m.shmReduce = 40e9;
    const algo::Choice c = choiceOn(2, 2 << 20, m);
    REQUIRE(c.algorithm != nullptr);
    REQUIRE(c.ifRegistered != nullptr);
    CHECK(c.ifRegistered->name() == std::string("single_copy"));
    CHECK(c.registeredSeconds < c.seconds);
    CHECK(choiceOn(2, 512, m).ifRegistered == nullptr);  // out of single copy's range: no condition
  }
}
