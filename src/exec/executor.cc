/*
 * The executor: for each communicator, walk its tasks' steps in order. Posting a step hands every Send and Recv to
 * the peer's channel and runs local Copy/Reduce prims at once (a step never reads what another prim of the same step
 * writes: the verifier enforces it). A step is complete when no channel it touched has pending operations. Waiting
 * (sleepNow) spins briefly, then yields, then sleeps on a channel (waitForActivity); on a host with more ranks than
 * cores (8 ranks on 2 cores) it yields at once and keeps yielding, so the peers it waits for get the CPU. Every wait
 * has a deadline (HOCCL_TIMEOUT) and checks the abort flag. A task without a schedule (the one-host fast paths of
 * comm/small_coll.h and comm/cma_coll.h inside a group) drives itself: it is polled until it says it is done.
 */
#include "exec/executor.h"

#include <sched.h>

#include <chrono>
#include <thread>
#include <cstring>
#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Progress of one communicator through its tasks.
struct Cursor {
  Communicator* comm = nullptr;
  std::vector<Task*> tasks;
  size_t task = 0, step = 0;
  bool posted = false;
  bool started = false;  // the current task's `before` hook has run
  std::vector<transport::Channel*> active;  // channels touched by the current step
  bool done() const { return task >= tasks.size(); }
  // Starts over for communicator `c`, keeping the vectors' capacity.
  void reset(Communicator* c) {
    comm = c;
    tasks.clear();
    active.clear();
    task = step = 0;
    posted = started = false;
  }
};

char* at(const Binding& b, uint16_t buf, size_t off) { return b.buffers.at(buf) + off * b.elemSize; }

void postStep(Cursor& c) {
  Task& t = *c.tasks[c.task];
  const Binding& b = t.binding;
  Communicator& comm = *c.comm;
  std::vector<transport::Channel*>& touched = c.active;
  touched.clear();
  auto touch = [&touched](transport::Channel* ch) {
    if (std::find(touched.begin(), touched.end(), ch) == touched.end()) touched.push_back(ch);
  };
  for (const sched::Prim& p : t.schedule->steps[c.step].prims) {
    const size_t bytes = p.count * b.elemSize;
    switch (p.kind) {
      case sched::PrimKind::Send: {
        auto& ch = comm.channel(p.peer);
        ch.postSend(at(b, p.src, p.srcOff), bytes);
        comm.counters().sent[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
        touch(&ch);
        break;
      }
      case sched::PrimKind::Recv: {
        auto& ch = comm.channel(p.peer);
        transport::RecvTarget target;
        target.direct = at(b, p.dst, p.dstOff);
        target.granule = b.elemSize;
        ch.postRecv(bytes, std::move(target));
        comm.counters().received[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
        touch(&ch);
        break;
      }
      case sched::PrimKind::RecvReduce: {
        auto& ch = comm.channel(p.peer);
        transport::RecvTarget target;
        target.granule = b.elemSize;
        // Two pointers (the prim lives in the task's schedule): fits std::function's inline storage.
        target.sink = [pp = &p, bp = &b](const void* data, size_t offset, size_t len) {
          kernels::reduce(at(*bp, pp->dst, pp->dstOff) + offset, at(*bp, pp->src, pp->srcOff) + offset, data,
                          len / bp->elemSize, bp->dtype, bp->op);
        };
        ch.postRecv(bytes, std::move(target));
        comm.counters().received[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
        touch(&ch);
        break;
      }
      case sched::PrimKind::Copy: {
        char* dst = at(b, p.dst, p.dstOff);
        const char* src = at(b, p.src, p.srcOff);
        if (dst != src && bytes) kernels::copy(dst, src, bytes);
        break;
      }
      case sched::PrimKind::Reduce: {
        char* dst = at(b, p.dst, p.dstOff);
        if (bytes) kernels::reduce(dst, dst, at(b, p.src, p.srcOff), p.count, b.dtype, b.op);
        break;
      }
    }
  }
  c.posted = true;
}

std::string pendingPeers(const Cursor& c) {
  std::string peers;
  for (auto* ch : c.active) {
    if (ch->pending() == 0) continue;
    const auto& info = c.comm->rankInfo()[ch->peer()];
    peers += fmt::format("{}rank {} (host {}, pid {}, via {})", peers.empty() ? "" : ", ", ch->peer(), info.hostname,
                         info.pid, c.comm->transportName(ch->peer()));
  }
  return peers;
}

// Moves c forward as far as possible without waiting. Returns true if anything moved.
bool advance(Cursor& c) {
  bool moved = false;
  while (!c.done()) {
    Task& t = *c.tasks[c.task];
    if (!c.started) {
      if (t.before) t.before();
      c.started = true;
    }
    if (t.poll) {  // a self-driven operation (the one-host small and single-copy paths): no steps, no channels
      if (!t.poll()) return moved;
      ++c.task;
      c.started = false;
      moved = true;
      continue;
    }
    if (c.step >= t.schedule->steps.size()) {
      if (t.after) t.after();
      ++c.task;
      c.step = 0;
      c.posted = false;
      c.started = false;
      moved = true;
      continue;
    }
    if (!c.posted) {
      postStep(c);
      moved = true;
    }
    bool pending = false;
    for (auto* ch : c.active) {
      try {
        moved |= ch->progress();
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {} step {}/{} failed: {}", c.comm->describe(), t.what(), c.step + 1,
                                          t.schedule->steps.size(), e.what()));
      }
      pending |= ch->pending() > 0;
    }
    if (pending) return moved;
    ++c.step;
    c.posted = false;
    moved = true;
  }
  return moved;
}

// The waiting policy after `idle` fruitless polls; true means "sleep on a channel now".
// With a core per rank: spin (the peer is microseconds away), then yield a little, then sleep.
// With more ranks than cores on this host: the peer we wait for may need our core, so yield at once and keep
// yielding (like MPI's yield-when-idle); sleep only after a long wait, to not burn a core on a slow peer.
bool sleepNow(unsigned idle, bool oversubscribed) {
  if (oversubscribed) {
    if (idle < 8) return false;
    if (idle < 20000) {
      sched_yield();
      return false;
    }
    return true;
  }
  if (idle < 256) return false;
  if (idle < 320) {
    sched_yield();
    return false;
  }
  return true;
}

}  // namespace

