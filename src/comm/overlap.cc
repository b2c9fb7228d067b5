// The overlapped collectives and the ring shift (see overlap.h): bind the schedules of algo/overlap.h to the call's
// buffers and callbacks and run them like any collective (comm/group.h: sequence number, flight recorder, failure
// shared with every rank). A callback's failure becomes an error that breaks the communicator: the peers are in the
// middle of the ring with this rank, so they must be released through the failure verdict rather than time out.
#include "comm/overlap.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "algo/overlap.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "comm/group.h"
#include "comm/plan.h"
#include "comm/redop.h"
#include "exec/executor.h"
#include "exec/progress_helper.h"
#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"

namespace hoccl::overlap {
namespace {

// Communicators with a started ring shift not yet waited for; busyCount mirrors busyComms.size() so that every call
// (checkIdle) skips the lock while no ring shift is in flight anywhere in the process.
std::mutex busyMutex;
std::set<const Communicator*> busyComms;
std::atomic<size_t> busyCount{0};

// The task of one schedule on host buffers (input, output, scratch).
exec::Task makeTask(Communicator& comm, Op& op, sched::Schedule schedule, const void* in, void* out) {
  exec::Task t;
  t.comm = &comm;
  const size_t elem = kernels::typeSize(op.dtype);
  char* scratch = static_cast<char*>(comm.scratch(schedule.scratchCount * elem));
  t.schedule = std::make_shared<const sched::Schedule>(std::move(schedule));
  t.binding.elemSize = elem;
  t.binding.dtype = op.dtype;
  t.binding.op = kernels::binOpOf(op.op);
  t.binding.buffers = {const_cast<char*>(static_cast<const char*>(in)), static_cast<char*>(out), scratch};
  t.what = [opp = &op, name = t.schedule->algorithm] { return describeOp(*opp) + " [" + name + "]"; };
  return t;
}

sched::CollArgs argsOf(const Communicator& comm, sched::Coll coll, size_t count, bool inPlace) {
  sched::CollArgs a;
  a.coll = coll;
  a.rank = comm.rank();
  a.nranks = comm.nranks();
  a.count = count;
  a.inPlace = inPlace;
  return a;
}

// A callback that failed: the message names the callback, the block and what it did; the communicator is broken.
[[noreturn]] void callbackFailed(const Communicator& comm, const Op& op, const char* callback, const char* role,
                                 int tag, const std::string& what) {
  throw Error(hocclInvalidUsage,
              fmt::format("{}: {}: the {} callback {} for the block {} rank {}; the operation stopped and the "
                          "communicator cannot be used any more (the other ranks fail naming this rank): destroy it "
                          "with hocclCommAbort",
                          comm.describe(), describeOp(op), callback, what, role, tag),
              /*breaksCommunicator=*/true);
}

// Calls a user callback; its non-zero result or exception becomes callbackFailed.
template <class F>
void callUser(const Communicator& comm, const Op& op, const char* callback, const char* role, int tag, F&& f) {
  int rc = 0;
  try {
    rc = f();
  } catch (const std::exception& e) {
    callbackFailed(comm, op, callback, role, tag, fmt::format("threw '{}'", e.what()));
  } catch (...) {
    callbackFailed(comm, op, callback, role, tag, "threw an exception");
  }
  if (rc != 0) callbackFailed(comm, op, callback, role, tag, fmt::format("returned {}", rc));
}

Op opFor(Communicator& comm, const char* label, sched::Coll coll, const void* in, void* out, size_t count,
         hocclDataType_t dtype, hocclRedOp_t redop) {
  Op op;
  op.kind = Op::Kind::Collective;
  op.comm = &comm;
  op.coll = coll;
  op.sendbuf = in;
  op.recvbuf = out;
  op.count = count;
  op.dtype = dtype;
  op.op = redop;
  op.label = label;
  return op;
}

}  // namespace

void checkIdle(const Communicator& comm) {
  if (exec::callbackOwner() == &comm)
    throwInvalidUsage(
        fmt::format("{}: hoccl was called on this communicator from inside one of its overlap "
                    "callbacks; the callback may only compute: make the call after the operation returns",
                    comm.describe()));
  if (busyCount.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(busyMutex);
  if (busyComms.count(&comm))
    throwInvalidUsage(
        fmt::format("{}: a ring shift started by hocclRingShiftStart is still in flight on this "
                    "communicator; call hocclWait on its request first",
                    comm.describe()));
}

void allGather(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype,
               hocclBlockCallback_t onBlock, void* user) {
  checkIdle(comm);
  const size_t elem = kernels::typeSize(dtype);
  const bool inPlace = static_cast<const char*>(sendbuf) == static_cast<char*>(recvbuf) + comm.rank() * count * elem;
  Op op = opFor(comm, "AllGatherOverlap", sched::Coll::AllGather, sendbuf, recvbuf, count, dtype, hocclSum);
  sched::Schedule s = algo::overlapAllGatherSchedule(argsOf(comm, sched::Coll::AllGather, count, inPlace),
                                                     comm.topology(), params::OVERLAP_TWO_LEVEL.get() != 0);
  const std::string algorithm = s.algorithm;
  std::vector<exec::Task> tasks{makeTask(comm, op, std::move(s), sendbuf, recvbuf)};
  tasks[0].callback = [&](const sched::Prim& p, char* data) {
    callUser(comm, op, "onBlock", "of", p.peer,
             [&] { return onBlock(user, p.peer, p.count ? data : nullptr, p.count); });
  };
  runTasksFor(op, algorithm.c_str(), tasks);
}

void reduceScatter(Communicator& comm, void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype,
                   hocclRedOp_t redop, hocclProduceCallback_t produce, void* user) {
  checkIdle(comm);
  const size_t elem = kernels::typeSize(dtype);
  const bool inPlace = static_cast<char*>(recvbuf) == static_cast<char*>(sendbuf) + comm.rank() * count * elem;
  Op op = opFor(comm, "ReduceScatterOverlap", sched::Coll::ReduceScatter, sendbuf, recvbuf, count, dtype, redop);
  sched::Schedule s = algo::overlapReduceScatterSchedule(argsOf(comm, sched::Coll::ReduceScatter, count, inPlace),
                                                         comm.topology(), params::OVERLAP_TWO_LEVEL.get() != 0);
  const std::string algorithm = s.algorithm;
  std::vector<exec::Task> tasks{makeTask(comm, op, std::move(s), sendbuf, recvbuf)};
  const std::optional<PreMulSumOp> premul = findPreMulSum(redop);
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  tasks[0].callback = [&](const sched::Prim& p, char* data) {
    callUser(comm, op, "produce", "for", p.peer,
             [&] { return produce(user, p.peer, p.count ? data : nullptr, p.count); });
    if (premul && p.count) {  // PreMulSum: scale the block as it was produced, then sum
      const void* scalar = premul->residence == hocclScalarHostImmediate ? premul->value.data() : premul->pointer;
      mem.scale(data, data, p.count, dtype, scalar);
    }
  };
  if (redop == hocclAvg && count)
    tasks[0].after = [recvbuf, count, dtype, n = comm.nranks(), &mem] { mem.divide(recvbuf, count, dtype, n); };
  runTasksFor(op, algorithm.c_str(), tasks);
}

namespace {

void runRingShift(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype, int k) {
  Op op = opFor(comm, "RingShift", sched::Coll::AllReduce, sendbuf, recvbuf, count, dtype, hocclSum);
  op.kind = Op::Kind::Send;  // recorded as a point-to-point op: it takes no collective sequence number
  op.peer = static_cast<int>(((static_cast<long long>(k) % comm.nranks()) + comm.nranks()) % comm.nranks());
  op.peer = (comm.rank() + op.peer) % comm.nranks();
  sched::Schedule s = algo::ringShiftSchedule(argsOf(comm, sched::Coll::AllReduce, count, sendbuf == recvbuf), k);
  std::vector<exec::Task> tasks{makeTask(comm, op, std::move(s), sendbuf, recvbuf)};
  runTasksFor(op, "ring_shift", tasks);
}

}  // namespace

void ringShift(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count, hocclDataType_t dtype, int k) {
  checkIdle(comm);
  runRingShift(comm, sendbuf, recvbuf, count, dtype, k);
}

hocclRequest* ringShiftStart(Communicator& comm, const void* sendbuf, void* recvbuf, size_t count,
                             hocclDataType_t dtype, int k) {
  checkIdle(comm);
  auto req = std::make_unique<hocclRequest>();
  req->comm = &comm;
  {
    std::lock_guard<std::mutex> lock(busyMutex);
    busyComms.insert(&comm);
    busyCount.store(busyComms.size(), std::memory_order_release);
  }
  hocclRequest* r = req.get();
  try {
    // The guard keeps hocclCommAbort (another thread) waiting until the thread no longer touches the communicator.
    auto guard = std::make_shared<InFlightGuard>(comm);
    r->thread = std::thread([r, guard, &comm, sendbuf, recvbuf, count, dtype, k]() mutable {
      try {
        runRingShift(comm, sendbuf, recvbuf, count, dtype, k);
      } catch (const Error& e) {
        r->result = e.code();
        r->error = e.what();
      } catch (const std::exception& e) {
        r->result = hocclInternalError;
        r->error = std::string("internal error: ") + e.what();
      }
      guard.reset();
      r->done.store(true, std::memory_order_release);
    });
  } catch (...) {
    std::lock_guard<std::mutex> lock(busyMutex);
    busyComms.erase(&comm);
    busyCount.store(busyComms.size(), std::memory_order_release);
    throw;
  }
  return req.release();
}

void finish(hocclRequest* request) {
  std::unique_ptr<hocclRequest> req(request);
  if (req->thread.joinable()) req->thread.join();
  {
    std::lock_guard<std::mutex> lock(busyMutex);
    busyComms.erase(req->comm);
    busyCount.store(busyComms.size(), std::memory_order_release);
  }
  if (req->result != hocclSuccess) throw Error(req->result, req->error);
}

}  // namespace hoccl::overlap
