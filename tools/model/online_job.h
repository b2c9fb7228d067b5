/// @file online_job.h
/// What hoccl-model's online subcommands (online.cc, cache_probe.cc) share: the job they run as (every rank of a
/// launcher's job, one communicator from its environment), its barrier and maximum, and a timer.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "comm/communicator.h"
#include "hoccl/hoccl.h"
#include "topology/link_model.h"

namespace hoccl::model_tool {

/// The clock every probe times with.
using Clock = std::chrono::steady_clock;

/// Seconds since `t`.
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Throws std::runtime_error "WHAT failed: <result> (<hoccl's last error>)" unless `r` is hocclSuccess.
inline void check(hocclResult_t r, const char* what) {
  if (r != hocclSuccess)
    throw std::runtime_error(
        fmt::format("{} failed: {} ({})", what, hocclGetErrorString(r), hocclGetLastError(nullptr)));
}

/// This process's rank of the launcher's job, with a communicator over every rank (RAII).
struct Job {
  hocclComm_t comm = nullptr;  ///< the communicator of the whole job
  int rank = -1;               ///< this rank
  int nranks = 0;              ///< ranks of the job
  /// Joins the job from the launcher environment; throws naming what to run it under.
  Job() {
    check(hocclCommInitFromEnv(&comm, &rank, &nranks),
          "creating the communicator from the launcher environment (run under hoccl-run or tools/cluster/run)");
  }
  ~Job() {
    if (comm) hocclCommDestroy(comm);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  /// Every rank waits for every other (an all-reduce of one float).
  void barrier() {
    float token = 0;
    check(hocclAllReduce(&token, &token, 1, hocclFloat, hocclSum, comm, nullptr), "barrier all-reduce");
  }
  /// The largest `v` of any rank, on every rank.
  double maxOf(double v) {
    check(hocclAllReduce(&v, &v, 1, hocclDouble, hocclMax, comm, nullptr), "max all-reduce");
    return v;
  }
  /// The job's topology as its communicator sees it.
  const topo::Topology& topology() const { return comm->impl->topology(); }
};

/// On a one-host job: the cache term's sizes (hwloc's, as the communicator takes them) and its gain, fitted to the
/// ring against HO-Ring (cache_probe.cc), written into `m`; returns the text for the model file's source ("" and `m`
/// unchanged without cache sizes or with one rank). Every rank takes part.
std::string probeCacheGain(Job& job, topo::LinkModel& m);

}  // namespace hoccl::model_tool
