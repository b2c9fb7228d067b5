// HO-Ring's host level through a transport (see host_level_plan.h).
#include "comm/host_level_plan.h"

#include <memory>
#include <string>

#include "algo/ho_ring.h"

namespace hoccl {
namespace {

// One call's host level: the transport's op and the schedule without level 0 (made only when mapped).
struct HostLevelRun {
  std::unique_ptr<transport::HostLevelOp> op;
  bool reduced = false;
  const char* work = nullptr;  // the working buffer: the output (all-reduce) or the task's scratch
};

}  // namespace

bool attachHostLevel(exec::Task& task, const Op& op, const Resolved& r) {
  Communicator& comm = *op.comm;
  transport::HostLevel* host = comm.hostLevel();
  const algo::Algorithm* algorithm = r.decision->choice.algorithm;
  const bool reduces = op.coll == sched::Coll::AllReduce || op.coll == sched::Coll::ReduceScatter;
  if (!host || !algorithm || std::string(algorithm->name) != "ho_ring" || op.premul ||
      (reduces && op.op >= hocclNumOps) || task.binding.staged || !host->canRun(r.call))
    return false;
  algo::HoRingHostSplit split = algo::hoRingHostSplit(r.args, comm.topology());
  if (!split.applicable || split.ring != host->ranks()) return false;  // level 0 is not exactly this host
  std::vector<transport::HostPiece> mine;
  mine.reserve(split.mine.size());
  for (const algo::HoRingHostSplit::Piece& p : split.mine) mine.push_back({p.off, p.work, p.len});
  auto run = std::make_shared<HostLevelRun>();
  task.prelude = [run, host, call = r.call, mine = std::move(mine), args = r.args, &comm](exec::Task& t) mutable {
    if (!run->op) run->op = host->start(call, std::move(mine));
    if (!run->op->agree()) return false;
    if (run->op->mapped() && !run->reduced) {
      t.schedule = std::make_shared<const sched::Schedule>(algo::hoRingScheduleAboveHost(args, comm.topology()));
      const uint16_t work = args.coll == sched::Coll::AllReduce ? sched::kOutput : sched::kScratch;
      char* w = t.binding.buffers.at(work);
      run->work = w;
      if (args.coll != sched::Coll::AllGather) run->op->reduceScatter(w);
      run->reduced = true;
    }
    return true;
  };
  task.epilogue = [run] { return !run->op || run->op->allGather(run->work); };
  task.waitingFor = [run] { return run->op ? run->op->missing() : std::string("nobody"); };
  return true;
}

}  // namespace hoccl
