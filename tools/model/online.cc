// hoccl-model's online subcommands, run as every rank of a job (hoccl-run, tools/cluster/run, mpirun, Slurm):
//   calibrate  rank 0 probes one peer per link class (the first rank that is intra-host, intra-switch and
//              inter-switch from it): an 8-byte hocclSend/hocclRecv ping-pong gives the latency (half the median
//              round trip), 1 MiB and 8 MiB ping-pongs the bandwidth (the slope between their fastest round
//              trips, so per-message costs cancel); memcpy of 64 MiB gives the local copy rate. Then the rates
//              under load, with every rank sending at once as the algorithms' steps do: the intra-host rate per
//              flow, the NIC per host, the spine uplink per switch (see calibrate()). Then the per-step cost per
//              class: series of 2 and 20 executor steps of 8 B with every rank of the class's ring busy (fitSteps),
//              and last the spine's burst (spineBurst). Classes without a peer keep the built-in values. On a
//              one-host job also the shm shortcuts' hand-off, copy and reduction rates (probeShortcuts) and the
//              cache term's gain with hwloc's cache sizes (probeCacheGain, cache_probe.cc). With more
//              ranks on a host than cores, what every rank measured at once is divided back to a core per rank
//              (LinkModel::crowded applies it again at the rank count a job runs).
//   validate   runs the collective over a size range (the algorithm HOCCL_ALGO forces, or whatever the tuner
//              picks) and prints the cost model's prediction against the slowest rank's mean time.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "algo/predict.h"
#include "algo/registry.h"
#include "algo/tuner.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/communicator.h"
#include "exec/executor.h"
#include "sched/schedule.h"
#include "transports/shm/shm_price.h"
#include "hoccl/hoccl.h"
#include "tools/model/model_tool.h"
#include "tools/model/online_job.h"

