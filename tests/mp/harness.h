/// @file harness.h
/// Multi-process test harness: forks N real ranks that share one unique id, waits for them with a deadline (killing
/// all on timeout), and reports each rank's exit status. The id (and the bootstrap root's thread) is made in a
/// separate forked process, so that the parent stays single-threaded and never forks beside a running thread.
#pragma once

#include <functional>
#include <string>

#include "hoccl/hoccl.h"

namespace hoccl::test {

/// Body of one rank: returns its exit code (0 = pass).
using RankBody = std::function<int(int rank, int nranks, const hocclUniqueId& id)>;

/// Runs body on nranks forked processes. Returns 0 if all exit 0, else the first failing rank's code (124 on
/// timeout). Prints a line per failing rank.
int runRanks(int nranks, const RankBody& body, int timeoutSeconds = 120);

/// Prints a failure with the rank, and returns 1 (for `return fail(...)`).
int fail(int rank, const std::string& what);

/// Checks a hoccl call; on error prints the call, the code and hocclGetLastError.
#define MP_CHECK(rank, call)                                                                           \
  do {                                                                                                 \
    hocclResult_t rc_ = (call);                                                                        \
    if (rc_ != hocclSuccess)                                                                           \
      return ::hoccl::test::fail(rank, std::string(#call) + " -> " + hocclGetErrorString(rc_) + ": " + \
                                           hocclGetLastError(nullptr));                                \
  } while (0)

}  // namespace hoccl::test
