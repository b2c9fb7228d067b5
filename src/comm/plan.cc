// Planning: ops -> executor tasks (see plan.h).
#include "comm/plan.h"

#include <algorithm>
#include <optional>

#include "algo/registry.h"
#include "comm/call_check.h"
#include "comm/host_level_plan.h"
#include "comm/registered_plan.h"
#include "comm/redop.h"
#include "base/collective.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "kernels/device/device.h"

namespace hoccl {
namespace {

using sched::Coll;

constexpr size_t kAlign = 64;
size_t alignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool rootOnlyOutput(Coll c) { return c == Coll::Reduce || c == Coll::Gather; }

// Whether memory of `kind` must be staged: device memory that the host cannot touch (a GPU's; the simulated
// device's in strict mode). Then the task's transfers go through staged channels and its scratch is device memory.
bool needsStaging(kernels::MemoryKind kind) {
  if (kind != kernels::MemoryKind::Device) return false;
  const device::Device* dev = device::current();
  return dev && !dev->hostAccessible();
}

// The scratch of a task on memory of `kind`: device memory for device buffers, else host memory.
char* scratchFor(Communicator& comm, kernels::MemoryKind kind, size_t bytes) {
  return static_cast<char*>(kind == kernels::MemoryKind::Device ? comm.deviceScratch(bytes) : comm.scratch(bytes));
}

// A PreMulSum scalar for the scale kernel, which reads it from host memory: a scalar in device memory is copied to
// `host` first (when the op runs, so a stream-ordered call sees what the stream's earlier work wrote).
const void* hostScalar(const PreMulSumOp& pm, uint64_t& host) {
  if (pm.residence == hocclScalarHostImmediate) return pm.value.data();
  if (kernels::classify(pm.pointer) != kernels::MemoryKind::Device) return pm.pointer;
  device::require("a PreMulSum scalar in device memory").memcpy(&host, pm.pointer, kernels::typeSize(pm.dtype));
  return &host;
}

// One collective: schedule, binding, hooks. Scratch is bound later (it is shared by the comm's tasks).
struct Planned {
  exec::Task task;
  size_t prescaleBytes = 0;  // bytes of scaled input placed at the start of scratch (PreMulSum)
};

Planned planCollective(const Op& op, const Resolved& r) {
  Communicator& comm = *op.comm;
  const size_t elem = r.elemSize;
  const sched::CollArgs& args = r.args;
  auto premul = op.premul ? std::optional<PreMulSumOp>(*op.premul) : findPreMulSum(op.op);
  const Communicator::Decision& choice = *r.decision;
  Planned p;
  p.task.comm = &comm;
  p.task.schedule = choice.schedule;
  p.task.tag = callTagOf(op);  // planned after the op started (comm/group.cc): its number is set
  // Two pointers: fits std::function's inline storage (no allocation per call). The op outlives the run.
  p.task.what = [opp = &op, name = choice.choice.algorithm->name] { return describeOp(*opp) + " [" + name + "]"; };
  p.task.binding.elemSize = elem;
  p.task.binding.dtype = op.dtype;
  p.task.binding.op = kernels::binOpOf(op.op);
  p.task.binding.mem = &kernels::memoryOps(op.recvKind);
  p.task.binding.staged = needsStaging(op.recvKind);
  p.task.binding.buffers = {const_cast<char*>(static_cast<const char*>(op.sendbuf)), static_cast<char*>(op.recvbuf),
                            nullptr};
  const sched::BufferCounts counts = sched::bufferCounts(args);
  const bool hasOutput = !rootOnlyOutput(op.coll) || comm.rank() == op.root;

  if (premul) {
    p.prescaleBytes = alignUp(counts.input * elem);
    PreMulSumOp pm = *premul;
    const void* input = op.sendbuf;
    size_t n = counts.input;
    hocclDataType_t dt = op.dtype;
    const kernels::MemoryOps* mem = p.task.binding.mem;
    const kernels::MemoryKind kind = op.recvKind;
    p.task.before = [pm, input, n, dt, &comm, mem, kind]() {
      uint64_t copied = 0;
      mem->scale(scratchFor(comm, kind, 0), input, n, dt, hostScalar(pm, copied));
    };
  }
  if (op.op == hocclAvg && hasOutput) {
    void* out = op.recvbuf;
    size_t n = counts.output;
    hocclDataType_t dt = op.dtype;
    int divisor = comm.nranks();
    const kernels::MemoryOps* mem = p.task.binding.mem;
    p.task.after = [out, n, dt, divisor, mem]() { mem->divide(out, n, dt, divisor); };
  }
  // HO-Ring's host level on mapped memory, when the host agrees; or a shortcut for registered buffers, when every
  // rank registered (one host: no host level then).
  if (!attachHostLevel(p.task, op, r)) attachRegisteredShortcut(p.task, op, r);
  return p;
}

// One collective by a transport's shortcut, driven by the executor's polling (inside a group: every rank makes the
// same choice for the same call whether or not it sits in a group, so the paths always match).
Planned planShortcut(const Op& op, const Resolved& r) {
  Planned p;
  p.task.comm = op.comm;
  // Started at the first poll, not now: arena sequence numbers are taken in execution order, as an ungrouped rank
  // takes them.
  auto running = std::make_shared<std::unique_ptr<transport::ShortcutOp>>();
  transport::CollCall numbered = r.call;
  numbered.number = op.seq + 1;  // started: planned after start (comm/group.cc)
  p.task.poll = [running, shortcut = r.decision->choice.shortcut, call = std::move(numbered)] {
    if (!*running) *running = shortcut->start(call);
    return (*running)->poll();
  };
  p.task.waitingFor = [running] { return *running ? (*running)->missing() : std::string("nobody"); };
  p.task.what = [opp = &op, name = r.decision->choice.shortcut->name()] {
    return describeOp(*opp) + " [" + name + "]";
  };
  return p;
}

// All point-to-point ops of one communicator as one step. Counts are in bytes (element size 1); a rank's sends to
// itself are paired with its receives from itself, in order, as local copies. A send whose buffer overlaps a
// receive buffer of the same group (in-place exchanges, as nccl-tests' in-place sendrecv does) is staged: a first
// step copies it to scratch, so the receive cannot overwrite data before it leaves.
struct PlannedP2P {
  exec::Task task;
  std::vector<std::pair<uint16_t, size_t>> staged;  // binding index -> byte offset in scratch
  size_t stagingBytes = 0;
  bool device = false;  // on device buffers (then its scratch is device memory)
};

bool overlaps(const char* a, size_t an, const char* b, size_t bn) { return an && bn && a < b + bn && b < a + an; }

PlannedP2P planP2P(Communicator& comm, const std::vector<const Op*>& ops) {
  PlannedP2P p;
  exec::Task& t = p.task;
  t.comm = &comm;
  t.what = [n = ops.size()] { return fmt::format("group of {} send/recv", n); };
  t.binding.elemSize = 1;
  t.binding.dtype = hocclUint8;
  // Device buffers: the local copies run on the device, and the transfers are staged when the host cannot touch
  // them; then every buffer of the group on this communicator must be device memory.
  const bool device = ops.front()->onDevice();
  for (const Op* op : ops)
    if (op->onDevice() != device && (needsStaging(ops.front()->recvKind) || needsStaging(op->recvKind)))
      throwInvalidArgument(
          fmt::format("{}: a group mixes send/recv on host and on device buffers on one "
                      "communicator, which device memory the host cannot touch does not allow; "
                      "use one kind of buffer per group and communicator",
                      comm.describe()));
  if (device) {
    t.binding.mem = &kernels::memoryOps(kernels::MemoryKind::Device);
    t.binding.staged = needsStaging(kernels::MemoryKind::Device);
  }
  p.device = device;
  sched::Step staging, step;
  std::vector<std::pair<uint16_t, size_t>> selfSends, selfRecvs;
  auto bytesOf = [](const Op* op) { return op->count * kernels::typeSize(op->dtype); };
  for (const Op* op : ops) {
    uint16_t idx = static_cast<uint16_t>(t.binding.buffers.size());
    size_t bytes = bytesOf(op);
    if (op->kind == Op::Kind::Send) {
      const char* src = static_cast<const char*>(op->sendbuf);
      t.binding.buffers.push_back(const_cast<char*>(src));
      bool clash = false;
      for (const Op* other : ops)
        clash |= other->kind == Op::Kind::Recv &&
                 overlaps(src, bytes, static_cast<const char*>(other->recvbuf), bytesOf(other));
      if (clash) {
        uint16_t stage = static_cast<uint16_t>(t.binding.buffers.size());
        t.binding.buffers.push_back(nullptr);  // bound to scratch by planTasks
        p.staged.push_back({stage, p.stagingBytes});
        p.stagingBytes += alignUp(bytes);
        staging.prims.push_back(sched::copy(idx, 0, stage, 0, bytes));
        idx = stage;
      }
      if (op->peer == comm.rank()) selfSends.push_back({idx, bytes});
      else step.prims.push_back(sched::send(op->peer, idx, 0, bytes));
    } else {
      t.binding.buffers.push_back(static_cast<char*>(op->recvbuf));
      if (op->peer == comm.rank()) selfRecvs.push_back({idx, bytes});
      else step.prims.push_back(sched::recv(op->peer, idx, 0, bytes));
    }
  }
  if (selfSends.size() != selfRecvs.size())
    throwInvalidUsage(fmt::format("{}: the group has {} send(s) to self but {} receive(s) from self; they must pair up",
                                  comm.describe(), selfSends.size(), selfRecvs.size()));
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i].second != selfRecvs[i].second)
      throwInvalidUsage(fmt::format("{}: send to self of {} bytes is paired with a receive of {} bytes",
                                    comm.describe(), selfSends[i].second, selfRecvs[i].second));
    step.prims.push_back(sched::copy(selfSends[i].first, 0, selfRecvs[i].first, 0, selfSends[i].second));
  }
  auto schedule = std::make_shared<sched::Schedule>();
  if (!staging.prims.empty()) schedule->steps.push_back(std::move(staging));
  schedule->steps.push_back(std::move(step));
  schedule->algorithm = "p2p";
  t.schedule = std::move(schedule);
  return p;
}

}  // namespace