namespace hoccl::model_tool {
namespace {

// Median round trip of `reps` ping-pongs of `bytes` between rank 0 (initiator) and peer, after a warm-up (the
// median, not the mean: one descheduled rank on a busy machine would otherwise dominate).
// With `fastest`, the shortest round trip instead: for the bandwidth slope, where descheduling only ever adds time
// and one slow sample among a few skews a median-based slope by a factor of two (run e of docs/model.md: 0.011 GB/s
// measured on a 25 MB/s spine).
double roundTrip(Job& job, int peer, size_t bytes, int reps, bool fastest = false) {
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  auto once = [&] {
    if (job.rank == 0) {
      check(hocclSend(buf.data(), bytes, hocclUint8, peer, job.comm, nullptr), "probe send");
      check(hocclRecv(buf.data(), bytes, hocclUint8, peer, job.comm, nullptr), "probe receive");
    } else {
      check(hocclRecv(buf.data(), bytes, hocclUint8, 0, job.comm, nullptr), "probe receive");
      check(hocclSend(buf.data(), bytes, hocclUint8, 0, job.comm, nullptr), "probe send");
    }
  };
  for (int i = 0; i < std::max(1, reps / 10); ++i) once();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    once();
    times.push_back(since(start));
  }
  if (fastest) return *std::min_element(times.begin(), times.end());
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[reps / 2];
}

// Aggregate rate of every pair (src -> dst) sending at once (one group, so that pairs in both directions between
// the same ranks cannot block each other): the slope between 1 MiB and 8 MiB of the slowest rank's time (median of
// 3), times the number of pairs. Every rank takes part (barriers).
double concurrentRate(Job& job, const std::vector<std::pair<int, int>>& pairs) {
  auto timed = [&](size_t bytes) {
    std::vector<char> out(bytes), in(bytes);
    std::vector<double> times;
    for (int i = 0; i < 3; ++i) {
      job.barrier();
      auto start = Clock::now();
      check(hocclGroupStart(), "group start");
      for (const auto& [src, dst] : pairs) {
        if (job.rank == src) check(hocclSend(out.data(), bytes, hocclUint8, dst, job.comm, nullptr), "probe send");
        if (job.rank == dst) check(hocclRecv(in.data(), bytes, hocclUint8, src, job.comm, nullptr), "probe receive");
      }
      check(hocclGroupEnd(), "group end");
      times.push_back(job.maxOf(since(start)));
    }
    std::sort(times.begin(), times.end());
    return times[1];
  };
  const size_t small = size_t{1} << 20, large = size_t{8} << 20;
  const double t1 = timed(small), t2 = timed(large);
  const double perPair = t2 > t1 ? static_cast<double>(large - small) / (t2 - t1) : static_cast<double>(large) / t2;
  return perPair * static_cast<double>(pairs.size());
}

// Time of `steps` steps in a row, in every pair (src -> dst) `bytes` move at once, as the ring's and HO-Ring's
// steps do: one schedule of `steps` steps (each: send to the rank this one feeds, receive from the one feeding it)
// run by the executor, as a collective's schedule is, so the time per step is the executor's and not an API call's
// (the first version of this probe made every step a hocclGroupStart/End and measured 4 times the per-step cost
// the collectives show). The slowest rank's time, median of 3. Every rank takes part (barriers).
double seriesTime(Job& job, const std::vector<std::pair<int, int>>& pairs, size_t bytes, int steps) {
  std::vector<char> out(std::max<size_t>(bytes, 1)), in(std::max<size_t>(bytes, 1));
  auto schedule = std::make_shared<sched::Schedule>();
  schedule->algorithm = "calibrate-steps";
  for (int k = 0; k < steps; ++k) {
    sched::Step step;
    for (const auto& [src, dst] : pairs) {
      if (job.rank == src) step.prims.push_back(sched::send(dst, sched::kInput, 0, bytes));
      if (job.rank == dst) step.prims.push_back(sched::recv(src, sched::kOutput, 0, bytes));
    }
    schedule->steps.push_back(std::move(step));
  }
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {
    std::vector<exec::Task> tasks(1);
    exec::Task& task = tasks[0];
    task.comm = job.comm->impl.get();
    task.schedule = schedule;
    task.binding.buffers = {out.data(), in.data(), nullptr};
    task.what = [steps, bytes] { return fmt::format("calibrate: {} steps of {} bytes", steps, bytes); };
    job.barrier();
    auto start = Clock::now();
    exec::run(tasks);
    times.push_back(job.maxOf(since(start)));
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

// What a step costs under load: series of kStepsShort and kStepsLong steps of 8-byte messages with every rank of
// the pairs busy; the difference between the two lengths gives the time per step (the series' fixed cost - barrier,
// first wake-up - cancels). Until 2026-11-26 (run i of docs/model.md) the probe also ran steps of 64 KiB and 256 KiB
// and took the intercept of a line through the three sizes: on the emulated cluster the spine's token bucket lets a
// short series through faster than a long one (its 250 kB burst covers most of a short series' bytes), which bent
// the line and put 354 us per inter-switch step where the ring's measured steps left at most 45 us. Steps of 8 bytes
// carry no bytes for a bucket or a rate to distort: their time is the latency and the per-step cost alone.
struct StepFit {
  double fixed = 0;    // seconds per series beyond its steps (barrier, first wake-up)
  double perStep = 0;  // seconds per step of an 8-byte message
};
constexpr int kStepsShort = 2, kStepsLong = 20;

StepFit fitSteps(Job& job, const std::vector<std::pair<int, int>>& pairs) {
  const double shortT = seriesTime(job, pairs, 8, kStepsShort);
  const double longT = seriesTime(job, pairs, 8, kStepsLong);
  StepFit f;
  f.perStep = std::max(0.0, (longT - shortT) / (kStepsLong - kStepsShort));
  f.fixed = std::max(0.0, shortT - kStepsShort * f.perStep);
  return f;
}

// The burst of a shaped spine (LinkModel::spineBurst): after a pause long enough to fill any token bucket, every
// rank sends kBurstProbeBytes to its counterpart on the next switch at once; the uplinks' bytes that went faster
// than the steady rate `spine` (measured between 1 and 8 MiB, where a burst cancels) are the burst:
// burst = bytes per uplink - spine x (time - latency). Median of 3; under 5% of the bytes counts as none (noise).
constexpr size_t kBurstProbeBytes = size_t{256} << 10;

double spineBurst(Job& job, const std::vector<std::pair<int, int>>& pairs, int nswitches, double spine,
                  double latency) {
  std::vector<char> out(kBurstProbeBytes), in(kBurstProbeBytes);
  const double perUplink = static_cast<double>(kBurstProbeBytes * pairs.size()) / nswitches;
  std::vector<double> bursts;
  for (int i = 0; i < 3; ++i) {
    job.barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    job.barrier();
    auto start = Clock::now();
    check(hocclGroupStart(), "group start");
    for (const auto& [src, dst] : pairs) {
      if (job.rank == src)
        check(hocclSend(out.data(), kBurstProbeBytes, hocclUint8, dst, job.comm, nullptr), "burst probe send");
      if (job.rank == dst)
        check(hocclRecv(in.data(), kBurstProbeBytes, hocclUint8, src, job.comm, nullptr), "burst probe receive");
    }
    check(hocclGroupEnd(), "group end");
    const double t = job.maxOf(since(start));
    bursts.push_back(std::clamp(perUplink - spine * std::max(0.0, t - latency), 0.0, perUplink));
  }
  std::sort(bursts.begin(), bursts.end());
  return bursts[1] < 0.05 * perUplink ? 0 : bursts[1];
}

// The ranks of each host and switch, in rank order.
std::vector<std::vector<int>> members(const std::vector<int>& of, int groups) {
  std::vector<std::vector<int>> m(groups);
  for (size_t r = 0; r < of.size(); ++r) m[of[r]].push_back(static_cast<int>(r));
  return m;
}

double memcpyRate() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    auto start = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double t = since(start);
    if (b[bytes / 2] != 1) throw std::runtime_error("memcpy probe: copy did not happen");
    best = std::max(best, static_cast<double>(bytes) / t);
    b[bytes / 2] = 2;
  }
  return best;
}

// hocclMemAlloc memory registered with the job's communicator, released in reverse.
class RegisteredBuffer {
 public:
  RegisteredBuffer(Job& job, size_t bytes) : comm_(job.comm) {
    check(hocclMemAlloc(&data_, bytes), "hocclMemAlloc for the registered copy probe");
    std::memset(data_, 1, bytes);
    check(hocclCommRegister(comm_, data_, bytes, &handle_), "hocclCommRegister for the registered copy probe");
  }
  ~RegisteredBuffer() {
    hocclCommDeregister(comm_, handle_);
    hocclMemFree(data_);
  }
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  void* data() const { return data_; }

