// Groups and enqueueing (see group.h).
#include "comm/group.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "comm/call_check.h"
#include "comm/flight_recorder.h"
#include "comm/one_shot.h"
#include "comm/overlap.h"
#include "comm/plan.h"
#include "comm/proxy.h"
#include "base/error.h"
#include "base/log.h"
#include "algo/predict.h"
#include "algo/registry.h"
#include "algo/tuner.h"
#include "exec/executor.h"
#include "kernels/cpu/reduce.h"

namespace hoccl {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
};

GroupState& state() {
  thread_local GroupState s;
  return s;
}

// Runs f on behalf of ops; a transport-level failure or a mismatch of calls leaves their communicators unusable, so
// it is recorded as
// their async error and shared with every other rank through the bootstrap (base/boot/root_server.cc): the root
// names one culprit for the whole communicator and releases everybody's waits. Unless the root chose this rank's own
// report, the call fails with the root's verdict (the same culprit and words on every rank) instead of what this
// rank saw (often only a survivor stopping, or a peer's connection closing after it aborted).
//
// Every op's flight-recorder entry ends as done (untimed with `endUntimed`: FlightRecorder::doneUntimed) or failed
// here; a failure writes the dump (HOCCL_TRACE_DUMP).
// The whole of a call counts as in flight on its communicators (one count per op), its failure's recording
// included: hocclCommAbort (another thread) waits for the count to fall to 0 before it frees a communicator, and the
// executor's own count ends when the run throws, before the recording below reads the communicator's recorder.
class OpsInFlight {
 public:
  OpsInFlight(const Op* ops, size_t n) : ops_(ops), n_(n) {
    for (size_t i = 0; i < n_; ++i) ++ops_[i].comm->inFlight;
  }
  ~OpsInFlight() {
    for (size_t i = 0; i < n_; ++i) --ops_[i].comm->inFlight;
  }
  OpsInFlight(const OpsInFlight&) = delete;
  OpsInFlight& operator=(const OpsInFlight&) = delete;

 private:
  const Op* ops_;
  size_t n_;
};

template <class F>
void recordingFailures(const Op* ops, size_t n, F&& f, bool endUntimed = false) {
  const OpsInFlight inFlight(ops, n);
  auto finish = [&](TraceState state) {
    for (size_t i = 0; i < n; ++i) ops[i].comm->recorder().update(ops[i].traceId, state);
  };
  try {
    f();
    if (endUntimed)
      for (size_t i = 0; i < n; ++i) ops[i].comm->recorder().doneUntimed(ops[i].traceId);
    else finish(TraceState::Done);
  } catch (const Error& e) {
    finish(TraceState::Failed);
    const std::string dumped = FlightRecorder::dumpAll(std::string("error: ") + e.what(), ops[0].comm->rank());
    if (!dumped.empty()) HOCCL_WARN(kColl, "flight recorder written to {}", dumped);
    if (e.breaksCommunicator()) {
      for (size_t i = 0; i < n; ++i) {
        int expected = hocclSuccess;
        ops[i].comm->asyncError.compare_exchange_strong(expected, e.code());
        // A dead peer's memory mapped by the shortcuts goes now. Only from host ops: they run the shortcuts, on this
        // thread (device ops fail on the proxy's thread and never use a shortcut).
        if (!ops[i].onDevice())
          for (const auto& s : ops[i].comm->shortcuts()) s->releasePeerMemory();
        if (!ops[i].onDevice() && ops[i].comm->hostLevel()) ops[i].comm->hostLevel()->releasePeerMemory();
      }
      std::string verdict;
      const Communicator* blamed = nullptr;
      for (size_t i = 0; i < n; ++i) {
        Communicator* c = ops[i].comm;
        bool seen = false;
        for (size_t j = 0; j < i; ++j) seen |= ops[j].comm == c;
        if (seen || c->health().aborted()) continue;  // an abort is announced by hocclCommAbort itself
        std::string v = c->bootstrap().shareFailure(e.what(), std::chrono::seconds(2), e.isMismatch());
        if (verdict.empty() && !v.empty()) {
          verdict = v;
          blamed = c;
        }
      }
      if (blamed) {
        // The verdict names the culprit; the code stays hocclTimeout when this rank's own wait ran out.
        Error culprit(e.code() == hocclTimeout ? hocclTimeout : hocclRemoteError,
                      fmt::format("{}: {} stopped: {}", blamed->describe(),
                                  n == 1 ? describeOp(ops[0]) : fmt::format("a group of {} operations", n), verdict));
        // The async error says what the call returns (this rank's own code, e.g. a system error of a lazy connect
        // to a dead peer, gave way to the verdict's).
        for (size_t i = 0; i < n; ++i) {
          int expected = e.code();
          ops[i].comm->asyncError.compare_exchange_strong(expected, culprit.code());
        }
        HOCCL_WARN(kColl, "{}", culprit.what());
        throw culprit;
      }
    }
    HOCCL_WARN(kColl, "{}", e.what());
    throw;
  } catch (...) {
    finish(TraceState::Failed);
    throw;
  }
}