transport::CollCall collCallOf(const Op& op) {
  transport::CollCall c;
  c.coll = op.coll;
  c.sendbuf = op.sendbuf;
  c.recvbuf = op.recvbuf;
  c.count = op.count;
  c.dtype = op.dtype;
  c.op = op.op;
  c.root = op.root;
  c.sendKind = op.sendKind;
  c.recvKind = op.recvKind;
  c.number = op.seq + 1;  // meaningful once started (comm/group.cc: start)
  return c;
}

transport::CallTag callTagOf(const Op& op) {
  // The buffers' kind stays out: device messages travel over channels that drop the tag anyway.
  const transport::CollCall c = collCallOf(op);
  const uint64_t what[3] = {c.number, c.count, transport::callShape(c) & ~transport::kShapeDeviceBit};
  const uint64_t h = fnv1a(what, sizeof(what));
  const auto tag = static_cast<transport::CallTag>(h ^ (h >> 32));
  return tag ? tag : 1;
}

Resolved resolve(const Op& op) {
  Communicator& comm = *op.comm;
  Resolved r;
  r.elemSize = kernels::typeSize(op.dtype);
  r.call = collCallOf(op);
  r.call.number = 0;  // resolved before the op starts (and cached decisions outlive it): runShortcut sets it
  r.args.coll = op.coll;
  r.args.rank = comm.rank();
  r.args.nranks = comm.nranks();
  r.args.count = op.count;
  r.args.root = op.root;
  static const size_t chunkBytes = static_cast<size_t>(params::CHUNK_SIZE.get());
  r.args.chunkCount = std::max<size_t>(1, chunkBytes / r.elemSize);
  r.args.inPlace = isInPlace(op) && op.op < hocclNumOps;  // a PreMulSum's scaled copy of the input is never aliased
  r.decision = &comm.decide(r.call, r.args, r.elemSize);
  r.call.fold = r.decision->fold;
  r.online = comm.lastOnlineChoice();
  // The chunk the tuner chose (HOCCL_CHUNK_SIZE unset), so that what is planned from r.args (HO-Ring's host level,
  // hocclGroupSimulatedSeconds) matches the decision's schedule.
  if (r.decision->choice.chunkCount) r.args.chunkCount = r.decision->choice.chunkCount;
  return r;
}

