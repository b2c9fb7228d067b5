// Cost model: hand-computed alpha-beta cases (one message, NIC sharing, spine sharing), error detection, parameters,
// and the tuner's choice between the flat ring and HO-Ring.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>

#include "algo/ho_ring.h"
#include "algo/ring.h"
#include "algo/tuner.h"
#include "base/error.h"
#include "sched/cost_model.h"
#include "sched/fast_model.h"
#include "sched/fresh_data.h"
#include "algo/predict.h"
#include "algo/registry.h"

using namespace hoccl;
using sched::Coll;

namespace {

topo::LinkModel simpleModel() {
  topo::LinkModel m;
  for (int c = 0; c < hocclNumLinkClasses; ++c) m.alpha[c] = 10e-6;
  m.beta[hocclLinkSelf] = 10e9;
  m.beta[hocclLinkIntraHost] = 4e9;
  m.beta[hocclLinkIntraSwitch] = 1e9;
  m.beta[hocclLinkInterSwitch] = 1e9;
  m.nic = 1e9;
  m.spine = 0.125e9;
  return m;
}

std::vector<sched::Schedule> empty(int n) { return std::vector<sched::Schedule>(n); }

std::vector<sched::Schedule> allOf(sched::Schedule (*gen)(const sched::CollArgs&, const topo::Topology&),
                                   sched::CollArgs args, const topo::Topology& t) {
  std::vector<sched::Schedule> s;
  for (int r = 0; r < t.nranks; ++r) {
    args.rank = r;
    s.push_back(gen(args, t));
  }
  return s;
}

}  // namespace

TEST_CASE("one message costs alpha + bytes/beta of its class", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);  // ranks 0,1 host 0; 2,3 host 1 (switch 0); 4..7 switch 1
  auto m = simpleModel();
  for (auto [peer, cls] :
       {std::pair{1, hocclLinkIntraHost}, std::pair{2, hocclLinkIntraSwitch}, std::pair{4, hocclLinkInterSwitch}}) {
    auto s = empty(8);
    s[0].steps.push_back({{sched::send(peer, sched::kInput, 0, 1000000)}});
    s[peer].steps.push_back({{sched::recv(0, sched::kOutput, 0, 1000000)}});
    auto p = topo::predict(s, t, 4, m);
    double beta = cls == hocclLinkInterSwitch ? m.spine : m.beta[cls];
    CHECK(p.seconds == Approx(m.alpha[cls] + 4e6 / beta).epsilon(1e-9));
    CHECK(p.bytes[cls] == 4e6);
    CHECK(p.messages == 1);
  }
}

TEST_CASE("the per-step cost adds to every message of its class, in both simulators", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  auto m = simpleModel();
  auto withStep = m;
  withStep.step[hocclLinkIntraHost] = 30e-6;
  withStep.step[hocclLinkInterSwitch] = 1.5e-3;
  // One message: alpha + step + bytes / beta.
  for (auto [peer, cls] : {std::pair{1, hocclLinkIntraHost}, std::pair{4, hocclLinkInterSwitch}}) {
    auto s = empty(8);
    s[0].steps.push_back({{sched::send(peer, sched::kInput, 0, 1000000)}});
    s[peer].steps.push_back({{sched::recv(0, sched::kOutput, 0, 1000000)}});
    double beta = cls == hocclLinkInterSwitch ? m.spine : m.beta[cls];
    CHECK(topo::predict(s, t, 4, withStep).seconds ==
          Approx(m.alpha[cls] + withStep.step[cls] + 4e6 / beta).epsilon(1e-9));
  }
  // The flat ring on 2x2x2: 14 steps, each with a message across the spine (ranks 3 -> 4 and 7 -> 0), so every
  // step is 1.5 ms longer, in the reference and in the fast model alike.
  sched::CollArgs args{Coll::AllReduce, 0, 8, 1u << 16, 0, 0};
  auto ring = allOf(algo::ringSchedule, args, t);
  const double plain = topo::predict(ring, t, 4, m).seconds, stepped = topo::predict(ring, t, 4, withStep).seconds;
  CHECK(stepped - plain == Approx(14 * 1.5e-3).epsilon(0.01));
  auto gen = [&](int r) {
    sched::CollArgs each = args;
    each.rank = r;
    return algo::ringSchedule(each, t);
  };
  topo::FastOptions o;
  const double fastStepped = topo::predictFast(gen, t, 4, withStep, o).seconds;
  CHECK(fastStepped == Approx(stepped).epsilon(0.01));
}