 private:
  hocclComm_t comm_;
  void* data_ = nullptr;
  void* handle_ = nullptr;
};

// The communicator's shortcut called `name` when it can run `call` on every rank (agreed: the same on all), else
// null.
transport::Shortcut* shortcutFor(Job& job, const char* name, const transport::CollCall& call) {
  transport::Shortcut* found = nullptr;
  for (const auto& s : job.comm->impl->shortcuts())
    if (std::strcmp(s->name(), name) == 0 && s->canRun(call)) found = s.get();
  return job.maxOf(found ? 0.0 : 1.0) == 0.0 ? found : nullptr;
}

// Time of one call of `call` through shortcut `s` with every rank at once: batches of `calls` calls after a
// barrier, each rank's mean per call, the slowest rank's; the median of 5 batches (`fastest`: the fastest batch,
// for a rate slope, where descheduling only ever adds time).
double shortcutTime(Job& job, transport::Shortcut& s, const transport::CollCall& call, int calls, bool fastest) {
  auto once = [&] {
    Backoff backoff(job.comm->impl->waitPolicy());  // a fresh wait per call, as the communicator's calls have
    s.run(call, backoff);
  };
  once();  // warm-up (and the peers' mappings)
  std::vector<double> times;
  for (int b = 0; b < 5; ++b) {
    job.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) once();
    times.push_back(job.maxOf(since(start) / calls));
  }
  std::sort(times.begin(), times.end());
  return fastest ? times.front() : times[2];
}

