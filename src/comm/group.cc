// Groups and enqueueing (see group.h).
#include "comm/group.h"

#include <vector>

#include "comm/plan.h"
#include "core/error.h"
#include "core/log.h"
#include "exec/executor.h"

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

// Runs ops; a transport-level failure leaves the communicators unusable, so it is recorded as their async error.
void execute(const std::vector<Op>& ops) {
  std::vector<exec::Task> tasks = planTasks(ops);
  try {
    exec::run(tasks);
  } catch (const Error& e) {
    if (e.code() == hocclRemoteError || e.code() == hocclSystemError || e.code() == hocclInternalError) {
      for (const Op& op : ops) {
        int expected = hocclSuccess;
        op.comm->asyncError.compare_exchange_strong(expected, e.code());
      }
    }
    HOCCL_WARN(kColl, "{}", e.what());
    throw;
  }
}

}  // namespace

void enqueue(const Op& op) {
  GroupState& s = state();
  if (s.depth > 0) {
    s.ops.push_back(op);
    return;
  }
  execute({op});
}

void groupStart() { ++state().depth; }

void groupEnd() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("hocclGroupEnd without a matching hocclGroupStart on this thread");
  if (--s.depth > 0) return;
  std::vector<Op> ops;
  ops.swap(s.ops);
  if (!ops.empty()) execute(ops);
}

int groupDepth() { return state().depth; }

float groupSimulatedSeconds() { return 0.0f; }

void groupDiscard() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("group closed without a matching hocclGroupStart on this thread");
  if (--s.depth == 0) s.ops.clear();
}

}  // namespace hoccl
