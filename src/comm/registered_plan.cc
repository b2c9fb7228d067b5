// A schedule's task that a shortcut runs instead when every rank registered its buffers (see registered_plan.h).
#include "comm/registered_plan.h"

#include <memory>
#include <string>

#include "base/error.h"

namespace hoccl {

bool attachRegisteredShortcut(exec::Task& task, const Op& op, const Resolved& r) {
  transport::Shortcut* shortcut = r.decision->choice.ifRegistered;
  if (!shortcut) return false;
  if (task.prelude) throwInternalError("a task with a prelude of its own was given a shortcut for registered buffers");
  auto running = std::make_shared<std::unique_ptr<transport::ShortcutOp>>();
  transport::CollCall numbered = r.call;
  numbered.number = op.seq + 1;  // planned after the op started (comm/group.cc): its waits read the call boards
  task.prelude = [running, shortcut, call = std::move(numbered)](exec::Task& t) {
    if (!*running) *running = shortcut->startIfRegistered(call);
    if (!(*running)->poll()) return false;
    if (!(*running)->declined()) {  // the shortcut ran the call (Avg's division included): nothing is left to do
      static const auto nothing = std::make_shared<const sched::Schedule>();
      t.schedule = nothing;
      t.after = nullptr;
      t.epilogue = nullptr;
    }
    return true;
  };
  task.waitingFor = [running] { return *running ? (*running)->missing() : std::string("nobody"); };
  return true;
}

}  // namespace hoccl