// The shm shortcuts' parameters (LinkModel::shmHandoff, shmCopy, shmMappedCopy, shmReduce) on a job whose ranks all
// share one arena, measured with every rank at once and divided back to a core per rank (`crowding`: ranks per core
// on the host, LinkModel::crowding), so that the model, crowding them again at this rank count, gives what was
// measured:
//   hand-off   the small shortcut's all-reduce of 2 floats, less the Block policy's nap the model adds per round;
//   copy       the single-copy all-gather of 4 and 16 MiB per rank (the tuner weighs single copy on ordinary
//              buffers from 4 MiB, where the copies stream from and to memory; smaller sizes, run from the caches,
//              gave rates up to 1.5x higher): (p - 1) x the difference in bytes over the
//              difference in time (per-call costs cancel) less the local copy of the rank's own block at beta[self]
//              (measured first, memcpy on one core); on ordinary buffers (through the kernel: shmCopy) and on
//              hocclMemAlloc buffers registered on every rank (over mappings: shmMappedCopy);
//   reduce     the single-copy all-reduce of 4 and 16 MiB: 2(p - 1)/p of it crosses, (p - 1)/p is reduced;
//              what the copy rate does not explain of its slope is the reduction's (with whatever the push, which
//              the all-gather does not do, costs beyond a pull: the all-reduce is what the tuner weighs most).
// Shortcuts that cannot run (a job over several hosts, cross-memory attach refused) keep the model's values.
std::string probeShortcuts(Job& job, topo::LinkModel& m, double crowding) {
  std::string out;
  const int n = job.nranks;
  transport::CollCall call;
  call.dtype = hocclFloat;
  call.op = hocclSum;
  std::vector<float> in(2, 1.0f), res(2);
  call.sendbuf = in.data();
  call.recvbuf = res.data();
  call.count = 2;
  call.coll = Coll::AllReduce;
  if (transport::Shortcut* small = shortcutFor(job, "small", call)) {
    const double t = shortcutTime(job, *small, call, 2000, false);
    const double wait = transport::shm::roundWaitSeconds(n, m);
    m.shmHandoff = std::max(t - wait, 0.1 * t) / crowding;
    out += fmt::format(" shm small 8 B all-reduce {:.2f} us;", t * 1e6);
    if (job.rank == 0)
      fmt::print(
          "{:>13}: small all-reduce of 8 B, {} ranks at once: {:9.2f} us per call (hand-off {:.2f} us at a "
          "core per rank)\n",
          "shm", n, t * 1e6, m.shmHandoff * 1e6);
  }
  const size_t b1 = size_t{4} << 20, b2 = size_t{16} << 20;
  auto timeOf = [&](transport::Shortcut& s, Coll coll, size_t bytes) {
    const size_t count = bytes / sizeof(float);  // all-gather: per rank; all-reduce: the message
    std::vector<float> send(count, 1.0f), recv(coll == Coll::AllGather ? count * n : count);
    transport::CollCall c = call;
    c.coll = coll;
    c.count = count;
    c.sendbuf = send.data();
    c.recvbuf = recv.data();
    return shortcutTime(job, s, c, 3, true);
  };
  // The all-gather of `bytes` per rank on hocclMemAlloc buffers registered on every rank (zero copy).
  auto registeredGatherTime = [&](transport::Shortcut& s, size_t bytes) {
    RegisteredBuffer send(job, bytes), recv(job, bytes * n);
    transport::CollCall c = call;
    c.coll = Coll::AllGather;
    c.count = bytes / sizeof(float);
    c.sendbuf = send.data();
    c.recvbuf = recv.data();
    return shortcutTime(job, s, c, 3, true);
  };
  call.coll = Coll::AllGather;
  call.count = b2 / sizeof(float);
  transport::Shortcut* single = n > 1 ? shortcutFor(job, "single_copy", call) : nullptr;
  call.coll = Coll::AllReduce;
  call.count = b1 / sizeof(float);
  if (single && job.maxOf(single->canRun(call) ? 0.0 : 1.0) == 0.0) {
    // The all-gather's slope holds each rank's local copy of its own block too (at beta[self], crowded).
    const double ownCopy = static_cast<double>(b2 - b1) * crowding / m.beta[hocclLinkSelf];
    const double moved = static_cast<double>(n - 1) * static_cast<double>(b2 - b1);
    auto copyRate = [&](double t1, double t2) {
      const double crossingTime = t2 > t1 ? t2 - t1 - ownCopy : t2 - ownCopy;
      return moved / std::max(crossingTime, 0.1 * (t2 > t1 ? t2 - t1 : t2));
    };
    const double g1 = timeOf(*single, Coll::AllGather, b1), g2 = timeOf(*single, Coll::AllGather, b2);
    const double copy = copyRate(g1, g2);
    // All-reduce: 2(p-1)/p of the message crosses (pulled, then pushed) and (p-1)/p is reduced.
    const double a1 = timeOf(*single, Coll::AllReduce, b1), a2 = timeOf(*single, Coll::AllReduce, b2);
    const double part = static_cast<double>(n - 1) / n * static_cast<double>(b2 - b1);
    const double reduceTime = (a2 - a1) - 2 * part / copy;  // what the copies leave of the slope
    m.shmCopy = copy * crowding;
    const double r1 = registeredGatherTime(*single, b1), r2 = registeredGatherTime(*single, b2);
    m.shmMappedCopy = copyRate(r1, r2) * crowding;
    // A reduction reads two operands for each byte it writes: faster than a memcpy (beta[self]) means the residue
    // is below what these timings resolve (8 ranks on 2 cores gave 345 GB/s), and beta[self] stays.
    const bool measurable = reduceTime > 0 && part / reduceTime * crowding <= m.beta[hocclLinkSelf];
    if (measurable) m.shmReduce = part / reduceTime * crowding;
    out += fmt::format(
        " shm single copy {:.2f} GB/s through the kernel, {:.2f} GB/s over mappings, reduce {:.2f} GB/s (at a core "
        "per rank);",
        m.shmCopy / 1e9, m.shmMappedCopy / 1e9, m.reduceRate() / 1e9);
    if (job.rank == 0)
      fmt::print(
          "{:>13}: single copy, {} ranks at once: copies {:8.3f} GB/s through the kernel, {:8.3f} GB/s over "
          "mappings, reduces {:8.3f} GB/s per rank at a core per rank{}\n",
          "shm", n, m.shmCopy / 1e9, m.shmMappedCopy / 1e9, m.reduceRate() / 1e9,
          measurable ? "" : " (the reduction was not measurable: beta[self] kept)");
  }
  return out;
}

}  // namespace

