/// @file process_group.cc
/// The "hoccl" c10d backend (see process_group.h): the rendezvous, the worker thread and its queue, and each
/// collective as one job of hoccl calls on host buffers (which complete before they return). List-shaped collectives
/// (allgather into a list, reduce_scatter from a list, gather, scatter) go through one flat staging tensor; the
/// single-tensor forms pass the tensors' own memory. alltoall with split sizes is a hoccl group of sends and receives.
#include "python/hoccl/torch/process_group.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <ATen/core/ivalue.h>
#include <pybind11/pybind11.h>

#include "python/hoccl/torch/tensor_check.h"

namespace hoccl_torch {

// ---- errors and timeouts -------------------------------------------------------------------------------------------

void check(hocclResult_t r, hocclComm_t comm, const char* what) {
  if (r == hocclSuccess) return;
  const char* last = hocclGetLastError(comm);
  int rank = -1;
  if (comm) hocclCommUserRank(comm, &rank);
  C10_THROW_ERROR(DistBackendError, c10::str("hoccl ", what, " failed on rank ", rank, ": ", hocclGetErrorString(r),
                                             (last && *last) ? ": " : "", last ? last : ""));
}

void applyTimeout(std::chrono::milliseconds timeout) {
  if (std::getenv("HOCCL_TIMEOUT") != nullptr || timeout.count() <= 0) return;
  const long long seconds = (timeout.count() + 999) / 1000;
  setenv("HOCCL_TIMEOUT", std::to_string(seconds).c_str(), 0);
}

// ---- Work ----------------------------------------------------------------------------------------------------------

HocclWork::HocclWork(int rank, c10d::OpType opType, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
                     std::weak_ptr<JobQueue> jobs)
    : c10d::Work(rank, opType), outputs_(std::move(outputs)), timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      jobs_(std::move(jobs)) {}

bool HocclWork::wait(std::chrono::milliseconds timeout) {
  // A wait without a limit runs its job here when the job is next: the worker would run the same job at the same
  // place in the order, and this thread would only sleep meanwhile. hoccl's own timeout still bounds the job.
  if (timeout == kNoTimeout && !isCompleted()) {
    if (std::shared_ptr<JobQueue> jobs = jobs_.lock()) jobs->runIfNext(this);
  }
  // Without an explicit timeout, hoccl's own (HOCCL_TIMEOUT, the same length) gets a head start: its error names the
  // silent peer; this limit only catches a job that never started.
  const auto limit = timeout == kNoTimeout ? timeout_ + std::max(timeout_ / 10, std::chrono::milliseconds(2000))
                                           : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, limit, [this] { return completed_; })) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("hoccl ", c10d::opTypeToString(opType_), " on rank ", rank_, " did not complete within ",
                             limit.count(), " ms (the timeout of wait() or of the process group); a peer may have ",
                             "stopped or called a different collective"));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> HocclWork::getFuture() { return future_; }

void HocclWork::complete(std::exception_ptr error) {
  // The future first: wait() returning means get_future() is done too.
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

// ---- backend: creation, worker -------------------------------------------------------------------------------------

ProcessGroupHoccl::ProcessGroupHoccl(hocclComm_t comm, int rank, int size, std::chrono::milliseconds timeout,
                                     bool ownsComm, std::shared_ptr<void> keepAlive)
    : c10d::Backend(rank, size), comm_(comm), ownsComm_(ownsComm), keepAlive_(std::move(keepAlive)), timeout_(timeout) {
  worker_ = std::thread([this] { workerLoop(); });
}

bool JobQueue::runIfNext(const HocclWork* work) {
  Job job;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (busy || queue.empty() || queue.front().work.get() != work || queue.front().p2p) return false;
    job = std::move(queue.front());
    queue.pop_front();
    busy = true;
  }
  std::exception_ptr error;
  try {
    job.run();
  } catch (...) {
    error = std::current_exception();
  }
  std::vector<Job> finished;  // released on this thread after the lock, with `job` (see retired)
  {
    std::lock_guard<std::mutex> lock(mutex);
    busy = false;
    finished.swap(retired);
  }
  cv.notify_all();  // the worker may wait for the queue to be free (a later job, or the end)
  // Completed once the queue is free: a callback of the future that waits for a later job gets it run.
  job.work->complete(error);
  return true;
}

