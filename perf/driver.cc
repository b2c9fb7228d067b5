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

/// Reads an integer environment variable; false when unset, exits with a message when malformed.
bool envInt(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0 || x > 1 << 24) {
    fmt::print(stderr, "hoccl perf: {}='{}' is not a valid rank or size\n", name, v);
    std::exit(2);
  }
  *out = static_cast<int>(x);
  return true;
}

/// Finds the process rank and count from a launcher (hoccl-run, Open MPI, PMI, Slurm), in that order.
void detectLauncher(Job* job) {
  static const char* kPairs[][2] = {{"HOCCL_RANK", "HOCCL_WORLD_SIZE"},
                                    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                    {"PMI_RANK", "PMI_SIZE"},
                                    {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& p : kPairs) {
    int rank = 0, size = 0;
    bool hasRank = envInt(p[0], &rank), hasSize = envInt(p[1], &size);
    if (!hasRank && !hasSize) continue;
    if (!hasRank || !hasSize || size < 1 || rank >= size) {
      fmt::print(stderr, "hoccl perf: inconsistent launcher environment: {}={} {}={}\n", p[0],
                 std::getenv(p[0]) ? std::getenv(p[0]) : "(unset)", p[1],
                 std::getenv(p[1]) ? std::getenv(p[1]) : "(unset)");
      std::exit(2);
    }
    job->launched = true;
    job->procRank = rank;
    job->nProcs = size;
    return;
  }
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
  detectLauncher(&job);
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
