/// @file process_group.h
/// The c10d backend "hoccl": torch.distributed collectives on CPU tensors, run by hoccl's public C API.
///
/// Each backend owns one hoccl communicator and one worker thread (as Gloo has). A call checks its tensors on the
/// caller's thread (device, layout, dtype, sizes: a c10::Error, i.e. a Python exception, and nothing queued), then
/// queues a job and returns a Work at once; the jobs run one at a time in call order, so every rank issues its hoccl
/// calls in the same order. Normally the worker runs them. A caller that waits for its Work without a timeout
/// (`work.wait()`, and every synchronous call: `dist.all_reduce(t)`) while its job is next and nothing runs takes
/// the job and runs it on its own thread: it would only sleep until the worker ran it, and on a busy host the
/// worker's wake-up can cost more than a small collective. A failed hoccl call completes its Work with hoccl's
/// message (read on the thread that ran it, where hocclGetLastError keeps it). Consecutive send/recv jobs found in
/// the queue run inside one hoccl group on the worker (a caller never takes them), so isend/irecv pairs in either
/// order on two ranks do not block each other.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "hoccl/hoccl.h"

namespace hoccl_torch {

class HocclWork;

/// A queued job: run() does the hoccl calls; p2p marks send/recv jobs that may share one hoccl group.
struct Job {
  std::function<void()> run;
  c10::intrusive_ptr<HocclWork> work;
  bool p2p = false;
};

/// A backend's jobs, shared by the backend (its worker) and its Works (which may take their own job). Jobs run one
/// at a time (`busy`), in queue order.
struct JobQueue {
  std::mutex mutex;
  std::condition_variable cv;  ///< the worker waits here for a job, for the queue to be free, or for stop
  std::deque<Job> queue;
  /// Jobs that finished: their tensors and Works are released on a caller's thread (the next call, or the
  /// destructor), never on the worker. Dropping the last reference to a tensor that Python created takes the GIL,
  /// and a thread that asks for the GIL while the interpreter shuts down is ended by Python 3.11 with pthread_exit,
  /// whose unwinding through a destructor ends the process ("terminate called without an active exception").
  std::vector<Job> retired;
  bool busy = false;  ///< a job runs now (on the worker or on a caller's thread)
  bool stop = false;  ///< the backend is being destroyed: the worker ends once the queue is empty and free
  /// Runs `work`'s job on this thread if it is next in the queue, nothing runs and it is not a send/recv; returns
  /// whether it did. Jobs the worker finished are released here too.
  bool runIfNext(const HocclWork* work);
};

/// A Work completed by the thread that ran its job; its future carries the output tensors.
class HocclWork : public c10d::Work {
 public:
  /// A work of opType whose outputs are `outputs`; wait() without a timeout waits at most `timeout`. `jobs` is the
  /// queue its job goes to (wait() may run the job itself).
  HocclWork(int rank, c10d::OpType opType, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
            std::weak_ptr<JobQueue> jobs = {});
  /// Blocks until the job ran (at most `timeout`, or the backend's timeout for kNoTimeout); rethrows its error.
  /// Without a timeout, runs the job on this thread when it is next and nothing else runs (see the file comment).
  bool wait(std::chrono::milliseconds timeout) override;
  /// The future completed with the output tensors (or the job's error).
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  /// The output tensors.
  std::vector<at::Tensor> result() override { return outputs_; }
  /// Called by the worker: completes the work (error = nullptr for success).
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<JobQueue> jobs_;
};

/// The backend: one hoccl communicator driven by one worker thread.
class ProcessGroupHoccl : public c10d::Backend {
 public:
  /// Wraps an initialized communicator of `size` ranks in which this process is `rank`. An owned communicator is
  /// destroyed with the backend; a borrowed one (a PaRO handle's) lives as long as `keepAlive` does.
  ProcessGroupHoccl(hocclComm_t comm, int rank, int size, std::chrono::milliseconds timeout, bool ownsComm = true,
                    std::shared_ptr<void> keepAlive = nullptr);
  ~ProcessGroupHoccl() override;

  /// Rendezvous through the store (rank 0 publishes a hoccl unique id under `key`), then hocclCommInitRank.
  static c10::intrusive_ptr<ProcessGroupHoccl> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                      std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "hoccl"; }
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return false; }
  /// The options split_group copies for the child: the backend's name and timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override { return c10::make_intrusive<Options>("hoccl", timeout_); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  /// torch.distributed.split_group: hocclCommSplit of this communicator (every rank of it calls split; ranks not in
  /// `ranks` get nullptr).
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;

  /// Runs fn(comm) on the worker thread after every queued job and returns when it ran (its exception rethrown).
  void runOnWorker(const std::function<void(hocclComm_t)>& fn);
  /// The communicator (used on the worker thread only, or through runOnWorker).
  hocclComm_t comm() const { return comm_; }
  /// The timeout of this backend's works.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The hoccl call that made this backend's communicator: "hocclCommInitRank", "hocclCommSplit" or
  /// "hocclParoCreate" (tests check that new_group and split_group split the parent).
  const std::string& origin() const { return origin_; }
  /// Records the hoccl call that made the communicator (see origin()).
  void setOrigin(std::string origin) { origin_ = std::move(origin); }

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType opType, std::vector<at::Tensor> outputs,
                                         std::function<void()> run, bool p2p = false);
  void workerLoop();

  hocclComm_t comm_;
  bool ownsComm_;
  std::shared_ptr<void> keepAlive_;
  std::chrono::milliseconds timeout_;
  std::string origin_ = "hocclCommInitRank";
  std::shared_ptr<JobQueue> jobs_ = std::make_shared<JobQueue>();
  std::thread worker_;
};

/// Throws a c10::Error with hoccl's message when r is not hocclSuccess (what: the call that failed).
void check(hocclResult_t r, hocclComm_t comm, const char* what);
/// Sets HOCCL_TIMEOUT (seconds, rounded up) from a torch timeout unless the environment sets it already; hoccl reads
/// it once per process, at its first wait.
void applyTimeout(std::chrono::milliseconds timeout);

}  // namespace hoccl_torch
