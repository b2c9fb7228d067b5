/// @file overlap.h
/// The operations that let the caller compute between transfers (include/hoccl/hoccl.h, docs/overlap.md): the
/// overlapped all-gather and reduce-scatter with per-block callbacks, and the ring shift, blocking or started on a
/// background thread. Arguments arrive validated by the C edge (src/api/api_overlap.cc); schedules come from
/// algo/overlap.h and run on the executor, with the failure handling of every collective (comm/group.h).
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "comm/communicator.h"
#include "hoccl/hoccl.h"

namespace hoccl::overlap {

/// Runs the overlapped all-gather on the calling thread; onBlock runs on it too.
void allGather(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype,
               hocclBlockCallback_t onBlock, void* user);

/// Runs the overlapped reduce-scatter on the calling thread; produce runs on it too. `op` is valid for dtype.
void reduceScatter(Communicator& comm, void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype,
                   hocclRedOp_t op, hocclProduceCallback_t produce, void* user);

/// Runs the ring shift by k on the calling thread.
void ringShift(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype, int k);

/// Starts the ring shift on a background thread; the communicator is busy (checkIdle) until finish().
hocclRequest* ringShiftStart(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count,
                             hocclDataType_t dtype, int k);
/// Waits for request's thread, frees request, and throws its error if it failed.
void finish(hocclRequest* request);

/// Throws hocclInvalidUsage when comm may not start anything now: one of its callbacks runs on this thread, or a
/// ring shift started by hocclRingShiftStart has not been waited for.
void checkIdle(const Communicator& comm);

}  // namespace hoccl::overlap

/// The C handle of a nonblocking operation (hocclRingShiftStart): the thread that runs it and its outcome.
struct hocclRequest {
  hoccl::Communicator* comm = nullptr;  ///< where it runs (busy until finish)
  std::thread thread;                   ///< runs the operation
  std::atomic<bool> done{false};        ///< set by the thread when it finished (result and error set)
  hocclResult_t result = hocclSuccess;  ///< the operation's result
  std::string error;                    ///< its message when it failed
};