int calibrate(const CalibrateOptions& o) {
  Job job;
  const topo::Topology& t = job.topology();
  topo::LinkModel m = topo::LinkModel::fromParams();
  std::string source = fmt::format("hoccl-model calibrate: {} ranks, {} hosts, {} switches; measured:", t.nranks,
                                   t.nhosts, t.nswitches);
  for (int c = hocclLinkIntraHost; c < hocclNumLinkClasses; ++c) {
    int peer = -1;
    for (int r = 1; r < t.nranks && peer < 0; ++r)
      if (t.linkClass(0, r) == c) peer = r;
    if (peer < 0) continue;
    job.barrier();
    double lat = 0, bw = 0;
    if (job.rank == 0 || job.rank == peer) {
      lat = roundTrip(job, peer, 8, o.iterations) / 2;
      const size_t small = size_t{1} << 20, large = size_t{8} << 20;
      double t1 = roundTrip(job, peer, small, 7, true) / 2, t2 = roundTrip(job, peer, large, 5, true) / 2;
      bw = t2 > t1 ? static_cast<double>(large - small) / (t2 - t1) : static_cast<double>(large) / t2;
    }
    if (job.rank == 0) {
      m.alpha[c] = lat;
      m.beta[c] = bw;
      const char* name = topo::linkClassName(static_cast<hocclLinkClass_t>(c));
      source += fmt::format(" {} (rank 0 <-> {}) {:.2f} us {:.3f} GB/s;", name, peer, lat * 1e6, bw / 1e9);
      fmt::print("{:>13}: rank 0 <-> rank {:<4} latency {:9.2f} us  bandwidth {:8.3f} GB/s\n", name, peer, lat * 1e6,
                 bw / 1e9);
    }
  }
  // Rates under load: every link class again with every rank of the job sending at once, as every step of the
  // ring and HO-Ring loads them (the model has no resource for what co-located flows share besides the NIC and
  // the uplink: memory bandwidth inside a host, and on an emulated cluster the one machine's CPUs that carry every
  // "host's" TCP stack). Intra-host: every rank to the next rank of its host; the per-flow rate replaces the
  // lone pair's. NIC: every rank to the rank with its local index on the next host of its switch, all switches at
  // once; the capacity per host is the aggregate over the sending hosts. Spine uplink: every rank to its
  // counterpart on the next switch; the capacity per switch is the aggregate over the switches.
  m.nic = m.beta[hocclLinkIntraSwitch];
  m.spine = m.beta[hocclLinkInterSwitch];
  const auto hostRanks = members(t.hostOf, t.nhosts), switchRanks = members(t.switchOf, t.nswitches);
  std::vector<std::vector<int>> hostsOfSwitch(t.nswitches);
  for (int h = 0; h < t.nhosts; ++h) hostsOfSwitch[t.switchOf[hostRanks[h][0]]].push_back(h);
  auto report = [&](const char* name, const std::string& what, size_t flows, double rate) {
    source += fmt::format(" {} loaded ({} flows) {:.3f} GB/s;", name, flows, rate / 1e9);
    if (job.rank == 0) fmt::print("{:>13}: {} ({} flows at once) {:8.3f} GB/s\n", name, what, flows, rate / 1e9);
  };
  // Every rank to the next of its class (intra-host: next rank of its host; intra-switch: its counterpart on the
  // next host of its switch; inter-switch: its counterpart on the next switch), kept for the per-step probe.
  std::vector<std::pair<int, int>> ringOf[hocclNumLinkClasses];
  {
    std::vector<std::pair<int, int>>& pairs = ringOf[hocclLinkIntraHost];
    for (const auto& ranks : hostRanks)
      if (ranks.size() > 1)
        for (size_t i = 0; i < ranks.size(); ++i) pairs.emplace_back(ranks[i], ranks[(i + 1) % ranks.size()]);
    if (!pairs.empty()) {
      m.beta[hocclLinkIntraHost] = concurrentRate(job, pairs) / static_cast<double>(pairs.size());
      report("intra-host", "per flow, every rank to the next of its host", pairs.size(), m.beta[hocclLinkIntraHost]);
    }
  }
  {
    std::vector<std::pair<int, int>>& pairs = ringOf[hocclLinkIntraSwitch];
    int sendingHosts = 0;
    for (const auto& hosts : hostsOfSwitch) {
      if (hosts.size() < 2) continue;
      for (size_t i = 0; i < hosts.size(); ++i) {
        const auto &a = hostRanks[hosts[i]], &b = hostRanks[hosts[(i + 1) % hosts.size()]];
        for (size_t j = 0; j < std::min(a.size(), b.size()); ++j) pairs.emplace_back(a[j], b[j]);
        ++sendingHosts;
      }
    }
    if (!pairs.empty()) {
      m.nic = concurrentRate(job, pairs) / sendingHosts;
      report("NIC", "per host, every host to the next of its switch", pairs.size(), m.nic);
    }
  }
  if (t.nswitches > 1) {
    std::vector<std::pair<int, int>>& pairs = ringOf[hocclLinkInterSwitch];
    for (int s = 0; s < t.nswitches; ++s) {
      const auto &a = switchRanks[s], &b = switchRanks[(s + 1) % t.nswitches];
      for (size_t j = 0; j < std::min(a.size(), b.size()); ++j) pairs.emplace_back(a[j], b[j]);
    }
    m.spine = concurrentRate(job, pairs) / t.nswitches;
    report("spine", "per switch uplink, every switch to the next", pairs.size(), m.spine);
  }
  // The per-step cost per class: what a step of an empty message costs with every rank of the class's ring in
  // it, beyond the lone ping-pong latency (docs/model.md: on the emulated cluster about 1.5 ms against tens of us).
  for (int c = hocclLinkIntraHost; c < hocclNumLinkClasses; ++c) {
    if (ringOf[c].empty()) continue;
    const StepFit f = fitSteps(job, ringOf[c]);
    m.step[c] = std::max(0.0, f.perStep - m.alpha[c]);
    const char* name = topo::linkClassName(static_cast<hocclLinkClass_t>(c));
    source += fmt::format(" {} steps ({} flows, 8 B) {:.1f} us/step ({:.1f} beyond latency), {:.1f} us fixed;", name,
                          ringOf[c].size(), f.perStep * 1e6, m.step[c] * 1e6, f.fixed * 1e6);
    if (job.rank == 0)
      fmt::print(
          "{:>13}: steps of {} flows of 8 B at once: {:9.1f} us per step ({:.1f} beyond the latency), {:.1f} us "
          "fixed per series\n",
          name, ringOf[c].size(), f.perStep * 1e6, m.step[c] * 1e6, f.fixed * 1e6);
  }
  // A host with more ranks than cores: what every rank measured at once above (the intra-host rate and step cost)
  // is divided back to a core per rank, which the tuner crowds again for the ranks it runs (LinkModel::crowded):
  // the same numbers at this rank count, scaled at others.
  m.cores = job.comm->impl->tuningModel().cores;
  const double crowding = m.crowding(algo::maxRanksPerHost(t));
  if (crowding > 1) {
    if (!ringOf[hocclLinkIntraHost].empty()) m.beta[hocclLinkIntraHost] *= crowding;
    m.step[hocclLinkIntraHost] /= crowding;
    source += fmt::format(" {} ranks on {} cores per host: intra-host rate and step at a core per rank;",
                          algo::maxRanksPerHost(t), m.cores);
  }
  // memcpy on one core while the others wait: beta[self], which the shortcuts' probe below needs (an all-gather
  // copies its own block locally).
  job.barrier();
  if (job.rank == 0) m.beta[hocclLinkSelf] = memcpyRate();
  job.barrier();
  if (t.nhosts == 1) source += probeShortcuts(job, m, crowding);
  if (t.nhosts == 1) source += probeCacheGain(job, m);
  // The spine's burst, against the steady rate measured above.
  if (t.nswitches > 1) {
    const auto& pairs = ringOf[hocclLinkInterSwitch];
    m.spineBurst = spineBurst(job, pairs, t.nswitches, m.spine, m.alpha[hocclLinkInterSwitch]);
    source += fmt::format(" spine burst {:.0f} kB;", m.spineBurst / 1e3);
    if (job.rank == 0)
      fmt::print("{:>13}: burst per uplink after a pause ({} flows of {} KiB at once) {:8.0f} kB\n", "spine",
                 pairs.size(), kBurstProbeBytes >> 10, m.spineBurst / 1e3);
  }
  job.barrier();
  if (job.rank == 0) {
    source += fmt::format(" self memcpy {:.2f} GB/s", m.beta[hocclLinkSelf] / 1e9);
    fmt::print("{:>13}: memcpy 64 MiB {:8.3f} GB/s\n", "self", m.beta[hocclLinkSelf] / 1e9);
    std::ofstream out(o.out);
    out << m.toJson(source);
    if (!out) throw std::runtime_error("cannot write the model file '" + o.out + "'");
    fmt::print("wrote {} (use it with HOCCL_MODEL_FILE={} or hoccl-model predict --model)\n", o.out, o.out);
  }
  job.barrier();
  return 0;
}

