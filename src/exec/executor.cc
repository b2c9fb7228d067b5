/*
 * The executor: for each communicator, walk its tasks' steps in order. Posting a step hands every Send and Recv to
 * the peer's channel and runs local Copy/Reduce prims at once (a step never reads what another prim of the same step
 * writes: the verifier enforces it). A step is complete when no channel it touched has pending operations. Waiting
 * spins, yields, then sleeps on a channel (waitForActivity), for as long in each phase as base/wait.h's policy
 * says (Communicator::waitPolicy(): spin while every rank has a free core, block soon when the cores are contended,
 * at once with many ranks per core), so the peers it waits for get the CPU. Every wait has a deadline
 * (HOCCL_TIMEOUT) and checks the communicator's health (abort, a failure reported by any rank). A
 * task without a schedule (a transport's collective shortcut, transports/shortcut.h) drives itself: it is polled
 * until it says it is done. The waiting policy is base/wait.h's, shared with every other wait.
 *
 * Callback prims (Notify, Produce: the overlapped collectives, algo/overlap.h) run last when a step is posted, on
 * this thread, while a helper thread keeps the step's transfers moving (exec/progress_helper.h); a peer failure the
 * helper saw is rethrown here once the callback returned.
 *
 * A task may have a prelude (polled before its first step, never blocking; it may swap the task's schedule for a
 * variant its peers agreed on) and an epilogue (polled after its last step): HO-Ring's host level on mapped memory
 * (comm/host_level_plan.h) runs there.
 *
 * A run holds its communicators' shared connections (Communicator::SharedUse: communicators split with splitShare
 * run one call at a time) from its start to its end.
 *
 * Lazy connections (HOCCL_CONNECT=lazy): before a task starts, its communicator connects every peer the task's
 * schedule names that it has no channel to yet, all at once (Communicator::connect); those peers do the same for the
 * same call, so a ring connects its 2 peers on the first call and reuses them for every later one. A run on one
 * communicator connects the peers of its tasks up to and including the next gate (Task::gate: the mismatch check)
 * together, and those after it once the gate has passed: the check's peers are the same on every rank whatever the
 * call, so ranks whose calls differ meet in the check and fail there at once, and a call connects its own peers only
 * once every rank agreed on it. Several communicators of one group connect all their tasks' peers before anything
 * moves, each in a thread of its own (their ranks may meet them in any order).
 * The peers a run uses are pinned on their communicator for the run (Communicator::beginRun): with HOCCL_MAX_CONNS
 * the communicator closes only other, idle connections (comm/conn_limit.cc). Before connecting, a run waits for the
 * answer to any close request it had sent to one of its peers, answering its peers' requests on every communicator
 * of the run meanwhile; and while it waits for data it answers them every few milliseconds.
 */
#include "exec/executor.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <algorithm>
#include <exception>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "exec/progress_helper.h"

