/// @file rank.h
/// What one rank of a perf tool does: create its communicator, sweep types x ops x roots x sizes, time and check
/// each collective, and (on global rank 0) print the table.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "options.h"
#include "report.h"

namespace hoccl_perf {

/// How the ranks of this run are laid out and started; shared by the threads of one process.
struct Job {
  const CollTest* test = nullptr;  ///< the collective
  Options opts;                    ///< the command line
  int nProcs = 1;                  ///< processes (from the launcher environment)
  int procRank = 0;                ///< this process's index
  bool launched = false;           ///< started by a launcher: init from HOCCL_COMM_ID / HOCCL_AUTH_TOKEN
  hocclUniqueId id{};              ///< without a launcher: the id made by this process for its threads
  /// Per-thread deadline for the watchdog (-T), nanoseconds of steady clock, 0 = none.
  std::unique_ptr<std::atomic<int64_t>[]> deadlines;
  std::mutex whatMutex;           ///< guards `what`
  std::vector<std::string> what;  ///< per thread: the test in progress, for the timeout message
  /// World size.
  int worldSize() const { return nProcs * opts.nThreads; }
};

/// Runs rank `thread` of this process; returns its exit code (0 ok, 1 wrong values or failure, 2 usage error).
int runRank(Job& job, int thread);

}  // namespace hoccl_perf
