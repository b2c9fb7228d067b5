// hoccl-model calibrate's cache probe (online_job.h: probeCacheGain): the cache term's gain on one host, fitted to
// the decision it drives, the ring against HO-Ring at a cache-sized chunk.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "algo/predict.h"
#include "algo/registry.h"
#include "algo/tuner.h"
#include "exec/executor.h"
#include "sched/schedule.h"
#include "tools/model/online_job.h"

namespace hoccl::model_tool {
namespace {

// The cache gain (LinkModel::cacheGain), fitted to what it decides: on one host, the all-reduce of llc / ranks
// bytes (every rank's input and output together take twice the LLC, so the term is on), by the ring (its
// steps of message / ranks bytes stream from memory) and by HO-Ring at the chunk the cache term favours (the one
// predicted fastest with a gain of 2: its pieces arrive and are sent on from the L2). Both run as schedules through
// the executor, in turn, 7 times each; the slowest rank's time, medians. The gain is the one whose predicted
// HO-Ring / ring ratio (the model measured so far, with its cache sizes) equals the measured ratio
// (algo::fitCacheGain: bisection on [1, 3]); 1 when HO-Ring is no faster than the model predicts without the term,
// 3 when it is faster than even that predicts. It is an effective number: what makes cache-sized pieces faster
// (the L2, and on a crowded host the shorter steps that ranks sharing a core interleave) is one factor in the model.
// A first version timed a series of fresh pieces against cold ones directly: 1.15-1.67 on 2 ranks, 1.00-1.19 on 4
// ranks on 2 cores, where HO-Ring at 256 KiB chunks ran the 16 MiB all-reduce 1.5x faster than the ring
// (docs/model.md, "The cache term").
struct CacheFit {
  double ring = 0, hoRing = 0;  // seconds, medians
  size_t chunkBytes = 0;        // HO-Ring's chunk
  double gain = 1;              // fitted, in [1, 3]
  double predictedRatio = 0;    // HO-Ring / ring as the model predicts it with `gain`
};

// Median time of the all-reduce schedules of `args` by `algs` (run in turn, `reps` each): the slowest rank's.
std::vector<double> allReduceTimes(Job& job, const std::vector<sched::CollArgs>& args,
                                   const std::vector<const algo::Algorithm*>& algs, int reps) {
  const topo::Topology& t = job.topology();
  std::vector<float> input(args[0].count, 1.0f), output(args[0].count);
  std::vector<std::shared_ptr<sched::Schedule>> schedules;
  size_t scratch = 0;
  for (size_t i = 0; i < algs.size(); ++i) {
    schedules.push_back(std::make_shared<sched::Schedule>(algs[i]->generate(args[i], t)));
    scratch = std::max(scratch, schedules.back()->scratchCount);
  }
  std::vector<float> scratchBuffer(std::max<size_t>(scratch, 1));
  auto timed = [&](size_t i) {
    std::vector<exec::Task> tasks(1);
    exec::Task& task = tasks[0];
    task.comm = job.comm->impl.get();
    task.schedule = schedules[i];
    task.binding.buffers = {reinterpret_cast<char*>(input.data()), reinterpret_cast<char*>(output.data()),
                            reinterpret_cast<char*>(scratchBuffer.data())};
    task.binding.elemSize = sizeof(float);
    task.binding.dtype = hocclFloat;
    task.binding.op = kernels::BinOp::Sum;
    task.what = [name = algs[i]->name] { return fmt::format("calibrate: the cache probe's {} all-reduce", name); };
    job.barrier();
    const auto start = Clock::now();
    exec::run(tasks);
    return job.maxOf(since(start));
  };
  std::vector<std::vector<double>> times(algs.size());
  for (size_t i = 0; i < algs.size(); ++i) timed(i);  // warm-up
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < algs.size(); ++i) times[i].push_back(timed(i));
  // Every rank contributed ones: a wrong binding would time something else.
  const float expected = static_cast<float>(job.nranks);
  if (output.front() != expected || output.back() != expected)
    throw std::runtime_error(fmt::format("calibrate: the cache probe's all-reduce gave {} and {}, not {}",
                                         output.front(), output.back(), expected));
  std::vector<double> medians;
  for (auto& v : times) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

CacheFit measureCacheGain(Job& job, const topo::LinkModel& m) {
  const topo::Topology& t = job.topology();
  const algo::Algorithm &ring = algo::byName("ring"), &hoRing = algo::byName("ho_ring");
  sched::CollArgs args{sched::Coll::AllReduce, job.rank, t.nranks,
                       std::max<size_t>(static_cast<size_t>(m.llcBytes) / sizeof(float) / t.nranks, 1024)};
  topo::LinkModel strong = m;  // a gain of 2 picks the chunk the term favours
  strong.cacheGain = 2.0;
  CacheFit f;
  sched::CollArgs chunked = args;
  double best = 0;
  for (size_t bytes : algo::kChunkChoicesBytes) {
    sched::CollArgs at = args;
    at.chunkCount = bytes / sizeof(float);
    const double s = algo::predict(hoRing, at, t, sizeof(float), strong).seconds;
    if (best == 0 || s < best) {
      best = s;
      f.chunkBytes = bytes;
    }
  }
  // Every rank must run the same schedule: each rank's model was calibrated on its own, and two chunks predicted
  // nearly alike could be picked differently (ranks then sent pieces of different sizes; hoccl_model failed once so).
  f.chunkBytes = static_cast<size_t>(job.maxOf(static_cast<double>(f.chunkBytes)));
  chunked.chunkCount = f.chunkBytes / sizeof(float);
  const std::vector<double> times = allReduceTimes(job, {args, chunked}, {&ring, &hoRing}, 7);
  f.ring = times[0];
  f.hoRing = times[1];
  const algo::CachePair pair{&hoRing, chunked, &ring, args};
  f.gain = algo::fitCacheGain(f.hoRing / f.ring, pair, t, sizeof(float), m);
  f.predictedRatio = algo::cacheRatio(pair, t, sizeof(float), m, f.gain);
  return f;
}

}  // namespace

// The cache term on a one-host job: the sizes from hwloc (as the communicator takes them) and the gain fitted by
// measureCacheGain. Without cache sizes (hwloc found none) or with one rank the model is left as it is.
std::string probeCacheGain(Job& job, topo::LinkModel& m) {
  const topo::LinkModel hw = job.comm->impl->tuningModel();
  if (job.nranks < 2 || hw.cacheBytes <= 0 || hw.llcBytes <= 0) return "";
  m.cacheBytes = hw.cacheBytes;
  m.llcBytes = hw.llcBytes;
  const CacheFit f = measureCacheGain(job, m);
  m.cacheGain = f.gain;
  const size_t messageBytes = static_cast<size_t>(m.llcBytes) / job.nranks;
  if (job.rank == 0)
    fmt::print(
        "{:>13}: all-reduce of {} MiB: ring {:.0f} us, ho_ring at {} KiB chunks {:.0f} us (ratio {:.4f}): gain "
        "{:.2f}, predicted ratio {:.4f} (L2 {} KiB per core, LLC {} MiB)\n",
        "cache", messageBytes >> 20, f.ring * 1e6, f.chunkBytes >> 10, f.hoRing * 1e6, f.hoRing / f.ring,
        m.cacheGain, f.predictedRatio, static_cast<size_t>(m.cacheBytes) >> 10, static_cast<size_t>(m.llcBytes) >> 20);
  return fmt::format(" cache: {} MiB all-reduce ring {:.0f} us, ho_ring@{}K {:.0f} us, gain {:.2f};",
                     messageBytes >> 20, f.ring * 1e6, f.chunkBytes >> 10, f.hoRing * 1e6, m.cacheGain);
}

}  // namespace hoccl::model_tool