// The flight-recorder entry of op; `algorithm` may be null (not chosen yet).
TraceEntry traceEntryOf(const Op& op, const char* algorithm) {
  TraceEntry e;
  e.count = op.count;
  e.dtype = op.dtype;
  e.algorithm = algorithm;
  if (op.kind != Op::Kind::Collective) {
    e.kind = op.kind == Op::Kind::Send ? TraceEntry::Kind::Send : TraceEntry::Kind::Recv;
    e.peer = op.peer;
    e.bytes = op.count * kernels::typeSize(op.dtype);
    return e;
  }
  e.coll = op.coll;
  e.bytes = largestBufferBytes(op);
  e.op = op.coll == Coll::AllReduce || op.coll == Coll::Reduce || op.coll == Coll::ReduceScatter ? op.op : -1;
  e.root = isRooted(op.coll) ? op.root : -1;
  return e;
}

// Gives a collective its sequence number (in call order per communicator) and notes it on the call boards, for peers
// that wait in a shortcut.
void number(Op& op) {
  if (op.kind != Op::Kind::Collective || op.numbered) return;
  Communicator& comm = *op.comm;
  op.seq = comm.nextSeq();
  op.numbered = true;
  const transport::CollCall call = collCallOf(op);
  for (const auto& s : comm.shortcuts()) s->noteCall(call);
}

// Starts op: numbers a collective (when it starts, so that a discarded group takes none; a stream-ordered one was
// numbered when enqueued) and records it as running with what runs it (a new entry unless enqueued in a group).
void start(Op& op, const char* algorithm) {
  Communicator& comm = *op.comm;
  const bool coll = op.kind == Op::Kind::Collective;
  number(op);
  FlightRecorder& rec = comm.recorder();
  if (op.recorded) {
    rec.update(op.traceId, TraceState::Running, algorithm, coll ? static_cast<int64_t>(op.seq) : -1);
    return;
  }
  if (!rec.enabled()) return;  // HOCCL_TRACE_SIZE=0
  TraceEntry e = traceEntryOf(op, algorithm);
  if (coll) e.seq = static_cast<int64_t>(op.seq);
  op.traceId = rec.record(e, TraceState::Running);
}

// A call on the fast path whose buffers are all smaller than this ends untimed in the flight recorder: it takes
// microseconds, below the recorder clock's tick, and the recorder's lock and clock read at its end were a good part
// of its time (2-rank all-reduce of 64 B, 20 alternated launches: 0.45 us a call without the recorder, 0.54 with
// it; docs/performance.md, "Small calls").
constexpr size_t kUntimedBelowBytes = size_t{1} << 20;

// A single collective that the tuner gives to a transport's shortcut runs here, without planning or the executor;
// false when op is not such a call. `r` is resolve(op).
bool runFastPath(Op& op, const Resolved& r) {
  if (!r.decision->choice.shortcut) return false;
  start(op, r.decision->choice.shortcut->name());
  auto run = [&] {
    if (checkWanted(op)) checkCall(op);
    runShortcut(op, r);
  };
  recordingFailures(&op, 1, run, largestBufferBytes(op) < kUntimedBelowBytes);
  return true;
}

// Plans ops and runs them on the executor.
void execute(std::vector<Op> ops) {
  for (Op& op : ops) start(op, op.kind == Op::Kind::Collective ? resolve(op).decision->choice.name() : "p2p");
  recordingFailures(ops.data(), ops.size(), [&] {
    std::vector<exec::Task> tasks = planTasks(ops);  // with the mismatch checks (comm/call_check.h) before calls
    exec::run(tasks);
  });
}

}  // namespace

void runTasksFor(Op& op, const char* algorithm, std::vector<exec::Task>& tasks) {
  if (Proxy* p = op.comm->proxyIfAny()) p->drain();
  start(op, algorithm);
  recordingFailures(&op, 1, [&] { exec::run(tasks); });
}

void runOps(std::vector<Op> ops) {
  if (ops.size() == 1 && ops[0].kind == Op::Kind::Collective && runFastPath(ops[0], resolve(ops[0]))) return;
  if (!ops.empty()) execute(ops);
}