ProcessGroupHoccl::~ProcessGroupHoccl() {
  {
    std::lock_guard<std::mutex> lock(jobs_->mutex);
    jobs_->stop = true;
  }
  jobs_->cv.notify_all();
  if (worker_.joinable()) {
    // A future's callback on the worker may be waiting for the GIL: never join while holding it.
    std::optional<pybind11::gil_scoped_release> withoutGil;
    if (Py_IsInitialized() && PyGILState_Check()) withoutGil.emplace();
    worker_.join();
  }
  if (comm_ && ownsComm_) hocclCommDestroy(comm_);
}

c10::intrusive_ptr<ProcessGroupHoccl> ProcessGroupHoccl::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                                int size, std::chrono::milliseconds timeout) {
  applyTimeout(timeout);
  const std::string key = "hoccl/unique_id";
  hocclUniqueId id;
  if (rank == 0) {
    check(hocclGetUniqueId(&id), nullptr, "hocclGetUniqueId");
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "hoccl: the unique id in the store has ", bytes.size(),
                " bytes, expected ", sizeof(id.internal), " (another backend used the key ", key, "?)");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  hocclComm_t comm = nullptr;
  check(hocclCommInitRank(&comm, size, id, rank), nullptr, "hocclCommInitRank");
  return c10::make_intrusive<ProcessGroupHoccl>(comm, rank, size, timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::enqueue(c10d::OpType opType, std::vector<at::Tensor> outputs,
                                                          std::function<void()> run, bool p2p) {
  auto work = c10::make_intrusive<HocclWork>(rank_, opType, std::move(outputs), timeout_, jobs_);
  std::vector<Job> finished;  // released here, on the caller's thread, after the lock (see JobQueue::retired)
  JobQueue& q = *jobs_;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.queue.push_back(Job{std::move(run), work, p2p});
    finished.swap(q.retired);
  }
  q.cv.notify_one();
  return work;
}

void ProcessGroupHoccl::workerLoop() {
  JobQueue& q = *jobs_;
  for (;;) {
    std::vector<Job> batch;
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      // A job a caller runs (JobQueue::runIfNext) keeps the queue busy: the next one waits for it, and so does the
      // end (the job uses this backend).
      q.cv.wait(lock, [&q] { return !q.busy && (q.stop || !q.queue.empty()); });
      if (q.queue.empty()) return;  // stop and nothing left
      q.busy = true;
      batch.push_back(std::move(q.queue.front()));
      q.queue.pop_front();
      // Consecutive sends and receives run in one hoccl group (no order between them can deadlock).
      while (batch.front().p2p && !q.queue.empty() && q.queue.front().p2p) {
        batch.push_back(std::move(q.queue.front()));
        q.queue.pop_front();
      }
    }
    std::exception_ptr error;
    try {
      if (batch.size() > 1) check(hocclGroupStart(), comm_, "hocclGroupStart");
      for (auto& job : batch) job.run();
      if (batch.size() > 1) check(hocclGroupEnd(), comm_, "hocclGroupEnd (of isend/irecv)");
    } catch (...) {
      error = std::current_exception();
    }
    for (auto& job : batch) job.work->complete(error);
    // Moved, not dropped: once a Work completes, its caller may let go of everything and let the interpreter shut
    // down; the worker then must not release anything whose release needs the GIL (see JobQueue::retired).
    std::lock_guard<std::mutex> lock(q.mutex);
    for (auto& job : batch) q.retired.push_back(std::move(job));
    q.busy = false;
  }
}

void ProcessGroupHoccl::runOnWorker(const std::function<void(hocclComm_t)>& fn) {
  auto work = enqueue(c10d::OpType::UNKNOWN, {}, [this, &fn] { fn(comm_); });
  work->wait(std::chrono::milliseconds(timeout_));
}

// ---- collectives ---------------------------------------------------------------------------------------------------

namespace {

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }
hocclDataType_t dtypeOf(const at::Tensor& t) { return hocclType(t.scalar_type(), "call"); }