void runShortcut(const Op& op, const Resolved& r) {
  Communicator& comm = *op.comm;  // counted in flight by the caller (recordingFailures, comm/group.cc)
  Backoff backoff(comm.waitPolicy());
  transport::CollCall call = r.call;
  call.number = op.seq + 1;  // started (comm/group.cc: runFastPath)
  r.decision->choice.shortcut->run(call, backoff);
}

size_t largestBufferBytes(const Op& op) {
  const BufferBlocks blocks = bufferBlocks(op.coll, op.comm->nranks());
  return op.count * kernels::typeSize(op.dtype) * std::max(blocks.input, blocks.output);
}

bool isInPlace(const Op& op) {
  const size_t elem = kernels::typeSize(op.dtype);
  const char* s = static_cast<const char*>(op.sendbuf);
  const char* r = static_cast<const char*>(op.recvbuf);
  const size_t block = op.count * elem;
  const int rank = op.comm->rank();
  switch (op.coll) {
    case Coll::AllGather: return s == r + rank * block;
    case Coll::ReduceScatter: return r == s + rank * block;
    case Coll::Gather: return rank == op.root && s == r + rank * block;
    case Coll::Scatter: return rank == op.root && r == s + rank * block;
    default: return s == r;
  }
}

std::string describeOp(const Op& op) {
  if (op.label) return fmt::format("{}(count={}, {})", op.label, op.count, kernels::typeName(op.dtype));
  if (op.kind != Op::Kind::Collective)
    return fmt::format("{}(count={}, {}, peer {})", op.kind == Op::Kind::Send ? "Send" : "Recv", op.count,
                       kernels::typeName(op.dtype), op.peer);
  return transport::describeCall(collCallOf(op));
}