namespace {

// Hands one communicator's numbered stream-ordered ops to it: a lone all-reduce that the one-kernel path takes
// (comm/one_shot.h; also alone in a group, as nccl-tests and frameworks wrap single calls) goes onto the caller's
// stream as one kernel; anything else goes to the proxy as one submission.
void submitStreamOrdered(std::vector<Op> ops) {
  Communicator& comm = *ops.front().comm;
  OneShotAllReduce* oneShot = comm.oneShot();
  if (ops.size() == 1 && oneShot && oneShot->takes(ops.front())) {
    start(ops.front(), "one-kernel");
    comm.proxy().launchOneShot(ops.front());
    return;
  }
  comm.proxy().submit(std::move(ops));
}

// One collective call outside a group: resolved once (resolved()); where its shape is chosen online
// (comm/online_choice.h), the shape's state machine first says which variant this call runs (resolved again for it),
// and after the call completed it gets this rank's time of the call and agrees with the other ranks when due (still
// inside the API call).
class OnlineCall {
 public:
  explicit OnlineCall(const Op& op) : op_(op), r_(resolve(op)) {
    if (!r_.online) return;
    r_.online->beforeCall();
    r_ = resolve(op);  // the variant beforeCall chose
    start_ = std::chrono::steady_clock::now();
  }
  const Resolved& resolved() const { return r_; }
  // After the call succeeded.
  void done() {
    OnlineChoice* choice = r_.online;
    if (!choice) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    Communicator& comm = *op_.comm;
    if (choice->afterCall(seconds, [&comm](double* v, int n) { comm.agreeMax(v, n); }))
      HOCCL_INFO(kTuning, "{}: {} after call {}: {}", comm.describe(), describeOp(op_), choice->calls(),
                 choice->describe());
  }

 private:
  const Op& op_;
  Resolved r_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void enqueue(const Op& in) {
  overlap::checkIdle(*in.comm);  // no call while a callback or a background ring shift owns the channels
  GroupState& s = state();
  if (s.depth > 0) {
    s.ops.push_back(in);
    s.ops.back().traceId = in.comm->recorder().record(traceEntryOf(in, nullptr), TraceState::Enqueued);
    s.ops.back().recorded = true;
    return;
  }
  Op op = in;
  if (op.onDevice()) {
    number(op);
    submitStreamOrdered({op});
    return;
  }
  if (Proxy* p = op.comm->proxyIfAny()) p->drain();  // host calls run after the stream-ordered ones
  if (op.kind != Op::Kind::Collective) {
    execute(std::vector<Op>{op});
    return;
  }
  OnlineCall call(op);
  if (!runFastPath(op, call.resolved())) execute(std::vector<Op>{op});
  call.done();
}

void groupStart() { ++state().depth; }

void groupEnd() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("hocclGroupEnd without a matching hocclGroupStart on this thread");
  if (--s.depth > 0) return;
  std::vector<Op> ops;
  ops.swap(s.ops);
  // Communicators with an op on device buffers hand all their ops to their proxies, in one launch each.
  std::vector<Communicator*> onDevice;
  for (const Op& op : ops)
    if (op.onDevice() && std::find(onDevice.begin(), onDevice.end(), op.comm) == onDevice.end())
      onDevice.push_back(op.comm);
  if (!onDevice.empty()) {
    std::vector<Op> host;
    for (const Op& op : ops)
      if (std::find(onDevice.begin(), onDevice.end(), op.comm) == onDevice.end()) host.push_back(op);
    for (Communicator* c : onDevice) {
      std::vector<Op> mine;
      bool hostBuffers = false;
      for (const Op& op : ops)
        if (op.comm == c) {
          mine.push_back(op);
          number(mine.back());
          hostBuffers |= !op.onDevice();
        }
      submitStreamOrdered(std::move(mine));
      if (hostBuffers) c->proxy().drain();
    }
    ops.swap(host);
  }
  for (const Op& op : ops)
    if (Proxy* p = op.comm->proxyIfAny()) p->drain();
  runOps(ops);
}

int groupDepth() { return state().depth; }

float groupSimulatedSeconds() {
  // Each recorded op, one after the other, priced as it would run: a collective by what the tuner chose for it (a
  // shortcut's own prediction, or the cost model over every rank's schedule, with the chunk and in-place binding
  // planning uses); a send or receive by its link's parameters.
  double seconds = 0;
  for (const Op& op : state().ops) {
    const topo::LinkModel model = op.comm->tuningModel();  // what the tuner priced the choice with
    const topo::Topology& topology = op.comm->topology();
    const size_t elem = kernels::typeSize(op.dtype);
    if (op.kind != Op::Kind::Collective) {
      auto cls = topology.linkClass(op.comm->rank(), op.peer);
      seconds += model.alpha[cls] + static_cast<double>(op.count * elem) / model.beta[cls];
      continue;
    }
    const Resolved r = resolve(op);
    const algo::Choice& choice = r.decision->choice;
    if (choice.shortcut) seconds += choice.shortcut->predictSeconds(r.call, model);
    else  // with a shortcut for registered buffers (choice.ifRegistered) too: what ordinary buffers run; whether
          // every rank registered is known only when the call runs
      seconds += algo::predictAlgorithm(*choice.algorithm, r.args, topology, elem,
                                        model.crowded(algo::maxRanksPerHost(topology)))
                     .seconds;
  }
  return static_cast<float>(seconds);
}

void groupDiscard() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("group closed without a matching hocclGroupStart on this thread");
  if (--s.depth > 0) return;
  for (const Op& op : s.ops) op.comm->recorder().update(op.traceId, TraceState::Discarded);
  s.ops.clear();
}

}  // namespace hoccl