int validate(const ValidateOptions& o) {
  Job job;
  const topo::Topology& t = job.topology();
  const topo::LinkModel model = linkModel(o.modelFile);
  const topo::LinkModel runModel = topo::LinkModel::fromParams();  // what the ranks' tuner prices with
  const sched::Coll coll = parseColl(o.coll);
  const char* forced = std::getenv("HOCCL_ALGO");
  nlohmann::json rows = nlohmann::json::array();
  if (job.rank == 0 && !o.json)
    fmt::print("{} ranks, {} hosts, {} switches; {}; model: {}\n{:>12} {:>10} {:>10} {:>14} {:>14} {:>8}\n", t.nranks,
               t.nhosts, t.nswitches, forced ? fmt::format("HOCCL_ALGO={}", forced) : std::string("tuner's choice"),
               model.describe(), "bytes", "algorithm", "chunk", "predicted us", "measured us", "error");
  // The mismatch check (src/comm/call_check.h) adds an exchange before every checked call (by default the first 16
  // of a communicator and every call from 1 MiB); the prediction is the collective alone.
  const int64_t checkMode = params::CHECK_MISMATCH.get();
  if (job.rank == 0 && checkMode != 0 && !o.json)
    fmt::print(
        "note: HOCCL_CHECK_MISMATCH={} adds its fingerprint exchange to the measured calls (by default from 1 MiB "
        "and the first 16 calls), which the prediction leaves out; HOCCL_CHECK_MISMATCH=0 measures the collective "
        "alone\n",
        checkMode);
  double worst = 0;
  for (size_t bytes : parseSizes(o.sizes)) {
    // The chunk the call is planned with (src/comm/plan.cc): HOCCL_CHUNK_SIZE, or where it is unset the one the
    // ranks' tuner picks from the model it prices with (HOCCL_MODEL_FILE or the built-in values; not --model).
    // Until 2026-11-26 the prediction used the algorithm's default chunk instead (HO-Ring: 512 KiB of floats)
    // while the run used 1 MiB: one chunk at 1 MiB predicted as two.
    sched::CollArgs args{coll,     job.rank,
                         t.nranks, countFor(coll, bytes, t.nranks),
                         0,        std::max<size_t>(1, static_cast<size_t>(params::CHUNK_SIZE.get()) / 4)};
    if (args.count == 0) continue;
    // The prediction: the forced algorithm, else the fastest candidate (what the tuner picks among schedules).
    const algo::Algorithm* alg = nullptr;
    double predicted = 0;
    size_t chunkBytes = 0;
    for (const algo::Algorithm* a : algo::candidates(args, t)) {
      if (forced && *forced && algo::byName(forced).name != std::string(a->name)) continue;
      sched::CollArgs priced = args;
      if (!params::CHUNK_SIZE.isSet() && algo::chunkMatters(*a, coll))
        priced.chunkCount = algo::tune(args, t, 4, {a}, &runModel, true).chunkCount;
      double s = algo::predict(*a, priced, t, 4, model).seconds;
      if (!alg || s < predicted * 0.99) {
        alg = a, predicted = s;
        chunkBytes = algo::chunkMatters(*a, coll) ? priced.chunkCount * 4 : 0;
      }
    }
    if (!alg) throw std::runtime_error(fmt::format("no algorithm runs {} here", o.coll));
    const size_t in = sched::bufferCounts(args).input, out = sched::bufferCounts(args).output;
    std::vector<float> send(std::max<size_t>(in, 1), 1.0f), recv(std::max<size_t>(out, 1));
    auto run = [&] {
      switch (coll) {
        case sched::Coll::AllReduce:
          return hocclAllReduce(send.data(), recv.data(), args.count, hocclFloat, hocclSum, job.comm, nullptr);
        case sched::Coll::AllGather:
          return hocclAllGather(send.data(), recv.data(), args.count, hocclFloat, job.comm, nullptr);
        case sched::Coll::ReduceScatter:
          return hocclReduceScatter(send.data(), recv.data(), args.count, hocclFloat, hocclSum, job.comm, nullptr);
        case sched::Coll::Broadcast:
          return hocclBroadcast(send.data(), recv.data(), args.count, hocclFloat, 0, job.comm, nullptr);
        case sched::Coll::Reduce:
          return hocclReduce(send.data(), recv.data(), args.count, hocclFloat, hocclSum, 0, job.comm, nullptr);
        default: return hocclInvalidArgument;
      }
    };
    check(run(), "warm-up collective");
    job.barrier();
    auto start = Clock::now();
    check(run(), "collective");
    // Iterations for about 0.3 s, agreed on by all ranks.
    int iters = static_cast<int>(std::clamp(0.3 / std::max(since(start), 1e-6), 3.0, 50.0));
    iters = static_cast<int>(job.maxOf(iters));
    job.barrier();
    start = Clock::now();
    for (int i = 0; i < iters; ++i) check(run(), "collective");
    const double measured = job.maxOf(since(start) / iters);
    const double err = (predicted - measured) / measured;
    if (bytes >= (size_t{1} << 20)) worst = std::max(worst, std::abs(err));
    if (job.rank == 0) {
      if (o.json)
        rows.push_back({{"bytes", bytes},
                        {"algorithm", alg->name},
                        {"chunk_bytes", chunkBytes},
                        {"predicted_s", predicted},
                        {"measured_s", measured},
                        {"error", err}});
      else
        fmt::print("{:>12} {:>10} {:>10} {:>14.1f} {:>14.1f} {:>7.1f}%\n", bytes, alg->name,
                   chunkBytes ? std::to_string(chunkBytes) : std::string("-"), predicted * 1e6, measured * 1e6,
                   err * 100);
    }
  }
  if (job.rank == 0) {
    if (o.json)
      fmt::print("{}\n", nlohmann::json{{"ranks", t.nranks},
                                        {"collective", o.coll},
                                        {"forced", forced ? forced : ""},
                                        {"mismatch_check", checkMode},
                                        {"worst_error_from_1MiB", worst},
                                        {"rows", rows}}
                             .dump(2));
    else fmt::print("largest error from 1 MiB: {:.1f}%\n", worst * 100);
  }
  job.barrier();
  return 0;
}

}  // namespace hoccl::model_tool
