/// @file verifier.h
/// The second interpreter: runs the schedules of all ranks in memory, with double-precision data, under rendezvous
/// semantics (a send completes only when the peer's current step holds the matching receive). It detects
/// deadlocks, FIFO/size mismatches and out-of-range buffer accesses, so every algorithm can be checked for every rank
/// count, shape, count and in-place binding without a network.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sched/schedule.h"

namespace hoccl::sched {

/// One rank's memory for the verifier: a set of buffers (index = buffer id) that may alias each other.
struct VerifyRank {
  /// A window [offset, offset+count) of one of `arrays`.
  struct View {
    int array = -1;     ///< index into arrays (-1 = buffer not bound)
    size_t offset = 0;  ///< first element
    size_t count = 0;   ///< elements visible
  };
  std::vector<std::vector<double>> arrays;  ///< the rank's real memory
  std::vector<View> views;                  ///< buffer id -> window
};

/// The binary reduction used by RecvReduce and Reduce prims.
using VerifyOp = std::function<double(double, double)>;

/// What the verifier does for the callback prims (PrimKind::Notify, PrimKind::Produce) of the overlapped
/// collectives. They run when their step is posted, after its sends took their data, like the executor's (which runs
/// them while the step's transfers are in flight). Either may be empty: Notify prims are then ignored, and Produce
/// prims leave their memory as it is.
struct VerifyCallbacks {
  /// A Notify prim: rank, tag (the prim's peer field), the memory it names, read-only.
  std::function<void(int rank, int tag, const double* data, size_t count)> notify;
  /// A Produce prim: rank, tag, the memory it names, to be written.
  std::function<void(int rank, int tag, double* data, size_t count)> produce;
};

/// Runs every rank's schedule (schedules[r] for rank r) over ranks[r]. Throws std::runtime_error describing the
/// first deadlock, mismatch or out-of-range access (rank, step, prim).
void verify(const std::vector<Schedule>& schedules, std::vector<VerifyRank>& ranks, const VerifyOp& op,
            const VerifyCallbacks& callbacks = {});

/// Convenience for collectives: binds kInput/kOutput/kScratch (aliased per `inPlace` as the C API defines it) with
/// the given input data per rank, runs the schedules and returns each rank's output buffer.
std::vector<std::vector<double>> runCollective(const std::vector<Schedule>& schedules, const CollArgs& args,
                                               const std::vector<std::vector<double>>& inputs, bool inPlace,
                                               const VerifyOp& op, const VerifyCallbacks& callbacks = {});

/// The expected outputs of a collective computed directly (the reference), for inputs per rank.
std::vector<std::vector<double>> referenceCollective(const CollArgs& args,
                                                     const std::vector<std::vector<double>>& inputs,
                                                     const VerifyOp& op);

}  // namespace hoccl::sched
