/// @file driver.cc
/// perfMain: command line, the layout of ranks (processes from a launcher x threads from -t), the -T watchdog, and
/// the threads that run the ranks.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "options.h"
#include "rank.h"

namespace hoccl_perf {
namespace {

/// Finds the process rank and count from the launcher (hoccl-run, torchrun, Open MPI, PMIx, MPICH, Slurm), as the
/// library reads it (docs/launchers.md). Under a launcher of several processes the ranks form one job whose root the
/// library finds from the launcher (hocclCommInitRankFromEnv); it never falls back to separate 1-rank jobs. Returns
/// false (after a message) when the launcher environment is unusable.
bool detectLauncher(Job* job, const char* tool) {
  int rank = 0, size = 0;
  const char* launcher = nullptr;
  hocclResult_t r = hocclGetLauncherRank(&rank, &size, nullptr, nullptr, &launcher);
  if (r != hocclSuccess) {
    fmt::print(stderr, "{}: cannot read the launcher environment: {}\n", tool, hocclGetLastError(nullptr));
    return false;
  }
  if (size <= 1) return true;  // no launcher, or one process: this process makes the id for its threads
  job->launched = true;
  job->procRank = rank;
  job->nProcs = size;
  return true;
}

/// Exits the process when a rank's current test passes its -T deadline.
void watchdog(Job* job, const std::atomic<bool>* done) {
  const int n = job->opts.nThreads;
  while (!done->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    for (int t = 0; t < n; ++t) {
      int64_t d = job->deadlines[t].load();
      if (d != 0 && now > d) {
        std::string what;
        {
          std::lock_guard<std::mutex> lock(job->whatMutex);
          what = job->what[t];
        }
        std::fflush(stdout);
        fmt::print(stderr, "{}: timeout: {} did not finish within -T {} s; exiting\n", job->test->name, what,
                   job->opts.timeoutSec);
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }
}

}  // namespace

int perfMain(int argc, char** argv, const CollTest& test) {
  Job job;
  job.test = &test;
  int rc = parseOptions(argc, argv, test.name, &job.opts);
  if (rc >= 0) return rc;
  // -G: refused before any communicator exists, on every rank alike (the device is chosen by the environment).
  if (job.opts.graphLaunches != 0) {
    const char* deviceName = nullptr;
    if (hocclDeviceName(&deviceName) != hocclSuccess) deviceName = nullptr;
    fmt::print(stderr, "{}: {}\n", test.name, graphRefusal(job.opts, deviceName));
    return 2;
  }
  if (!detectLauncher(&job, test.name)) return 2;
  const int nThreads = job.opts.nThreads;
  if (!job.launched) {
    hocclResult_t r = hocclGetUniqueId(&job.id);
    if (r != hocclSuccess) {
      fmt::print(stderr, "{}: hocclGetUniqueId failed: {} ({})\n", test.name, hocclGetErrorString(r),
                 hocclGetLastError(nullptr));
      return 1;
    }
  }
  job.deadlines.reset(new std::atomic<int64_t>[nThreads]);
  for (int t = 0; t < nThreads; ++t) job.deadlines[t] = 0;
  job.what.assign(nThreads, "");

  std::atomic<bool> done{false};
  std::thread dog;
  if (job.opts.timeoutSec > 0) dog = std::thread(watchdog, &job, &done);
  std::vector<int> codes(nThreads, 0);
  if (nThreads == 1) {
    codes[0] = runRank(job, 0);
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < nThreads; ++t) threads.emplace_back([&job, &codes, t] { codes[t] = runRank(job, t); });
    for (auto& th : threads) th.join();
  }
  done = true;
  if (dog.joinable()) dog.join();
  int worst = 0;
  for (int c : codes) worst = std::max(worst, c);
  return worst;
}

}  // namespace hoccl_perf