TEST_CASE("a step's local work delays its intra-host messages (one core copies both), not its network ones", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  auto m = simpleModel();
  const size_t local = 2000000, sent = 1000000;  // elements of 4 B: 8 MB copied locally, 4 MB sent
  const double copy = m.alpha[hocclLinkSelf] + 4.0 * local / m.beta[hocclLinkSelf];
  for (auto [peer, cls] : {std::pair{1, hocclLinkIntraHost}, std::pair{2, hocclLinkIntraSwitch}}) {
    auto s = empty(8);
    s[0].steps.push_back(
        {{sched::copy(sched::kInput, 0, sched::kOutput, 0, local), sched::send(peer, sched::kInput, 0, sent)}});
    s[peer].steps.push_back({{sched::recv(0, sched::kOutput, 0, sent)}});
    const double message = m.alpha[cls] + 4.0 * sent / m.beta[cls];
    const double expected = cls == hocclLinkIntraHost ? copy + message : std::max(copy, message);
    CHECK(topo::predict(s, t, 4, m).seconds == Approx(expected).epsilon(1e-9));
    // The fast model, from the same schedules, agrees.
    auto gen = [&s](int r) { return s[static_cast<size_t>(r)]; };
    topo::FastOptions o;
    CHECK(topo::predictFast(gen, t, 4, m, o).seconds == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("a send of data its rank wrote the step before is found, and nothing else", "[cost][cache]") {
  using sched::kInput;
  using sched::kOutput;
  using sched::kScratch;
  const sched::Step wrote = {
      {sched::recv(1, kOutput, 100, 50), sched::copy(kInput, 0, kScratch, 0, 10), sched::send(1, kInput, 0, 50)}};
  CHECK(sched::sendsFreshData(&wrote, sched::send(1, kOutput, 100, 50)));    // exactly what was received
  CHECK(sched::sendsFreshData(&wrote, sched::send(1, kOutput, 120, 30)));    // inside it
  CHECK(sched::sendsFreshData(&wrote, sched::send(1, kScratch, 0, 10)));     // what a copy wrote
  CHECK(!sched::sendsFreshData(&wrote, sched::send(1, kOutput, 90, 20)));    // starts before it
  CHECK(!sched::sendsFreshData(&wrote, sched::send(1, kOutput, 140, 11)));   // runs past its end
  CHECK(!sched::sendsFreshData(&wrote, sched::send(1, kInput, 0, 50)));      // only sent there, not written
  CHECK(!sched::sendsFreshData(nullptr, sched::send(1, kOutput, 100, 50)));  // the first step
  CHECK(!sched::sendsFreshData(&wrote, sched::recv(1, kOutput, 100, 50)));   // not a send
  const sched::Step reduced = {
      {sched::recvReduce(1, kInput, 0, kOutput, 0, 64), sched::reduceLocal(kInput, 0, kScratch, 64, 8)}};
  CHECK(sched::sendsFreshData(&reduced, sched::send(1, kOutput, 0, 64)));
  CHECK(sched::sendsFreshData(&reduced, sched::send(1, kScratch, 64, 8)));
}

TEST_CASE("data a rank wrote the step before moves at the cached rate when it fits, in both simulators",
          "[cost][cache]") {
  const topo::Topology t = topo::fromShape(1, 1, 2);
  topo::LinkModel m = simpleModel();
  m.cacheBytes = 1 << 20;
  m.cacheGain = 1.5;
  const double alpha = m.alpha[hocclLinkIntraHost], beta = m.beta[hocclLinkIntraHost];
  // Rank 1 receives n floats in step 0 and sends them back in step 1; then it sends its input (not written by it),
  // then in step 3 the data of step 1's receive again (written two steps before).
  auto schedules = [](size_t n) {
    auto s = empty(2);
    s[0].steps = {{{sched::send(1, sched::kInput, 0, n)}},
                  {{sched::recv(1, sched::kOutput, 0, n)}},
                  {{sched::recv(1, sched::kScratch, 0, n)}},
                  {{sched::recv(1, sched::kScratch, 0, n)}}};
    s[1].steps = {{{sched::recv(0, sched::kOutput, 0, n)}},
                  {{sched::send(0, sched::kOutput, 0, n)}},
                  {{sched::send(0, sched::kInput, 0, n)}},
                  {{sched::send(0, sched::kOutput, 0, n)}}};
    return s;
  };
  auto both = [&](const std::vector<sched::Schedule>& s, const topo::LinkModel& model) {
    auto gen = [&s](int r) { return s[static_cast<size_t>(r)]; };
    topo::FastOptions o;
    o.reps = topo::Representatives::All;
    return std::pair{topo::predict(s, t, 4, model).seconds, topo::predictFast(gen, t, 4, model, o).seconds};
  };
  // 64 Ki floats (256 KiB): 4 x 256 KiB fit the 1 MiB cache, so step 1 moves at 1.5x.
  const size_t small = size_t{1} << 16;
  const double bytes = 4.0 * small;
  const double cached = 4 * (alpha + bytes / beta) - bytes / beta + bytes / (1.5 * beta);
  auto [ref, fast] = both(schedules(small), m);
  CHECK(ref == Approx(cached).epsilon(1e-9));
  CHECK(fast == Approx(cached).epsilon(1e-6));
  CHECK(topo::predict(schedules(small), t, 4, m).bytes[hocclLinkIntraHost] == 4 * bytes);  // real bytes counted
  // One float more: 4 x the message exceeds the cache, every message at the link's rate.
  const size_t large = small + 1;
  const double plain = 4 * (alpha + 4.0 * large / beta);
  std::tie(ref, fast) = both(schedules(large), m);
  CHECK(ref == Approx(plain).epsilon(1e-9));
  CHECK(fast == Approx(plain).epsilon(1e-6));
  // No cache size (the default model): no cache term.
  topo::LinkModel none = m;
  none.cacheBytes = 0;
  std::tie(ref, fast) = both(schedules(small), none);
  CHECK(ref == Approx(4 * (alpha + bytes / beta)).epsilon(1e-9));
  // Ranks sharing a core share its cache: two ranks per core halve it (256 KiB x 4 no longer fits 512 KiB).
  topo::LinkModel shared = m;
  shared.cores = 1;
  const topo::LinkModel crowded = shared.crowded(2);
  CHECK(crowded.cacheBytes == Approx(512 * 1024));
  CHECK(crowded.streamedBytes(bytes, hocclLinkIntraHost, true) == bytes);
  CHECK(crowded.streamedBytes(bytes / 2, hocclLinkIntraHost, true) == Approx(bytes / 3));
  // Only intra-host messages, only fresh data.
  CHECK(m.streamedBytes(bytes, hocclLinkIntraSwitch, true) == bytes);
  CHECK(m.streamedBytes(bytes, hocclLinkIntraHost, false) == bytes);
  // A call whose buffers take at most half the last-level cache runs from it: forCall turns the term off.
  m.llcBytes = 32 << 20;
  CHECK(m.forCall(16 << 20).cacheBytes == 0);
  CHECK(m.forCall((16 << 20) + 1).cacheBytes == m.cacheBytes);
  topo::LinkModel noLlc = m;
  noLlc.llcBytes = 0;
  CHECK(noLlc.forCall(1e12).cacheBytes == 0);
}

TEST_CASE("the cache term moves a large one-host all-reduce to HO-Ring in cache-sized chunks", "[cost][tuner][cache]") {
  // 2 ranks on 2 cores with 1 MiB of L2 each and 32 MiB of L3 (this build machine). 16 MiB of floats: 64 MiB of
  // buffers, over half the L3. The ring's blocks (8 MiB) leave the cache before they are sent on; HO-Ring's parts at
  // 256 KiB chunks (128 KiB) do not, at 1 MiB chunks (512 KiB: 2 MiB with the room streamedBytes asks) they do.
  const topo::Topology t = topo::fromShape(1, 1, 2);
  topo::LinkModel m;
  m.cores = 2;
  m.cacheBytes = 1 << 20;
  m.llcBytes = 32 << 20;
  const auto candidates = std::vector<const algo::Algorithm*>{&algo::byName("ring"), &algo::byName("ho_ring")};
  sched::CollArgs args{Coll::AllReduce, 0, 2, (16u << 20) / 4, 0, 0};
  const algo::Choice choice = algo::tune(args, t, 4, candidates, &m, true);
  REQUIRE(choice.algorithm);
  CHECK(std::string(choice.algorithm->name) == "ho_ring");
  CHECK(choice.chunkCount * 4 == (256u << 10));
  // Independently: HO-Ring at 256 KiB chunks moves half of its bytes (the all-gather half: the part reduced the
  // step before) at 1.5x; the ring moves all of them at the link's rate.
  sched::CollArgs at256 = args;
  at256.chunkCount = (256u << 10) / 4;
  const double ho = algo::predict(algo::byName("ho_ring"), at256, t, 4, m).seconds;
  const double ring = algo::predict(algo::byName("ring"), args, t, 4, m).seconds;
  topo::LinkModel none = m;
  none.cacheBytes = 0;
  const double hoNone = algo::predict(algo::byName("ho_ring"), at256, t, 4, none).seconds;
  CHECK(ring == Approx(algo::predict(algo::byName("ring"), args, t, 4, none).seconds));
  const double flow = 16.0 * (1 << 20) / m.beta[hocclLinkIntraHost];  // 8 MiB each way
  CHECK(hoNone - ho == Approx(flow / 2 * (1 - 1 / 1.5)).epsilon(0.02));
  // 4 MiB (16 MiB of buffers, half the L3): no cache term, the same choice as without cache sizes.
  sched::CollArgs small = args;
  small.count = (4u << 20) / 4;
  const algo::Choice withCache = algo::tune(small, t, 4, candidates, &m, true);
  const algo::Choice without = algo::tune(small, t, 4, candidates, &none, true);
  CHECK(withCache.algorithm == without.algorithm);
  CHECK(withCache.chunkCount == without.chunkCount);
  CHECK(withCache.seconds == Approx(without.seconds));
}

TEST_CASE("the cache gain is fitted back from a ratio predicted with it, and clamped outside its range",
          "[cost][cache][calibrate]") {
  // What hoccl-model calibrate does with its measurement: HO-Ring at 256 KiB chunks against the ring, 16 MiB on 2
  // ranks with this machine's caches (the case above), and 8 MiB on 4 ranks on 2 cores (crowded: half the L2 each).
  for (int ranks : {2, 4}) {
    const topo::Topology t = topo::fromShape(1, 1, ranks);
    topo::LinkModel m;
    m.cores = 2;
    m.cacheBytes = 1 << 20;
    m.llcBytes = 32 << 20;
    sched::CollArgs ring{Coll::AllReduce, 0, ranks, (32u << 20) / 4 / static_cast<size_t>(ranks), 0, 0};
    sched::CollArgs ho = ring;
    ho.chunkCount = (256u << 10) / 4;
    const algo::CachePair pair{&algo::byName("ho_ring"), ho, &algo::byName("ring"), ring};
    auto ratioAt = [&](double gain) {
      topo::LinkModel g = m;
      g.cacheGain = gain;
      return algo::predict(*pair.a, ho, t, 4, g).seconds / algo::predict(*pair.b, ring, t, 4, g).seconds;
    };
    CAPTURE(ranks);
    // The term applies here (else nothing could be fitted): the ratio falls as the gain grows.
    REQUIRE(ratioAt(2.0) < ratioAt(1.0) * 0.99);
    for (double gain : {1.1, 1.5, 1.8, 2.6}) {
      CAPTURE(gain);
      CHECK(algo::cacheRatio(pair, t, 4, m, gain) == Approx(ratioAt(gain)));
      CHECK(algo::fitCacheGain(ratioAt(gain), pair, t, 4, m) == Approx(gain).epsilon(1e-6));
    }
    CHECK(algo::fitCacheGain(ratioAt(1.0) * 1.2, pair, t, 4, m) == 1.0);  // slower than even no gain predicts
    CHECK(algo::fitCacheGain(ratioAt(3.0) * 0.8, pair, t, 4, m) == 3.0);  // faster than the largest gain predicts
    CHECK(algo::fitCacheGain(ratioAt(1.3), pair, t, 4, m, 1.5, 2.5) == 1.5);  // another range's ends
  }
}

TEST_CASE("the tuner chooses the chunk by prediction unless it is given", "[cost][tuner]") {
  algo::Algorithm ho{"ho_ring", [](Coll) { return true; }, algo::hoRingApplicable, algo::hoRingSchedule};
  const topo::Topology t = topo::fromShape(2, 2, 2);
  sched::CollArgs args{Coll::AllReduce, 0, 8, 16u << 20, 0, (1u << 20) / 4};  // 64 MiB of floats, 1 MiB chunk
  // Independently: the default chunk (the first of kChunkChoicesBytes) unless another's reference prediction is
  // more than kChunkMargin lower; among those, a later one must be more than 1% faster (as in the tuner).
  auto bestChunk = [&](const topo::LinkModel& m) {
    size_t best = 0;
    double seconds = 0, atDefault = 0;
    for (size_t bytes : algo::kChunkChoicesBytes) {
      sched::CollArgs a = args;
      a.chunkCount = bytes / 4;
      const double s = algo::predictAlgorithm(ho, a, t, 4, m).seconds;
      if (!best) atDefault = s;
      if (best && s >= atDefault * (1 - algo::kChunkMargin)) continue;
      if (!best || s < seconds * 0.99) best = a.chunkCount, seconds = s;
    }
    return std::pair{best, seconds};
  };
  topo::LinkModel cheap = simpleModel(), costly = simpleModel();
  for (int c = hocclLinkIntraHost; c < hocclNumLinkClasses; ++c) costly.step[c] = 20e-3;
  for (const topo::LinkModel* m : {&cheap, &costly}) {
    const auto [chunk, seconds] = bestChunk(*m);
    const algo::Choice choice = algo::tune(args, t, 4, {&ho}, m, true);
    INFO("expected chunk " << chunk * 4 << " B, chosen " << choice.chunkCount * 4 << " B");
    CHECK(choice.chunkCount == chunk);
    CHECK(choice.seconds == Approx(seconds));
    // Without choosing, the given chunk is used.
    CHECK(algo::tune(args, t, 4, {&ho}, m, false).chunkCount == args.chunkCount);
  }
  // A large per-step cost makes fewer, larger chunks pay: the choice moves up.
  CHECK(algo::tune(args, t, 4, {&ho}, &costly, true).chunkCount >
        algo::tune(args, t, 4, {&ho}, &cheap, true).chunkCount);
  // A chunk predicted faster than the default by less than the margin does not replace it: with a per-step cost
  // that makes the smallest chunks a little dearer, 256 KiB still beats 1 MiB, but by less than kChunkMargin.
  {
    const size_t mib = (1u << 20) / 4;
    sched::CollArgs oneMiB = args;
    oneMiB.count = mib;  // 1 MiB: 1 MiB chunks are one chunk, 256 KiB four
    std::map<size_t, double> at;
    for (size_t bytes : algo::kChunkChoicesBytes) {
      sched::CollArgs a = oneMiB;
      a.chunkCount = bytes / 4;
      at[bytes] = algo::predictAlgorithm(ho, a, t, 4, cheap).seconds;
    }
    INFO("1 MiB: " << at[1u << 20] << " s with one chunk, " << at[256u << 10] << " s with 256 KiB chunks");
    const size_t chosen = algo::tune(oneMiB, t, 4, {&ho}, &cheap, true).chunkCount;
    CHECK(at[256u << 10] >= at[1u << 20] * (1 - algo::kChunkMargin));  // the case this block is about
    if (at[256u << 10] < at[1u << 20] * (1 - algo::kChunkMargin)) CHECK(chosen != mib);
    else CHECK(chosen == mib);
    // Pipelining pays on the simple model's 8x slower spine: the smaller chunk is predicted faster at all.
    CHECK(at[256u << 10] < at[1u << 20]);
  }
  // The ring's all-reduce does not depend on the chunk: it is priced once, at the given chunk.
  CHECK(!algo::chunkMatters(algo::byName("ring"), Coll::AllReduce));
  CHECK(algo::chunkMatters(algo::byName("ring"), Coll::Broadcast));
  CHECK(algo::chunkMatters(algo::byName("ho_ring"), Coll::AllReduce));
}

TEST_CASE("a shaped uplink's burst: idle spine time refills the bucket, back-to-back calls", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  auto m = simpleModel();  // spine 0.125 GB/s, intra-switch and NIC 1 GB/s
  auto shaped = m;
  shaped.spineBurst = 1e6;
  // Rank 0 copies 10 MB locally (spine idle), then sends 4 MB to rank 4 across the spine.
  auto s = empty(8);
  s[0].steps.push_back({{sched::copy(0, 0, 1, 0, 2500000)}});
  s[0].steps.push_back({{sched::send(4, 1, 0, 1000000)}});
  s[4].steps.push_back({{sched::recv(0, 1, 0, 1000000)}});
  const double copy = 10e-6 + 1e7 / m.beta[hocclLinkSelf], alpha = 10e-6, bytes = 4e6;
  // Unshaped: the message flows at the spine rate.
  CHECK(topo::predict(s, t, 4, m).seconds == Approx(copy + alpha + bytes / m.spine).epsilon(1e-9));
  // Shaped, back to back: the previous call left the bucket empty (its message outlasted the burst); the copy and
  // the alpha refill it at the spine rate; the message then runs at the intra-switch rate (the NIC allows the same)
  // and drains the bucket at 1 - 0.125 GB/s until it is dry, and the rest flows at the spine rate.
  const double level = m.spine * (copy + alpha);
  const double fast = m.beta[hocclLinkIntraSwitch], dry = level / (fast - m.spine);
  const double expected = copy + alpha + dry + (bytes - fast * dry) / m.spine;
  const double shapedTime = topo::predict(s, t, 4, shaped).seconds;
  CHECK(shapedTime == Approx(expected).epsilon(1e-6));
  CHECK(shapedTime < topo::predict(s, t, 4, m).seconds);
  // A burst larger than the idle time can refill changes nothing more (the bucket never fills between calls).
  shaped.spineBurst = 10e6;
  CHECK(topo::predict(s, t, 4, shaped).seconds == Approx(expected).epsilon(1e-6));
  // HO-Ring on 2x2x2: the burst shortens the call, but back to back no call beats the spine's steady rate.
  sched::CollArgs args{Coll::AllReduce, 0, 8, (1u << 20) / 4, 0, (1u << 20) / 4};
  auto ho = allOf(algo::hoRingSchedule, args, t);
  shaped.spineBurst = 250e3;
  const auto plain = topo::predict(ho, t, 4, m), burst = topo::predict(ho, t, 4, shaped);
  const double perUplink = plain.bytes[hocclLinkInterSwitch] / 2;  // 2 switches, symmetric
  INFO("HO-Ring 1 MiB: " << plain.seconds << " s unshaped, " << burst.seconds << " s with a 250 kB burst; spine "
                         << perUplink / m.spine << " s");
  CHECK(burst.seconds < plain.seconds);
  CHECK(burst.seconds >= perUplink / m.spine * 0.99);  // within the 1% the levels may still move
  // The model file keeps it.
  CHECK(topo::LinkModel::fromJson(shaped.toJson("test"), "test").spineBurst == 250e3);
  CHECK_THROWS_AS(topo::LinkModel::fromJson(R"({"spine_burst_bytes": -1})", "test"), Error);
}

TEST_CASE("flows share a host NIC and a switch uplink", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  auto m = simpleModel();
  // Ranks 0 and 1 (host 0) send to host 1 at the same time: they share host 0's NIC.
  auto s = empty(8);
  s[0].steps.push_back({{sched::send(2, 0, 0, 250000)}});
  s[1].steps.push_back({{sched::send(3, 0, 0, 250000)}});
  s[2].steps.push_back({{sched::recv(0, 1, 0, 250000)}});
  s[3].steps.push_back({{sched::recv(1, 1, 0, 250000)}});
  CHECK(topo::predict(s, t, 4, m).seconds == Approx(10e-6 + 2e6 / m.nic).epsilon(1e-9));
  // Hosts 0 and 1 of switch 0 each send to switch 1: different NICs, one uplink.
  s = empty(8);
  s[0].steps.push_back({{sched::send(4, 0, 0, 250000)}});
  s[2].steps.push_back({{sched::send(6, 0, 0, 250000)}});
  s[4].steps.push_back({{sched::recv(0, 1, 0, 250000)}});
  s[6].steps.push_back({{sched::recv(2, 1, 0, 250000)}});
  CHECK(topo::predict(s, t, 4, m).seconds == Approx(10e-6 + 2e6 / m.spine).epsilon(1e-9));
  // Opposite directions do not share.
  s = empty(8);
  s[0].steps.push_back({{sched::send(4, 0, 0, 250000), sched::recv(4, 1, 0, 250000)}});
  s[4].steps.push_back({{sched::send(0, 0, 0, 250000), sched::recv(0, 1, 0, 250000)}});
  CHECK(topo::predict(s, t, 4, m).seconds == Approx(10e-6 + 1e6 / m.spine).epsilon(1e-9));
}

TEST_CASE("steps run in order and wait for the peer (rendezvous)", "[cost]") {
  topo::Topology t = topo::fromShape(1, 2, 1);
  auto m = simpleModel();
  auto s = empty(2);
  s[0].steps.push_back({{sched::copy(0, 0, 1, 0, 2500000)}});  // 10 MB local: 1 ms + alpha
  s[0].steps.push_back({{sched::send(1, 1, 0, 250000)}});
  s[1].steps.push_back({{sched::recv(0, 1, 0, 250000)}});
  double local = 10e-6 + 1e7 / m.beta[hocclLinkSelf];
  CHECK(topo::predict(s, t, 4, m).seconds == Approx(local + 10e-6 + 1e6 / m.nic).epsilon(1e-9));
}

TEST_CASE("mismatched or deadlocking schedules are reported", "[cost]") {
  topo::Topology t = topo::fromShape(1, 2, 1);
  auto m = simpleModel();
  auto s = empty(2);
  s[0].steps.push_back({{sched::send(1, 0, 0, 10)}});
  CHECK_THROWS_WITH(topo::predict(s, t, 4, m), Catch::Contains("sends 1 messages to rank 1"));
  s[1].steps.push_back({{sched::recv(0, 1, 0, 11)}});
  CHECK_THROWS_WITH(topo::predict(s, t, 4, m), Catch::Contains("different counts"));
  s = empty(2);  // both receive first: deadlock under rendezvous
  s[0].steps = {{{sched::recv(1, 1, 0, 10)}}, {{sched::send(1, 0, 0, 10)}}};
  s[1].steps = {{{sched::recv(0, 1, 0, 10)}}, {{sched::send(0, 0, 0, 10)}}};
  CHECK_THROWS_WITH(topo::predict(s, t, 4, m), Catch::Contains("deadlock"));
  CHECK_THROWS(topo::predict(empty(3), t, 4, m));
}

TEST_CASE("link parameters come from HOCCL_LINK_*", "[cost]") {
  setenv("HOCCL_LINK_BW_INTER_SWITCH", "125", 1);
  setenv("HOCCL_LINK_LAT_INTRA_HOST", "7", 1);
  auto m = topo::LinkModel::fromParams();
  CHECK(m.spine == 125e6);
  CHECK(m.beta[hocclLinkInterSwitch] == 125e6);
  CHECK(m.alpha[hocclLinkIntraHost] == Approx(7e-6));
  CHECK(m.describe().find("inter-switch 0.12 GB/s") != std::string::npos);
  setenv("HOCCL_LINK_BW_INTER_SWITCH", "-5", 1);
  CHECK_THROWS_AS(topo::LinkModel::fromParams(), Error);
  setenv("HOCCL_LINK_BW_INTER_SWITCH", "fast", 1);
  CHECK_THROWS_AS(topo::LinkModel::fromParams(), Error);
  unsetenv("HOCCL_LINK_BW_INTER_SWITCH");
  unsetenv("HOCCL_LINK_LAT_INTRA_HOST");
}

TEST_CASE("HO-Ring beats the flat ring across a slow spine; the model says by how much", "[cost]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  auto m = simpleModel();
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather}) {
    size_t bytes = 16u << 20;
    size_t count = coll == Coll::AllReduce ? bytes / 4 : bytes / 4 / 8;
    sched::CollArgs args{coll, 0, 8, count, 0, 0};
    double ring = topo::predict(allOf(algo::ringSchedule, args, t), t, 4, m).seconds;
    double ho = topo::predict(allOf(algo::hoRingSchedule, args, t), t, 4, m).seconds;
    INFO(sched::collName(coll) << " ring " << ring << " s, ho_ring " << ho << " s");
    CHECK(ring / ho > (coll == Coll::AllReduce ? 1.5 : 1.3));
  }
}

TEST_CASE("the tuner picks the faster algorithm and is deterministic", "[cost][tuner]") {
  algo::Algorithm ring{"ring", [](Coll) { return true; },
                       [](const sched::CollArgs&, const topo::Topology&) { return true; }, algo::ringSchedule};
  algo::Algorithm ho{"ho_ring", [](Coll) { return true; }, algo::hoRingApplicable, algo::hoRingSchedule};
  std::vector<const algo::Algorithm*> both{&ring, &ho};
  setenv("HOCCL_LINK_BW_INTER_SWITCH", "125", 1);
  topo::Topology t = topo::fromShape(2, 2, 2);
  sched::CollArgs big{Coll::AllReduce, 0, 8, 4u << 20, 0, 0};
  CHECK(std::string(algo::tune(big, t, 4, both).name()) == "ho_ring");
  CHECK(algo::tune(big, t, 4, both).algorithm == &ho);  // cached, same answer
  // One host: HO-Ring is a ring over chunks and the model prices the two within 1%. Above one chunk HO-Ring sends
  // smaller messages (a chunk's parts, against the ring's count / ranks) and wins the tie; within one chunk both send
  // the same messages and the preferred (first) candidate stays, in either order.
  topo::Topology one = topo::fromShape(1, 1, 4);
  sched::CollArgs fourChunks{Coll::AllReduce, 0, 4, 1u << 20, 0, 1u << 18};
  const double ringSeconds = algo::tune(fourChunks, one, 4, {&ring}).seconds;
  const double hoSeconds = algo::tune(fourChunks, one, 4, {&ho}).seconds;
  INFO("ring " << ringSeconds << " s, ho_ring " << hoSeconds << " s");
  REQUIRE(hoSeconds <= ringSeconds * 1.01);  // a tie, as the model sees it
  REQUIRE(hoSeconds >= ringSeconds * 0.99);
  CHECK(std::string(algo::tune(fourChunks, one, 4, both).name()) == "ho_ring");
  sched::CollArgs oneChunk{Coll::AllReduce, 0, 4, 1u << 16, 0, 1u << 18};
  CHECK(std::string(algo::tune(oneChunk, one, 4, both).name()) == "ring");
  std::vector<const algo::Algorithm*> hoFirst{&ho, &ring};
  CHECK(std::string(algo::tune(oneChunk, one, 4, hoFirst).name()) == "ho_ring");
  // Smaller messages never beat a prediction more than 1% faster: with a per-step cost HO-Ring's extra steps (four
  // chunks, each its own ring) make it slower than the ring, which then stays.
  topo::LinkModel stepped = topo::LinkModel::fromParams();
  stepped.step[hocclLinkIntraHost] = 50e-6;
  const double ringStepped = algo::tune(fourChunks, one, 4, {&ring}, &stepped).seconds;
  const double hoStepped = algo::tune(fourChunks, one, 4, {&ho}, &stepped).seconds;
  INFO("with steps: ring " << ringStepped << " s, ho_ring " << hoStepped << " s");
  REQUIRE(hoStepped > ringStepped * 1.01);
  CHECK(std::string(algo::tune(fourChunks, one, 4, both, &stepped).name()) == "ring");
  unsetenv("HOCCL_LINK_BW_INTER_SWITCH");
}

namespace {

/// A shortcut with a fixed price that runs calls up to `maxCount` elements (it is never started here).
class PricedShortcut final : public transport::Shortcut {
 public:
  /// `minChoosable`: the smallest count the tuner may choose it for on ordinary buffers; `registered`: its price
  /// when every rank registered (none when negative).
  PricedShortcut(const char* name, double seconds, size_t maxCount, size_t minChoosable = 0, double registered = -1)
      : name_(name), seconds_(seconds), max_(maxCount), minChoosable_(minChoosable), registered_(registered) {}
  const char* name() const override { return name_; }
  bool canRun(const transport::CollCall& call) const override { return call.count <= max_; }
  bool choosableOnOrdinaryBuffers(const transport::CollCall& call) const override {
    return call.count >= minChoosable_;
  }
  double predictSeconds(const transport::CollCall&, const topo::LinkModel&) const override { return seconds_; }
  std::optional<double> predictRegisteredSeconds(const transport::CollCall&, const topo::LinkModel&) const override {
    if (registered_ < 0) return std::nullopt;
    return registered_;
  }
  std::unique_ptr<transport::ShortcutOp> start(const transport::CollCall&) override { return nullptr; }

 private:
  const char* name_;
  double seconds_;
  size_t max_;
  size_t minChoosable_;
  double registered_;
};

}  // namespace

TEST_CASE("the one decision point compares shortcuts with the best schedule", "[cost][tuner]") {
  topo::Topology one = topo::fromShape(1, 1, 4);
  auto ask = [&](size_t count, std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts) {
    transport::CollCall call;
    call.coll = Coll::AllReduce;
    call.count = count;
    call.dtype = hocclFloat;
    sched::CollArgs args{Coll::AllReduce, 0, 4, count, 0, 1 << 18};
    return algo::decide(call, args, one, 4, shortcuts);
  };
  std::vector<std::unique_ptr<transport::Shortcut>> none;
  const algo::Choice schedule = ask(1 << 20, none);
  REQUIRE(schedule.algorithm != nullptr);
  REQUIRE(schedule.seconds > 0);

  std::vector<std::unique_ptr<transport::Shortcut>> shortcuts;
  shortcuts.push_back(std::make_unique<PricedShortcut>("slow", schedule.seconds * 2, 1 << 30));
  shortcuts.push_back(std::make_unique<PricedShortcut>("fast", schedule.seconds / 2, 1 << 20));
  shortcuts.push_back(std::make_unique<PricedShortcut>("faster_but_small", schedule.seconds / 4, 1 << 10));
  SECTION("the fastest shortcut that can run the call wins over a slower schedule") {
    const algo::Choice c = ask(1 << 20, shortcuts);
    REQUIRE(c.shortcut != nullptr);
    CHECK(std::string(c.name()) == "fast");
    CHECK(c.seconds == Approx(schedule.seconds / 2));
  }
  SECTION("a call outside every fast shortcut's range goes to the schedule, not to a slower shortcut") {
    const algo::Choice c = ask((1 << 20) + 1, shortcuts);
    REQUIRE(c.algorithm != nullptr);
    CHECK(c.shortcut == nullptr);
  }
  SECTION(
      "a shortcut not choosable on ordinary buffers at this size loses to a slower schedule, yet its "
      "registered path is still weighed") {
    std::vector<std::unique_ptr<transport::Shortcut>> gated;
    gated.push_back(
        std::make_unique<PricedShortcut>("gated", schedule.seconds / 2, 1 << 30, (1 << 20) + 1, schedule.seconds / 3));
    const algo::Choice below = ask(1 << 20, gated);
    REQUIRE(below.algorithm != nullptr);
    CHECK(below.shortcut == nullptr);
    REQUIRE(below.ifRegistered != nullptr);
    CHECK(std::string(below.ifRegistered->name()) == "gated");
    const algo::Choice from = ask((1 << 20) + 1, gated);
    REQUIRE(from.shortcut != nullptr);
    CHECK(std::string(from.name()) == "gated");
  }
  SECTION("among several that can run it, the cheapest; a schedule faster than all of them wins") {
    const double small = ask(1 << 10, none).seconds;
    std::vector<std::unique_ptr<transport::Shortcut>> two;
    two.push_back(std::make_unique<PricedShortcut>("half", small / 2, 1 << 30));
    two.push_back(std::make_unique<PricedShortcut>("quarter", small / 4, 1 << 30));
    CHECK(std::string(ask(1 << 10, two).name()) == "quarter");
    CHECK(ask(1 << 10, shortcuts).algorithm != nullptr);  // all three are priced above this small call's schedule
  }
}
