// Groups and enqueueing (see group.h).
#include "comm/group.h"

#include <vector>

#include "comm/plan.h"
#include "comm/cma_coll.h"
#include "comm/small_coll.h"
#include "base/error.h"
#include "base/log.h"
#include "algo/registry.h"
#include "sched/cost_model.h"
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

// Runs f on behalf of ops; a transport-level failure leaves their communicators unusable, so it is recorded as
// their async error and shared with every other rank through the bootstrap (base/boot/root_server.cc): the root
// names one culprit for the whole communicator and releases everybody's waits. Unless the root chose this rank's own
// report, the call fails with the root's verdict (the same culprit and words on every rank) instead of what this
// rank saw (often only a survivor stopping, or a peer's connection closing after it aborted).
template <class F>
void recordingFailures(const Op* ops, size_t n, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() == hocclRemoteError || e.code() == hocclSystemError || e.code() == hocclInternalError) {
      for (size_t i = 0; i < n; ++i) {
        int expected = hocclSuccess;
        ops[i].comm->asyncError.compare_exchange_strong(expected, e.code());
      }
      std::string verdict;
      const Communicator* blamed = nullptr;
      for (size_t i = 0; i < n; ++i) {
        Communicator* c = ops[i].comm;
        bool seen = false;
        for (size_t j = 0; j < i; ++j) seen |= ops[j].comm == c;
        if (seen || c->health().aborted()) continue;  // an abort is announced by hocclCommAbort itself
        std::string v = c->bootstrap().shareFailure(e.what());
        if (verdict.empty() && !v.empty()) {
          verdict = v;
          blamed = c;
        }
      }
      if (blamed) {
        Error culprit(hocclRemoteError,
                      fmt::format("{}: {} stopped: {}", blamed->describe(),
                                  n == 1 ? describeOp(ops[0]) : fmt::format("a group of {} operations", n), verdict));
        HOCCL_WARN(kColl, "{}", culprit.what());
        throw culprit;
      }
    }
    HOCCL_WARN(kColl, "{}", e.what());
    throw;
  }
}

// A single small (comm/small_coll.h) or single-copy (comm/cma_coll.h) collective skips planning and the executor;
// false when op takes neither path.
bool runFastPath(const Op& op) {
  if (small::eligible(op)) {
    recordingFailures(&op, 1, [&] { small::run(op); });
    return true;
  }
  if (cma::eligible(op)) {
    recordingFailures(&op, 1, [&] { cma::run(op); });
    return true;
  }
  return false;
}

// Plans ops and runs them on the executor.
void execute(const std::vector<Op>& ops) {
  recordingFailures(ops.data(), ops.size(), [&] {
    std::vector<exec::Task> tasks = planTasks(ops);
    exec::run(tasks);
  });
}

}  // namespace

void enqueue(const Op& op) {
  GroupState& s = state();
  if (s.depth > 0) {
    s.ops.push_back(op);
    return;
  }
  if (!runFastPath(op)) execute({op});
}

void groupStart() { ++state().depth; }

void groupEnd() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("hocclGroupEnd without a matching hocclGroupStart on this thread");
  if (--s.depth > 0) return;
  std::vector<Op> ops;
  ops.swap(s.ops);
  if (ops.size() == 1 && runFastPath(ops[0])) return;
  if (!ops.empty()) execute(ops);
}

int groupDepth() { return state().depth; }

float groupSimulatedSeconds() {
  // Each recorded op, one after the other, priced by the cost model over every rank's schedule, or for the one-host
  // fast paths (which have no schedule) by the same link parameters over what they move.
  const topo::LinkModel model = topo::LinkModel::fromParams();
  double seconds = 0;
  for (const Op& op : state().ops) {
    const topo::Topology& topology = op.comm->topology();
    const size_t elem = kernels::typeSize(op.dtype);
    if (op.kind != Op::Kind::Collective) {
      auto cls = topology.linkClass(op.comm->rank(), op.peer);
      seconds += model.alpha[cls] + static_cast<double>(op.count * elem) / model.beta[cls];
      continue;
    }
    const double n = op.comm->nranks(), bytes = static_cast<double>(op.count * elem);
    if (small::eligible(op)) {  // one hand-off, then every rank combines every payload locally
      seconds += model.alpha[hocclLinkIntraHost] + n * bytes / model.beta[hocclLinkSelf];
      continue;
    }
    if (cma::eligible(op)) {  // two hand-offs around one copy of what crosses (all-reduce: there and back)
      const double crossing = op.coll == sched::Coll::AllReduce ? 2 * (n - 1) / n * bytes
                              : op.coll == sched::Coll::Broadcast ? bytes : (n - 1) * bytes;
      seconds += 2 * model.alpha[hocclLinkIntraHost] + crossing / model.beta[hocclLinkIntraHost];
      continue;
    }
    sched::CollArgs args;
    args.coll = op.coll;
    args.nranks = op.comm->nranks();
    args.count = op.count;
    args.root = op.root;
    const algo::Algorithm& alg = algo::choose(args, topology, elem);
    std::vector<sched::Schedule> all;
    for (int r = 0; r < args.nranks; ++r) {
      args.rank = r;
      all.push_back(alg.generate(args, topology));
    }
    seconds += topo::predict(all, topology, elem, model).seconds;
  }
  return static_cast<float>(seconds);
}

void groupDiscard() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("group closed without a matching hocclGroupStart on this thread");
  if (--s.depth == 0) s.ops.clear();
}

}  // namespace hoccl