std::vector<exec::Task> planTasks(const std::vector<Op>& ops) {
  // Per communicator, in order of first appearance: p2p first (one task), then collectives in call order.
  // (Plain vectors, no maps: a single call is the common case and must stay cheap.)
  std::vector<Communicator*> comms;
  for (const Op& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  std::vector<exec::Task> tasks;
  tasks.reserve(ops.size() + comms.size());
  std::vector<const Op*> p2p;
  std::vector<Planned> colls;
  for (Communicator* comm : comms) {
    p2p.clear();
    colls.clear();
    for (const Op& op : ops) {
      if (op.comm != comm) continue;
      if (op.kind != Op::Kind::Collective) {
        p2p.push_back(&op);
        continue;
      }
      const Resolved r = resolve(op);
      if (checkWanted(op)) {  // the mismatch check runs as a task of its own, right before the call's
        Planned check;
        check.task = checkTask(op);
        colls.push_back(std::move(check));
      }
      colls.push_back(r.decision->choice.shortcut ? planShortcut(op, r) : planCollective(op, r));
    }
    std::optional<PlannedP2P> p2pTask;
    if (!p2p.empty()) p2pTask = planP2P(*comm, p2p);
    // Tasks of one communicator run one after another, so they all share its scratch from offset 0.
    // (Host and device tasks have scratches of their own.)
    size_t need = p2pTask && !p2pTask->device ? p2pTask->stagingBytes : 0;
    size_t needDevice = p2pTask && p2pTask->device ? p2pTask->stagingBytes : 0;
    for (const Planned& p : colls)
      if (p.task.schedule) {
        const size_t bytes = p.prescaleBytes + p.task.schedule->scratchCount * p.task.binding.elemSize;
        size_t& mine = p.task.binding.mem->kind() == kernels::MemoryKind::Device ? needDevice : need;
        mine = std::max(mine, bytes);
      }
    char* scratch = static_cast<char*>(comm->scratch(need));
    char* deviceScratch = needDevice ? static_cast<char*>(comm->deviceScratch(needDevice)) : nullptr;
    if (p2pTask) {
      char* base = p2pTask->device ? deviceScratch : scratch;
      for (auto [index, offset] : p2pTask->staged) p2pTask->task.binding.buffers[index] = base + offset;
      tasks.push_back(std::move(p2pTask->task));
    }
    for (Planned& p : colls) {
      if (!p.task.schedule) {
        tasks.push_back(std::move(p.task));
        continue;
      }
      char* base = p.task.binding.mem->kind() == kernels::MemoryKind::Device ? deviceScratch : scratch;
      p.task.binding.buffers[sched::kScratch] = base + p.prescaleBytes;
      if (p.prescaleBytes) p.task.binding.buffers[sched::kInput] = base;
      tasks.push_back(std::move(p.task));
    }
  }
  return tasks;
}

}  // namespace hoccl