// Gathers `input` of every rank into a [size, ...] tensor (the bitwise ops' path).
at::Tensor gatherRows(const at::Tensor& input, int size, hocclComm_t comm, const char* what) {
  std::vector<int64_t> shape{size};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor all = at::empty(shape, input.options());
  check(hocclAllGather(input.data_ptr(), all.data_ptr(), count(input), dtypeOf(input), comm, nullptr), comm, what);
  return all;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  checkSingle(tensors, "broadcast");
  checkTensor(tensors[0], "broadcast");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "hoccl broadcast: root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  at::Tensor t = tensors[0];
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, {t}, [this, t, root] {
    check(hocclBroadcast(t.data_ptr(), t.data_ptr(), count(t), dtypeOf(t), root, comm_, nullptr), comm_,
          "hocclBroadcast");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  checkSingle(tensors, "allreduce");
  checkTensor(tensors[0], "allreduce");
  at::Tensor t = tensors[0];
  const ReduceSpec spec = reduceSpec(opts.reduceOp, t.scalar_type(), "allreduce");
  return enqueue(c10d::OpType::ALLREDUCE, {t}, [this, t, spec] {
    if (spec.viaGather) {
      t.copy_(reduceRows(gatherRows(t, size_, comm_, "hocclAllGather (bitwise allreduce)"), spec.kind));
      return;
    }
    ScopedOp op(spec, t.scalar_type(), comm_);
    check(hocclAllReduce(t.data_ptr(), t.data_ptr(), count(t), dtypeOf(t), op.get(), comm_, nullptr), comm_,
          "hocclAllReduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "hoccl allreduce_coalesced: no tensors");
  checkSame(tensors, tensors[0], -1, "allreduce_coalesced");
  const ReduceSpec spec = reduceSpec(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  std::vector<at::Tensor> ts = tensors;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, ts, [this, ts, spec] {
    // One flat buffer: one hoccl call for all tensors.
    std::vector<at::Tensor> flat;
    for (const auto& t : ts) flat.push_back(t.reshape({-1}));
    at::Tensor buf = at::cat(flat);
    if (spec.viaGather) {
      buf = reduceRows(gatherRows(buf, size_, comm_, "hocclAllGather (bitwise allreduce_coalesced)"), spec.kind);
    } else {
      ScopedOp op(spec, buf.scalar_type(), comm_);
      check(hocclAllReduce(buf.data_ptr(), buf.data_ptr(), count(buf), dtypeOf(buf), op.get(), comm_, nullptr), comm_,
            "hocclAllReduce (coalesced)");
    }
    int64_t off = 0;
    for (const auto& t : ts) {
      t.copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  checkSingle(tensors, "reduce");
  checkTensor(tensors[0], "reduce");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "hoccl reduce: root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  at::Tensor t = tensors[0];
  const ReduceSpec spec = reduceSpec(opts.reduceOp, t.scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, {t}, [this, t, spec, root] {
    if (spec.viaGather) {
      at::Tensor r = reduceRows(gatherRows(t, size_, comm_, "hocclAllGather (bitwise reduce)"), spec.kind);
      if (rank_ == root) t.copy_(r);
      return;
    }
    ScopedOp op(spec, t.scalar_type(), comm_);
    check(hocclReduce(t.data_ptr(), t.data_ptr(), count(t), dtypeOf(t), op.get(), root, comm_, nullptr), comm_,
          "hocclReduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions&) {
  checkSingle(inputs, "allgather");
  checkTensor(inputs[0], "allgather");
  TORCH_CHECK_VALUE(outputs.size() == 1, "hoccl allgather: expected one output list, got ", outputs.size());
  TORCH_CHECK_VALUE(static_cast<int>(outputs[0].size()) == size_, "hoccl allgather: the output list has ",
                    outputs[0].size(), " tensors, the group has ", size_, " ranks");
  checkSame(outputs[0], inputs[0], inputs[0].numel(), "allgather");
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, outs, [this, in, outs] {
    at::Tensor all = at::empty({size_ * in.numel()}, in.options());
    check(hocclAllGather(in.data_ptr(), all.data_ptr(), count(in), dtypeOf(in), comm_, nullptr), comm_,
          "hocclAllGather");
    for (int r = 0; r < size_; ++r) outs[r].copy_(all.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  checkTensor(input, "all_gather_into_tensor");
  checkSame({output}, input, input.numel() * size_, "all_gather_into_tensor");
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {out}, [this, in, out] {
    check(hocclAllGather(in.data_ptr(), out.data_ptr(), count(in), dtypeOf(in), comm_, nullptr), comm_,
          "hocclAllGather");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                  std::vector<at::Tensor>& inputs,
                                                                                  const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "hoccl allgather_into_tensor_coalesced: ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "allgather_into_tensor_coalesced");
    checkSame({outputs[i]}, inputs[i], inputs[i].numel() * size_, "allgather_into_tensor_coalesced");
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, outs, [this, ins, outs] {
    for (size_t i = 0; i < ins.size(); ++i)
      check(hocclAllGather(ins[i].data_ptr(), outs[i].data_ptr(), count(ins[i]), dtypeOf(ins[i]), comm_, nullptr),
            comm_, "hocclAllGather (coalesced)");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  checkSingle(inputs, "gather");
  checkTensor(inputs[0], "gather");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "hoccl gather: root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                      "hoccl gather: the root needs one output list of ", size_, " tensors");
    checkSame(outputs[0], inputs[0], inputs[0].numel(), "gather");
    outs = outputs[0];
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || outputs[0].empty(), "hoccl gather: only the root passes output tensors");
  }
  at::Tensor in = inputs[0];
  return enqueue(c10d::OpType::GATHER, outs, [this, in, outs, root] {
    at::Tensor all = rank_ == root ? at::empty({size_ * in.numel()}, in.options()) : at::Tensor();
    check(hocclGather(in.data_ptr(), all.defined() ? all.data_ptr() : nullptr, count(in), dtypeOf(in), root, comm_,
                      nullptr),
          comm_, "hocclGather");
    for (size_t r = 0; r < outs.size(); ++r)
      outs[r].copy_(all.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  checkSingle(outputs, "scatter");
  checkTensor(outputs[0], "scatter");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "hoccl scatter: root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "hoccl scatter: the root needs one input list of ", size_, " tensors");
    checkSame(inputs[0], outputs[0], outputs[0].numel(), "scatter");
    ins = inputs[0];
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || inputs[0].empty(), "hoccl scatter: only the root passes input tensors");
  }
  at::Tensor out = outputs[0];
  return enqueue(c10d::OpType::SCATTER, {out}, [this, out, ins, root] {
    at::Tensor all;
    if (!ins.empty()) {
      std::vector<at::Tensor> flat;
      for (const auto& t : ins) flat.push_back(t.reshape({-1}));
      all = at::cat(flat);
    }
    check(hocclScatter(all.defined() ? all.data_ptr() : nullptr, out.data_ptr(), count(out), dtypeOf(out), root, comm_,
                       nullptr),
          comm_, "hocclScatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  checkSingle(outputs, "reduce_scatter");
  checkTensor(outputs[0], "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                    "hoccl reduce_scatter: expected one input list of ", size_, " tensors");
  checkSame(inputs[0], outputs[0], outputs[0].numel(), "reduce_scatter");
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins = inputs[0];
  const ReduceSpec spec = reduceSpec(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  return enqueue(c10d::OpType::REDUCE_SCATTER, {out}, [this, out, ins, spec] {
    std::vector<at::Tensor> flat;
    for (const auto& t : ins) flat.push_back(t.reshape({-1}));
    at::Tensor all = at::cat(flat);
    if (spec.viaGather) {
      at::Tensor r = reduceRows(gatherRows(all, size_, comm_, "hocclAllGather (bitwise reduce_scatter)"), spec.kind);
      out.copy_(r.narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
      return;
    }
    ScopedOp op(spec, out.scalar_type(), comm_);
    check(hocclReduceScatter(all.data_ptr(), out.data_ptr(), count(out), dtypeOf(out), op.get(), comm_, nullptr), comm_,
          "hocclReduceScatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  checkTensor(output, "reduce_scatter_tensor");
  checkSame({input}, output, output.numel() * size_, "reduce_scatter_tensor");
  at::Tensor in = input, out = output;
  const ReduceSpec spec = reduceSpec(opts.reduceOp, out.scalar_type(), "reduce_scatter_tensor");
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {out}, [this, in, out, spec] {
    if (spec.viaGather) {
      at::Tensor r = reduceRows(gatherRows(in.reshape({-1}), size_, comm_, "hocclAllGather (bitwise)"), spec.kind);
      out.copy_(r.narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
      return;
    }
    ScopedOp op(spec, out.scalar_type(), comm_);
    check(hocclReduceScatter(in.data_ptr(), out.data_ptr(), count(out), dtypeOf(out), op.get(), comm_, nullptr), comm_,
          "hocclReduceScatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                    "hoccl reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ", inputs.size(),
                    " inputs");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(outputs[i], "reduce_scatter_tensor_coalesced");
    checkSame({inputs[i]}, outputs[i], outputs[i].numel() * size_, "reduce_scatter_tensor_coalesced");
    reduceSpec(opts.reduceOp, outputs[i].scalar_type(), "reduce_scatter_tensor_coalesced");
  }
  // The queue runs jobs in order: the last one's work completes after all of them.
  c10::intrusive_ptr<c10d::Work> last;
  for (size_t i = 0; i < inputs.size(); ++i) last = _reduce_scatter_base(outputs[i], inputs[i], opts);
  return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions&) {
  checkTensor(input, "all_to_all_single");
  checkSame({output}, input, -1, "all_to_all_single");
  at::Tensor in = input, out = output;
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(in.numel() == out.numel() && in.numel() % size_ == 0, "hoccl all_to_all_single: input (",
                      in.numel(), ") and output (", out.numel(), ") must have the same size, a multiple of ", size_);
    return enqueue(c10d::OpType::ALLTOALL_BASE, {out}, [this, in, out] {
      check(hocclAlltoAll(in.data_ptr(), out.data_ptr(), count(in) / size_, dtypeOf(in), comm_, nullptr), comm_,
            "hocclAlltoAll");
    });
  }
  // Split sizes count rows of dimension 0.
  auto offsets = [this](const at::Tensor& t, std::vector<int64_t> splits, const char* which) {
    const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    const int64_t rowElems = rows > 0 ? t.numel() / rows : 0;
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "hoccl all_to_all_single: ", which, " has ", rows,
                        " rows, not a multiple of ", size_, " (pass split sizes)");
      splits.assign(size_, rows / size_);
    }
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "hoccl all_to_all_single: ", splits.size(), " ", which,
                      " split sizes for ", size_, " ranks");
    std::vector<std::pair<int64_t, int64_t>> r;  // element offset, element count
    int64_t off = 0;
    for (int64_t s : splits) {
      TORCH_CHECK_VALUE(s >= 0, "hoccl all_to_all_single: negative split size ", s);
      r.emplace_back(off * rowElems, s * rowElems);
      off += s;
    }
    TORCH_CHECK_VALUE(off == rows, "hoccl all_to_all_single: the ", which, " split sizes add up to ", off,
                      " rows, the ", which, " has ", rows);
    return r;
  };
  auto sendParts = offsets(in, inputSplits, "input"), recvParts = offsets(out, outputSplits, "output");
  return enqueue(c10d::OpType::ALLTOALL_BASE, {out}, [this, in, out, sendParts, recvParts] {
    const size_t es = in.element_size();
    auto* src = static_cast<char*>(in.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    TORCH_CHECK(sendParts[rank_].second == recvParts[rank_].second, "hoccl all_to_all_single on rank ", rank_,
                ": sends itself ", sendParts[rank_].second, " elements but expects ", recvParts[rank_].second);
    check(hocclGroupStart(), comm_, "hocclGroupStart");
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (sendParts[p].second > 0)
        hocclSend(src + sendParts[p].first * es, sendParts[p].second, dtypeOf(in), p, comm_, nullptr);
      if (recvParts[p].second > 0)
        hocclRecv(dst + recvParts[p].first * es, recvParts[p].second, dtypeOf(in), p, comm_, nullptr);
    }
    check(hocclGroupEnd(), comm_, "hocclGroupEnd (all_to_all_single)");
    std::memcpy(dst + recvParts[rank_].first * es, src + sendParts[rank_].first * es, sendParts[rank_].second * es);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
                    "hoccl all_to_all: expected ", size_, " input and output tensors, got ", inputs.size(), " and ",
                    outputs.size());
  checkSame(inputs, inputs[0], -1, "all_to_all");
  checkSame(outputs, inputs[0], -1, "all_to_all");
  TORCH_CHECK_VALUE(inputs[rank_].numel() == outputs[rank_].numel(), "hoccl all_to_all: this rank's own input (",
                    inputs[rank_].numel(), ") and output (", outputs[rank_].numel(), ") differ in size");
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::ALLTOALL, outs, [this, ins, outs] {
    check(hocclGroupStart(), comm_, "hocclGroupStart");
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (ins[p].numel() > 0) hocclSend(ins[p].data_ptr(), count(ins[p]), dtypeOf(ins[p]), p, comm_, nullptr);
      if (outs[p].numel() > 0) hocclRecv(outs[p].data_ptr(), count(outs[p]), dtypeOf(outs[p]), p, comm_, nullptr);
    }
    check(hocclGroupEnd(), comm_, "hocclGroupEnd (all_to_all)");
    outs[rank_].copy_(ins[rank_]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  checkSingle(tensors, "send");
  checkTensor(tensors[0], "send");
  checkTag(tag, "send", rank_, dstRank);
  TORCH_CHECK_VALUE(dstRank >= 0 && dstRank < size_ && dstRank != rank_, "hoccl send: peer ", dstRank,
                    " is not another rank of this group of ", size_);
  at::Tensor t = tensors[0];
  return enqueue(
      c10d::OpType::SEND, {t},
      [this, t, dstRank] {
    check(hocclSend(t.data_ptr(), count(t), dtypeOf(t), dstRank, comm_, nullptr), comm_, "hocclSend");
      },
      /*p2p=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  checkSingle(tensors, "recv");
  checkTensor(tensors[0], "recv");
  checkTag(tag, "recv", rank_, srcRank);
  TORCH_CHECK_VALUE(srcRank >= 0 && srcRank < size_ && srcRank != rank_, "hoccl recv: peer ", srcRank,
                    " is not another rank of this group of ", size_, " (hoccl has no receive from any source)");
  at::Tensor t = tensors[0];
  return enqueue(
      c10d::OpType::RECV, {t},
      [this, t, srcRank] {
    check(hocclRecv(t.data_ptr(), count(t), dtypeOf(t), srcRank, comm_, nullptr), comm_, "hocclRecv");
      },
      /*p2p=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::barrier(const c10d::BarrierOptions&) {
  at::Tensor token = at::zeros({1}, at::kInt);
  return enqueue(c10d::OpType::BARRIER, {}, [this, token] {
    check(hocclAllReduce(token.data_ptr(), token.data_ptr(), 1, hocclInt32, hocclSum, comm_, nullptr), comm_,
          "hocclAllReduce (barrier)");
  });
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupHoccl::split(const c10::intrusive_ptr<c10d::Store>&,
                                                           const std::vector<int>& ranks,
                                                           const c10::intrusive_ptr<Options>& opts) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank_) key = static_cast<int>(i);
  // Groups of a split are disjoint: the smallest parent rank names each one.
  const int color = key < 0 ? HOCCL_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  hocclComm_t child = nullptr;
  runOnWorker([&](hocclComm_t comm) {
    check(hocclCommSplit(comm, color, key < 0 ? 0 : key, &child, nullptr), comm, "hocclCommSplit");
  });
  if (key < 0 || child == nullptr) return nullptr;
  const auto timeout = opts ? opts->timeout : timeout_;
  auto backend = c10::make_intrusive<ProcessGroupHoccl>(child, key, static_cast<int>(ranks.size()), timeout);
  backend->setOrigin("hocclCommSplit");
  return backend;
}

}  // namespace hoccl_torch