namespace hoccl::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Progress of one communicator through its tasks.
struct Cursor {
  Communicator* comm = nullptr;
  std::vector<Task*> tasks;
  size_t task = 0, step = 0;
  bool posted = false;
  bool started = false;                     // the current task's `before` hook has run
  bool opened = false;                      // the current task's prelude is over
  bool inHook = false;                      // waiting in the current task's prelude or epilogue
  std::vector<transport::Channel*> active;  // channels touched by the current step
  std::vector<int> used;                    // lazy connections: every peer the tasks use, once each (pinned)
  std::vector<int> segment;                 // lazy connections: the peers of tasks [task, ready), once each
  size_t ready = 0;                         // tasks before this one have their peers connected
  bool done() const { return task >= tasks.size(); }
  // Starts over for communicator `c`, keeping the vectors' capacity.
  void reset(Communicator* c) {
    comm = c;
    tasks.clear();
    active.clear();
    used.clear();
    segment.clear();
    task = step = ready = 0;
    posted = started = opened = inHook = false;
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
        transport::Channel& ch = b.staged ? comm.deviceChannel(p.peer) : comm.channel(p.peer);
        ch.postTaggedSend(at(b, p.src, p.srcOff), bytes, t.tag);
        comm.counters().sent[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
        touch(&ch);
        break;
      }
      case sched::PrimKind::Recv: {
        transport::Channel& ch = b.staged ? comm.deviceChannel(p.peer) : comm.channel(p.peer);
        transport::RecvTarget target;
        target.direct = at(b, p.dst, p.dstOff);
        target.granule = b.elemSize;
        target.tag = t.tag;
        ch.postRecv(bytes, std::move(target));
        comm.counters().received[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
        touch(&ch);
        break;
      }
      case sched::PrimKind::RecvReduce: {
        if (b.staged) {  // reduced on the device (from pinned host memory, or the device's own slots)
          transport::DeviceChannel& ch = comm.deviceChannel(p.peer);
          ch.postRecvReduce(at(b, p.dst, p.dstOff), at(b, p.src, p.srcOff), p.count, b.dtype, b.op, t.tag);
          comm.counters().received[comm.topology().linkClass(comm.rank(), p.peer)] += bytes;
          touch(&ch);
          break;
        }
        auto& ch = comm.channel(p.peer);
        transport::RecvTarget target;
        target.granule = b.elemSize;
        target.tag = t.tag;
        // Two pointers (the prim lives in the task's schedule): fits std::function's inline storage.
        target.sink = [pp = &p, bp = &b](const void* data, size_t offset, size_t len) {
          bp->mem->reduce(at(*bp, pp->dst, pp->dstOff) + offset, at(*bp, pp->src, pp->srcOff) + offset, data,
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
        if (dst != src && bytes) b.mem->copy(dst, src, bytes);
        break;
      }
      case sched::PrimKind::Reduce: {
        char* dst = at(b, p.dst, p.dstOff);
        if (bytes) b.mem->reduce(dst, dst, at(b, p.src, p.srcOff), p.count, b.dtype, b.op);
        break;
      }
      case sched::PrimKind::Notify:
      case sched::PrimKind::Produce: break;  // below, once every transfer of the step is posted
    }
  }
  c.posted = true;
  for (const sched::Prim& p : t.schedule->steps[c.step].prims) {
    if (!sched::isCallback(p)) continue;
    if (!t.callback)
      throwInternalError(fmt::format("{}: {} has a callback step but no callback", comm.describe(), t.what()));
    char* data = p.kind == sched::PrimKind::Notify ? at(b, p.src, p.srcOff) : at(b, p.dst, p.dstOff);
    std::exception_ptr helperError = runWhileProgressing(touched, comm.health(), [&] {
      CallbackScope scope(&comm);
      t.callback(p, data);
    });
    if (helperError) {
      try {
        std::rethrow_exception(helperError);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {} step {}/{} failed: {}", comm.describe(), t.what(), c.step + 1,
                                          t.schedule->steps.size(), e.what()));
      }
    }
  }
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

// Lazy connections: every peer that c's tasks [from, to) use, once each, into `out` (left empty in eager mode).
void peersOf(const Cursor& c, size_t from, size_t to, std::vector<int>& out) {
  const Communicator& comm = *c.comm;
  out.clear();
  if (!comm.lazy()) return;
  thread_local std::vector<uint32_t> seen;  // by rank: == epoch when already in out
  thread_local uint32_t epoch = 0;
  if (seen.size() < static_cast<size_t>(comm.nranks())) seen.resize(static_cast<size_t>(comm.nranks()), 0);
  if (++epoch == 0) {
    std::fill(seen.begin(), seen.end(), 0);
    epoch = 1;
  }
  auto use = [&](int p) {
    if (seen[static_cast<size_t>(p)] == epoch) return;
    seen[static_cast<size_t>(p)] = epoch;
    out.push_back(p);
  };
  for (size_t i = from; i < to; ++i) {
    const Task* t = c.tasks[i];
    for (int p : t->peers) use(p);
    if (!t->schedule) continue;
    for (const sched::Step& step : t->schedule->steps)
      for (const sched::Prim& p : step.prims)
        if (p.kind == sched::PrimKind::Send || p.kind == sched::PrimKind::Recv || p.kind == sched::PrimKind::RecvReduce)
          use(p.peer);
  }
}

// Lazy connections: the tasks from c.task on whose peers are connected together (c.ready: the end of them) and those
// peers (c.segment). A run on one communicator connects them up to and including the next gate (the mismatch check),
// so that a call's own peers are connected only once every rank agreed on the call: a rank whose call differs fails
// in the check, which connects the same peers on every rank, instead of waiting (HOCCL_TIMEOUT) to connect a peer
// that makes another call and so never connects to it. Several communicators of one group connect all their tasks'
// peers at once, before anything moves (their ranks may reach the gates of different communicators in any order, and
// a connect blocks the thread: connecting at a gate of one while a peer connects at a gate of the other would wait
// for each other).
void nextSegment(Cursor& c, bool gated) {
  c.ready = c.tasks.size();
  if (!c.comm->lazy()) {
    c.segment.clear();
    return;
  }
  if (gated)
    for (size_t i = c.task; i < c.tasks.size(); ++i)
      if (c.tasks[i]->gate) {
        c.ready = i + 1;
        break;
      }
  peersOf(c, c.task, c.ready, c.segment);
}

// The peers of c.segment that have no usable channel yet, into `missing` (nothing to do, and no allocation, once they
// are all connected).
void unconnectedPeers(const Cursor& c, std::vector<int>& missing) {
  missing.clear();
  for (int p : c.segment)
    if (!c.comm->connected(p)) missing.push_back(p);
}

// The least eager of the communicators' wait policies (base/wait.h): a run waits as politely as its politest
// communicator asks.
WaitPolicy leastEagerPolicy(const std::vector<Cursor>& cursors) {
  WaitPolicy policy = WaitPolicy::Spin;
  for (const Cursor& c : cursors) policy = std::max(policy, c.comm->waitPolicy());
  return policy;
}

// HOCCL_MAX_CONNS: waits until no cursor's peer has a close request of this rank unanswered, answering the peers'
// requests on every communicator of the run meanwhile (comm/conn_limit.cc).
void settleCloses(std::vector<Cursor>& cursors) {
  bool any = false;  // the common case: no request open to a peer of this run, nothing to read
  for (const Cursor& c : cursors)
    for (int p : c.segment) any |= c.comm->closing(p);
  if (!any) return;
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  Backoff backoff(leastEagerPolicy(cursors));
  Clock::time_point start{};
  while (true) {
    bool waiting = false;
    for (Cursor& c : cursors)
      if (!c.segment.empty()) waiting |= c.comm->serviceIdle(c.segment);
    if (!waiting) return;
    for (Cursor& c : cursors) {
      Health& health = c.comm->health();
      if (health.aborted() || health.failed())
        health.check(c.comm->describe(), "waiting for a peer to answer the request to close an idle connection");
    }
    if (start == Clock::time_point{}) start = Clock::now();
    backoff.pause();
    if ((backoff.idle() & 63) == 0 && Clock::now() - start > timeout)
      throw Error(hocclTimeout, silentPeerMessage(cursors[0].comm->describe(),
                                                  "waiting for the answer to a request to close an idle connection "
                                                  "(HOCCL_MAX_CONNS)",
                                                  timeout.count(), "a peer of this call"));
  }
}

// Connects what every cursor's schedules need. Communicators of one group may need each other's peers in any order
// on different ranks (rank 0 connects X then Y, rank 1 Y then X), so when several communicators have peers to
// connect, each connects in a thread of its own, all at once.
void connectPeers(std::vector<Cursor>& cursors) {
  thread_local std::vector<std::vector<int>> missing;
  if (missing.size() < cursors.size()) missing.resize(cursors.size());
  size_t needing = 0;
  for (size_t i = 0; i < cursors.size(); ++i) {
    unconnectedPeers(cursors[i], missing[i]);
    needing += !missing[i].empty();
  }
  if (needing == 0) return;
  if (cursors.size() == 1) {
    cursors[0].comm->connect(missing[0]);
    return;
  }
  std::vector<std::exception_ptr> errors(cursors.size());
  std::vector<std::thread> threads;
  std::atomic<size_t> finished{0};
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (missing[i].empty()) continue;
    threads.emplace_back([&, i, peers = missing[i]] {
      try {
        cursors[i].comm->connect(peers);  // answers its communicator's close requests meanwhile
      } catch (...) {
        errors[i] = std::current_exception();
      }
      ++finished;
    });
  }
  // HOCCL_MAX_CONNS: the communicators that connect nothing answer their peers' close requests here meanwhile.
  while (finished.load() < threads.size()) {
    for (size_t i = 0; i < cursors.size(); ++i) {
      if (!missing[i].empty() || !cursors[i].comm->lazy()) continue;
      try {
        cursors[i].comm->serviceIdle();
      } catch (const Error&) {
        // a peer that left: the run reports it where it needs that peer
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Moves c forward as far as possible without waiting. Returns true if anything moved.
bool advance(Cursor& c) {
  bool moved = false;
  while (!c.done()) {
    if (c.task >= c.ready) return moved;  // its peers are connected first (run)
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
    if (!c.opened) {  // a prelude may swap the schedule, so it runs before anything reads the steps
      c.inHook = static_cast<bool>(t.prelude);
      if (t.prelude && !t.prelude(t)) return moved;
      c.opened = true;
      c.inHook = false;
    }
    if (c.step >= t.schedule->steps.size()) {
      c.inHook = static_cast<bool>(t.epilogue);
      if (t.epilogue && !t.epilogue()) return moved;
      c.inHook = false;
      if (t.after) t.after();
      ++c.task;
      c.step = 0;
      c.posted = false;
      c.started = false;
      c.opened = false;
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
        throw Error(e.code(),
                    fmt::format("{}: {} step {}/{} failed: {}", c.comm->describe(), t.what(), c.step + 1,
                                t.schedule->steps.size(), e.what()),
                    e.isMismatch());
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

// Sleeps up to `micros` on one channel that still has pending work (short, so that the others are polled again
// soon); false when no channel waits (only shortcuts do).
bool blockOnChannel(std::vector<Cursor>& cursors, int micros) {
  for (Cursor& c : cursors) {
    if (c.done()) continue;
    for (auto* ch : c.active)
      if (ch->pending()) {
        ch->waitForActivity(micros);
        return true;
      }
  }
  return false;
}

// What the cursor runs now, for messages.
std::string currentWhat(const Cursor& c) {
  return c.done() ? std::string("the run") : c.tasks[c.task]->what ? c.tasks[c.task]->what() : std::string("a task");
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
  // Lets hocclCommAbort (another thread) wait until this run has left the communicators. First the run claims the
  // connections of communicators that share them (splitShare, comm/connection_share.cc): a member of a family
  // whose connections another member is using fails here, before anything moved.
  struct InFlight {
    std::vector<Cursor>& cs;
    std::vector<Communicator::SharedUse> claims;
    explicit InFlight(std::vector<Cursor>& c) : cs(c) {
      claims.reserve(cs.size());
      for (auto& x : cs) claims.emplace_back(*x.comm);
      for (auto& x : cs) ++x.comm->inFlight;
    }
    ~InFlight() {
      for (auto& x : cs) --x.comm->inFlight;
    }
  } inFlight(cursors);
  // Lazy connections: the peers each communicator's tasks use, pinned for the run (HOCCL_MAX_CONNS closes others).
  struct Pins {
    std::vector<Cursor>& cs;
    size_t begun = 0;  // beginRun pins before anything that may throw: those are unpinned whatever happens
    explicit Pins(std::vector<Cursor>& c) : cs(c) {}
    void begin() {
      for (auto& x : cs) peersOf(x, 0, x.tasks.size(), x.used);
      for (auto& x : cs) {
        ++begun;
        if (!x.used.empty()) x.comm->beginRun(x.used);
      }
    }
    ~Pins() {
      for (size_t i = 0; i < begun; ++i)
        if (!cs[i].used.empty()) cs[i].comm->endRun(cs[i].used);
    }
  } pins(cursors);
  pins.begin();
  const bool gated = cursors.size() == 1;
  for (Cursor& c : cursors) nextSegment(c, gated);
  settleCloses(cursors);
  connectPeers(cursors);
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  Clock::time_point lastProgress{};  // read the clock only once waiting starts: most small calls never wait
  Clock::time_point lastService{};   // the last answering of close requests while waiting
  Backoff backoff(leastEagerPolicy(cursors));
  while (true) {
    bool allDone = true, moved = false;
    for (Cursor& c : cursors) {
      Health& health = c.comm->health();
      if (health.aborted() || health.failed()) health.check(c.comm->describe(), currentWhat(c));
      if (!c.done() && c.task >= c.ready) {  // past a gate (one communicator only): the next tasks' peers
        nextSegment(c, gated);
        settleCloses(cursors);
        connectPeers(cursors);
        moved = true;
      }
      moved |= advance(c);
      allDone &= c.done();
    }
    if (allDone) return;
    if (moved) {
      backoff.reset();
      lastProgress = {};
      continue;
    }
    if (backoff.idle() == 0 && lastProgress == Clock::time_point{}) lastProgress = Clock::now();
    const WaitAction action = backoff.next();
    if (action == WaitAction::Spin) {
      Backoff::cpuRelax();
      continue;
    }
    if (action == WaitAction::Yield) {
      sched_yield();
    } else if (!blockOnChannel(cursors, backoff.blockMicros())) {
      // Only shortcuts wait (their peers publish into shared memory, nothing to sleep on): a short nap.
      std::this_thread::sleep_for(std::chrono::microseconds(backoff.blockMicros()));
    }
    if ((backoff.idle() & 63) == 0) {  // HOCCL_MAX_CONNS: answer the peers' close requests every few milliseconds
      static constexpr auto kServiceEvery = std::chrono::milliseconds(2);
      const Clock::time_point now = Clock::now();
      if (now - lastService > kServiceEvery) {
        lastService = now;
        for (Cursor& c : cursors)
          if (c.comm->lazy()) c.comm->serviceIdle();
      }
    }
    if ((backoff.idle() & 63) == 0 && Clock::now() - lastProgress > timeout) {
      for (Cursor& c : cursors) {
        if (c.done()) continue;
        Task& t = *c.tasks[c.task];
        if (t.poll || (c.inHook && t.waitingFor))
          throw Error(hocclTimeout, silentPeerMessage(c.comm->describe(), t.what(), timeout.count(), t.waitingFor()));
        throw Error(hocclTimeout,
                    silentPeerMessage(c.comm->describe(),
                                      fmt::format("{} step {}/{}", t.what(), c.step + 1, t.schedule->steps.size()),
                                      timeout.count(), pendingPeers(c)));
      }
    }
  }
}

}  // namespace hoccl::exec