void run(std::vector<Task>& tasks) {
  // Cursors are kept per thread and reused, so that a small call allocates nothing here.
  thread_local std::vector<Cursor> pool;
  std::vector<Cursor>& cursors = pool;
  size_t used = 0;
  for (Task& t : tasks) {
    size_t i = 0;
    while (i < used && cursors[i].comm != t.comm) ++i;
    if (i == used) {
      if (used == cursors.size()) cursors.emplace_back();
      cursors[used++].reset(t.comm);
    }
    cursors[i].tasks.push_back(&t);
  }
  cursors.resize(used);
  // Lets hocclCommAbort (another thread) wait until this run has left the communicators.
  struct InFlight {
    std::vector<Cursor>& cs;
    explicit InFlight(std::vector<Cursor>& c) : cs(c) { for (auto& x : cs) ++x.comm->inFlight; }
    ~InFlight() { for (auto& x : cs) --x.comm->inFlight; }
  } inFlight(cursors);
  static const auto timeout = std::chrono::seconds(params::getInt("TIMEOUT"));
  Clock::time_point lastProgress{};  // read the clock only once waiting starts: most small calls never wait
  unsigned idle = 0;
  bool oversubscribed = false;
  for (const Cursor& c : cursors) oversubscribed |= c.comm->oversubscribed();
  while (true) {
    bool allDone = true, moved = false;
    for (Cursor& c : cursors) {
      if (c.comm->health().aborted() || c.comm->health().failed()) c.comm->health().check(c.comm->describe(), "the run");
      moved |= advance(c);
      allDone &= c.done();
    }
    if (allDone) return;
    if (moved) {
      idle = 0;
      lastProgress = {};
      continue;
    }
    if (idle++ == 0 && lastProgress == Clock::time_point{}) lastProgress = Clock::now();
    if (!sleepNow(idle, oversubscribed)) continue;
    // Sleep on one channel that still waits; short, so that the other channels are polled again soon.
    for (Cursor& c : cursors) {
      if (c.done()) continue;
      for (auto* ch : c.active)
        if (ch->pending()) { ch->waitForActivity(idle < 2000 ? 50 : 200); goto slept; }
    }
    // Only self-driven tasks wait (their peers publish into shared memory, nothing to sleep on): yield for a while,
    // as their own waiting policy does, then nap.
    if (idle < (1u << 17)) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  slept:
    if ((idle & 63) == 0 && Clock::now() - lastProgress > timeout) {
      for (Cursor& c : cursors) {
        if (c.done()) continue;
        Task& t = *c.tasks[c.task];
        if (t.poll)
          throw Error(hocclRemoteError, fmt::format("{}: {} made no progress for {} s, waiting for {}. That peer is "
                                                    "stuck, dead or calling a different operation; check its log. "
                                                    "Raise HOCCL_TIMEOUT if it is only slow.", c.comm->describe(),
                                                    t.what(), timeout.count(), t.waitingFor()));
        throw Error(hocclRemoteError,
                    fmt::format("{}: {} step {}/{} made no progress for {} s, waiting for {}. That peer is stuck, dead "
                                "or calling a different operation; check its log. Raise HOCCL_TIMEOUT if it is only "
                                "slow.", c.comm->describe(), t.what(), c.step + 1, t.schedule->steps.size(),
                                timeout.count(), pendingPeers(c)));
      }
    }
  }
}

}  // namespace hoccl::exec
