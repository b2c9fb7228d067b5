// The executor (src/exec/executor.h) on its own: hand-written schedules run with exec::run over real communicators
// (hocclCommInitAll: one thread per rank, shm or tcp between them), every result checked against values computed
// here independently. Covers send/recv, recvReduce, the local prims, step order, self-driven (poll) tasks among
// scheduled ones, tasks of two communicators progressing together, the before/after hooks, a peer that never
// arrives (hocclTimeout after HOCCL_TIMEOUT, naming it) and an abort that releases a waiting run.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "scoped_env.h"
#include "base/error.h"
#include "comm/communicator.h"
#include "exec/executor.h"
#include "sched/schedule.h"

using namespace hoccl;
using hoccl::test::ScopedEnv;
using Clock = std::chrono::steady_clock;

namespace {

/// HOCCL_TIMEOUT for this whole binary. The executor reads it once (a function-local static on its first run), so
/// it is set before anything else runs: in a constructor with a priority, ahead of every ordinary static initialiser.
constexpr int kTimeoutSec = 3;

__attribute__((constructor(101))) void setTimeoutBeforeAnything() {
  setenv("HOCCL_TIMEOUT", std::to_string(kTimeoutSec).c_str(), 1);
}

/// n communicators of one job made by hocclCommInitAll (each rank's init on its own thread), destroyed at the end.
struct Job {
  std::vector<hocclComm_t> handles;
  explicit Job(int n) : handles(n, nullptr) {
    INFO(hocclGetLastError(nullptr));
    REQUIRE(hocclCommInitAll(handles.data(), n, nullptr) == hocclSuccess);
  }
  ~Job() {
    for (hocclComm_t h : handles) hocclCommDestroy(h);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  /// The internal communicator of rank r.
  Communicator& operator[](int r) { return *handles.at(r)->impl; }
};

/// A schedule from a list of steps, each a list of prims.
std::shared_ptr<const sched::Schedule> schedule(std::vector<std::vector<sched::Prim>> steps) {
  auto s = std::make_shared<sched::Schedule>();
  for (auto& prims : steps) s->steps.push_back(sched::Step{std::move(prims)});
  s->algorithm = "hand-written";
  return s;
}

/// A scheduled task on comm over buffers (indexed like the prims' buffer numbers).
exec::Task task(Communicator& comm, std::shared_ptr<const sched::Schedule> s, std::vector<char*> buffers,
                hocclDataType_t dtype, size_t elemSize, kernels::BinOp op, const std::string& what) {
  exec::Task t;
  t.comm = &comm;
  t.schedule = std::move(s);
  t.binding.buffers = std::move(buffers);
  t.binding.elemSize = elemSize;
  t.binding.dtype = dtype;
  t.binding.op = op;
  t.what = [what] { return what; };
  return t;
}

template <class T>
char* bytes(std::vector<T>& v) {
  return reinterpret_cast<char*>(v.data());
}

/// What one rank's run ended with: "" when it returned, else the error's text; code is the error's code.
struct Outcome {
  std::string error;
  hocclResult_t code = hocclSuccess;
  double seconds = 0;
};

Outcome runCatching(std::vector<exec::Task>& tasks) {
  Outcome o;
  auto start = Clock::now();
  try {
    exec::run(tasks);
  } catch (const Error& e) {
    o.error = e.what();
    o.code = e.code();
  } catch (const std::exception& e) {
    o.error = std::string("not a hoccl::Error: ") + e.what();
    o.code = hocclInternalError;
  }
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

/// Runs perThread[i] on thread i, all at once, and returns how each ended. Catch2's checks are not thread-safe, so
/// the threads only record; the test checks afterwards.
std::vector<Outcome> runOnThreads(std::vector<std::vector<exec::Task>>& perThread) {
  std::vector<Outcome> out(perThread.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < perThread.size(); ++i) threads.emplace_back([&, i] { out[i] = runCatching(perThread[i]); });
  for (auto& t : threads) t.join();
  return out;
}

/// Requires that every run returned normally (and shows the first error otherwise).
void requireAllOk(const std::vector<Outcome>& outcomes) {
  for (size_t i = 0; i < outcomes.size(); ++i) {
    INFO("thread " << i << ": " << outcomes[i].error);
    REQUIRE(outcomes[i].error.empty());
  }
}

/// Distinct, exactly representable values for rank r: r * 1000003 + i, small enough for float to hold exactly
/// after the additions below.
std::vector<int32_t> pattern(int r, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((r + 1) * 100003 + static_cast<int32_t>(i % 99991));
  return v;
}

constexpr int32_t kUntouched = -12345;

/// "" when got[0, expected.size()) equals expected, else the first difference (Catch2 prints it on failure).
template <class T>
std::string mismatch(const T* got, const std::vector<T>& expected) {
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(got[i] == expected[i]))
      return fmt::format("element {} of {}: got {}, expected {}", i, expected.size(), got[i], expected[i]);
  return "";
}

}  // namespace

TEST_CASE("send and recv between two ranks, both ways in one step", "[executor]") {
  const bool tcp = GENERATE(false, true);
  std::unique_ptr<ScopedEnv> noShm;
  if (tcp) noShm = std::make_unique<ScopedEnv>("HOCCL_SHM_DISABLE", "1");
  Job job(2);
  REQUIRE(job[0].transportName(1) == (tcp ? "tcp" : "shm"));
  // 1 element, a few, and more than one shm slot (512 KiB) and one tcp stripe.
  const size_t n = GENERATE(size_t{1}, size_t{1000}, size_t{400000});
  const size_t srcOff = 3, dstOff = 5;
  std::vector<std::vector<int32_t>> in(2), out(2);
  std::vector<std::vector<exec::Task>> tasks(2);
  for (int r = 0; r < 2; ++r) {
    in[r] = pattern(r, n + srcOff);
    out[r].assign(n + dstOff + 2, kUntouched);
    auto s = schedule({{sched::send(1 - r, sched::kInput, srcOff, n), sched::recv(1 - r, sched::kOutput, dstOff, n)}});
    tasks[r].push_back(task(job[r], s, {bytes(in[r]), bytes(out[r])}, hocclInt32, 4, kernels::BinOp::Sum,
                            "exchange on rank " + std::to_string(r)));
  }
  hocclCommCounters_t before{}, after{};
  REQUIRE(hocclCommGetCounters(job.handles[0], &before) == hocclSuccess);
  requireAllOk(runOnThreads(tasks));
  REQUIRE(hocclCommGetCounters(job.handles[0], &after) == hocclSuccess);
  for (int r = 0; r < 2; ++r) {
    const auto& from = in[1 - r];
    INFO("rank " << r << ", n " << n << (tcp ? ", tcp" : ", shm"));
    std::vector<int32_t> expected(dstOff, kUntouched);
    expected.insert(expected.end(), from.begin() + srcOff, from.begin() + srcOff + n);
    expected.insert(expected.end(), 2, kUntouched);
    REQUIRE(mismatch(out[r].data(), expected) == "");
  }
  unsigned long long sent = 0, received = 0;
  for (int k = 0; k < hocclNumLinkClasses; ++k) {
    sent += after.bytesSent[k] - before.bytesSent[k];
    received += after.bytesReceived[k] - before.bytesReceived[k];
  }
  CHECK(sent == n * 4);
  CHECK(received == n * 4);
}

TEST_CASE("several messages to one peer in one step match in posting order", "[executor]") {
  Job job(2);
  const size_t a = 700, b = 150000;  // the second one spans several slots
  std::vector<int32_t> in0 = pattern(0, a + b);
  std::vector<int32_t> first(a, kUntouched), second(b, kUntouched), unused(1, 0);
  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(job[0], schedule({{sched::send(1, 0, 0, a), sched::send(1, 0, a, b)}}), {bytes(in0)},
                          hocclInt32, 4, kernels::BinOp::Sum, "two sends"));
  // Buffers 3 and 5 on purpose: indices are names, not positions of collectives' buffers.
  tasks[1].push_back(task(job[1], schedule({{sched::recv(0, 3, 0, a), sched::recv(0, 5, 0, b)}}),
                          {bytes(unused), bytes(unused), bytes(unused), bytes(first), bytes(unused), bytes(second)},
                          hocclInt32, 4, kernels::BinOp::Sum, "two receives"));
  requireAllOk(runOnThreads(tasks));
  REQUIRE(mismatch(first.data(), std::vector<int32_t>(in0.begin(), in0.begin() + a)) == "");
  REQUIRE(mismatch(second.data(), std::vector<int32_t>(in0.begin() + a, in0.end())) == "");
}

TEST_CASE("recvReduce combines the peer's data with a local source", "[executor]") {
  Job job(2);
  const size_t n = GENERATE(size_t{1}, size_t{300000});
  const bool inPlace = GENERATE(false, true);
  const auto op = GENERATE(kernels::BinOp::Sum, kernels::BinOp::Max, kernels::BinOp::Min);
  INFO("n " << n << (inPlace ? ", in place" : "") << ", op " << kernels::opName(op));
  const size_t srcOff = 2, dstOff = inPlace ? 2 : 4;
  std::vector<int32_t> in0 = pattern(0, n), in1 = pattern(1, n + srcOff);
  // Make some of rank 0's values larger and some smaller, so max and min take from both sides.
  for (size_t i = 0; i < n; i += 3) in0[i] += 300000;
  std::vector<int32_t> out1(n + dstOff, kUntouched);
  std::vector<int32_t> expected(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t x = in1[srcOff + i], y = in0[i];
    expected[i] = op == kernels::BinOp::Sum ? x + y : op == kernels::BinOp::Max ? std::max(x, y) : std::min(x, y);
  }
  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(job[0], schedule({{sched::send(1, sched::kInput, 0, n)}}), {bytes(in0), nullptr}, hocclInt32,
                          4, op, "send"));
  // In place: input and output are one buffer, as in an in-place collective.
  char* output = inPlace ? bytes(in1) : bytes(out1);
  tasks[1].push_back(task(job[1], schedule({{sched::recvReduce(0, sched::kInput, srcOff, sched::kOutput, dstOff, n)}}),
                          {bytes(in1), output}, hocclInt32, 4, op, "recvReduce"));
  requireAllOk(runOnThreads(tasks));
  REQUIRE(mismatch(reinterpret_cast<const int32_t*>(output) + dstOff, expected) == "");
  if (!inPlace) REQUIRE(mismatch(out1.data(), std::vector<int32_t>(dstOff, kUntouched)) == "");
}

TEST_CASE("recvReduce on floating types", "[executor]") {
  Job job(2);
  const size_t n = 100001;
  std::vector<double> in0(n), in1(n), out1(n, -1.0), expected(n);
  for (size_t i = 0; i < n; ++i) {
    in0[i] = 0.5 * static_cast<double>(i);
    in1[i] = 1.0 / static_cast<double>(i + 1);
    expected[i] = in1[i] * in0[i];
  }
  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(job[0], schedule({{sched::send(1, sched::kInput, 0, n)}}), {bytes(in0)}, hocclFloat64, 8,
                          kernels::BinOp::Prod, "send"));
  tasks[1].push_back(task(job[1], schedule({{sched::recvReduce(0, sched::kInput, 0, sched::kOutput, 0, n)}}),
                          {bytes(in1), bytes(out1)}, hocclFloat64, 8, kernels::BinOp::Prod, "recvReduce prod"));
  requireAllOk(runOnThreads(tasks));
  REQUIRE(mismatch(out1.data(), expected) == "");  // one multiplication, rounded once: exact equality holds
}

TEST_CASE("local copy and reduce prims on one rank", "[executor]") {
  Job job(1);
  const size_t n = 1000;
  std::vector<int32_t> in = pattern(0, 2 * n), out(n + 7, kUntouched), scratch(n, kUntouched);
  // scratch = in[0, n); scratch = scratch + in[n, 2n); out[7, 7 + n) = scratch; a copy onto itself is a no-op.
  auto sum = schedule({{sched::copy(sched::kInput, 0, sched::kScratch, 0, n)},
                       {sched::reduceLocal(sched::kInput, n, sched::kScratch, 0, n)},
                       {sched::copy(sched::kScratch, 0, sched::kOutput, 7, n)},
                       {sched::copy(sched::kOutput, 7, sched::kOutput, 7, n)}});
  // Then, with max: out[7, 7 + n) = max(out[7, 7 + n), in[n, 2n) shifted by n / 2).
  std::vector<int32_t> shifted(in.begin() + n / 2, in.begin() + n / 2 + n);
  auto max = schedule({{sched::reduceLocal(3, 0, sched::kOutput, 7, n)}});
  std::vector<exec::Task> tasks;
  tasks.push_back(
      task(job[0], sum, {bytes(in), bytes(out), bytes(scratch)}, hocclInt32, 4, kernels::BinOp::Sum, "local sum"));
  tasks.push_back(task(job[0], max, {bytes(in), bytes(out), bytes(scratch), bytes(shifted)}, hocclInt32, 4,
                       kernels::BinOp::Max, "local max"));
  Outcome o = runCatching(tasks);
  INFO(o.error);
  REQUIRE(o.error.empty());
  std::vector<int32_t> expectedScratch(n), expectedOut(7, kUntouched);
  for (size_t i = 0; i < n; ++i) {
    expectedScratch[i] = in[i] + in[n + i];
    expectedOut.push_back(std::max(in[i] + in[n + i], in[n / 2 + i]));
  }
  REQUIRE(mismatch(scratch.data(), expectedScratch) == "");
  REQUIRE(mismatch(out.data(), expectedOut) == "");
}

TEST_CASE("steps complete in order: a value bounces between two ranks", "[executor]") {
  // Each round: rank 0 sends A, rank 1 receives it into B, adds one, sends B back, rank 0 receives it into A and
  // adds one. Every step reads what the step before it wrote, so any step started early shows up in the result.
  Job job(2);
  const size_t n = GENERATE(size_t{16}, size_t{300000});  // the larger spans several slots: receives take a while
  const int rounds = 5;
  std::vector<int32_t> a = pattern(0, n), start = a, b(n, kUntouched), ones(n, 1);
  std::vector<std::vector<sched::Prim>> s0, s1;
  for (int k = 0; k < rounds; ++k) {
    s0.push_back({sched::send(1, 0, 0, n)});
    s0.push_back({sched::recv(1, 0, 0, n)});
    s0.push_back({sched::reduceLocal(1, 0, 0, 0, n)});
    s1.push_back({sched::recv(0, 0, 0, n)});
    s1.push_back({sched::reduceLocal(1, 0, 0, 0, n)});
    s1.push_back({sched::send(0, 0, 0, n)});
  }
  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(
      task(job[0], schedule(s0), {bytes(a), bytes(ones)}, hocclInt32, 4, kernels::BinOp::Sum, "bounce rank 0"));
  tasks[1].push_back(
      task(job[1], schedule(s1), {bytes(b), bytes(ones)}, hocclInt32, 4, kernels::BinOp::Sum, "bounce rank 1"));
  requireAllOk(runOnThreads(tasks));
  std::vector<int32_t> expectedA(n), expectedB(n);
  for (size_t i = 0; i < n; ++i) {
    expectedA[i] = start[i] + 2 * rounds;
    expectedB[i] = start[i] + 2 * rounds - 1;
  }
  REQUIRE(mismatch(a.data(), expectedA) == "");
  REQUIRE(mismatch(b.data(), expectedB) == "");
}

TEST_CASE("a self-driven (poll) task runs in order between scheduled tasks", "[executor]") {
  // Rank 1: receive rank 0's input; poll (sees the receive complete, then lets rank 0 go on); add its own input and
  // send the sum back. Rank 0: send; poll until rank 1's poll ran; receive the sum.
  Job job(2);
  const size_t n = 200000;
  std::vector<int32_t> in0 = pattern(0, n), in1 = pattern(1, n), out0(n, kUntouched), out1(n, kUntouched);
  std::atomic<bool> oneReceived{false};
  std::atomic<int> polls0{0}, polls1{0};
  std::atomic<bool> pollSawReceive{false}, lastTaskSawPoll{false}, pollSawFirstTaskDone{false};

  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(job[0], schedule({{sched::send(1, sched::kInput, 0, n)}}), {bytes(in0), bytes(out0)},
                          hocclInt32, 4, kernels::BinOp::Sum, "send to 1"));
  {
    exec::Task t;
    t.comm = &job[0];
    t.poll = [&] {
      ++polls0;
      return oneReceived.load();
    };
    t.waitingFor = [] { return std::string("rank 1's poll"); };
    t.what = [] { return std::string("poll on rank 0"); };
    tasks[0].push_back(std::move(t));
  }
  tasks[0].push_back(task(job[0], schedule({{sched::recv(1, sched::kOutput, 0, n)}}), {bytes(in0), bytes(out0)},
                          hocclInt32, 4, kernels::BinOp::Sum, "receive from 1"));
  tasks[0].back().before = [&] { lastTaskSawPoll = oneReceived.load(); };

  tasks[1].push_back(task(job[1], schedule({{sched::recv(0, sched::kOutput, 0, n)}}), {bytes(in1), bytes(out1)},
                          hocclInt32, 4, kernels::BinOp::Sum, "receive from 0"));
  tasks[1].back().after = [&] { pollSawFirstTaskDone = polls1.load() == 0; };
  {
    exec::Task t;
    t.comm = &job[1];
    t.poll = [&] {
      // Self-driven: done on the third call, as a real one-shot path finishes after a few polls.
      if (++polls1 == 1) pollSawReceive = std::equal(out1.begin(), out1.end(), in0.begin());
      if (polls1 < 3) return false;
      oneReceived = true;
      return true;
    };
    t.waitingFor = [] { return std::string("nothing"); };
    t.what = [] { return std::string("poll on rank 1"); };
    tasks[1].push_back(std::move(t));
  }
  tasks[1].push_back(task(job[1],
                          schedule({{sched::reduceLocal(sched::kInput, 0, sched::kOutput, 0, n)},
                                    {sched::send(0, sched::kOutput, 0, n)}}),
                          {bytes(in1), bytes(out1)}, hocclInt32, 4, kernels::BinOp::Sum, "add and send back"));
  requireAllOk(runOnThreads(tasks));

  CHECK(pollSawFirstTaskDone);  // the scheduled task before the poll finished (its after hook) before any poll
  CHECK(pollSawReceive);        // and its receive had landed when the poll first ran
  CHECK(polls1 == 3);           // polled until done, never again after
  CHECK(polls0 >= 1);
  CHECK(lastTaskSawPoll);  // rank 0's last task started only after its poll returned true
  std::vector<int32_t> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = in0[i] + in1[i];
  REQUIRE(mismatch(out0.data(), expected) == "");
}

TEST_CASE("tasks of two communicators driven by one thread progress together", "[executor]") {
  // Thread A: receive on X from X's rank 1, then send on Y to Y's rank 1. Thread B: receive on Y, then send on X.
  // The messages exceed what the shm ring buffers (8 slots of 512 KiB by default), so a send completes only while
  // its receiver drains it: run one task after the other and the two threads wait for each other forever.
  Job x(2), y(2);
  REQUIRE(x[0].transportName(1) == "shm");
  const size_t n = 4u << 20;  // 16 MiB of int32
  std::vector<int32_t> xin = pattern(0, n), yin = pattern(1, n), xout(n, kUntouched), yout(n, kUntouched);
  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(x[0], schedule({{sched::recv(1, sched::kOutput, 0, n)}}), {nullptr, bytes(xout)}, hocclInt32,
                          4, kernels::BinOp::Sum, "X recv"));
  tasks[0].push_back(task(y[0], schedule({{sched::send(1, sched::kInput, 0, n)}}), {bytes(yin), nullptr}, hocclInt32, 4,
                          kernels::BinOp::Sum, "Y send"));
  tasks[1].push_back(task(y[1], schedule({{sched::recv(0, sched::kOutput, 0, n)}}), {nullptr, bytes(yout)}, hocclInt32,
                          4, kernels::BinOp::Sum, "Y recv"));
  tasks[1].push_back(task(x[1], schedule({{sched::send(0, sched::kInput, 0, n)}}), {bytes(xin), nullptr}, hocclInt32, 4,
                          kernels::BinOp::Sum, "X send"));
  requireAllOk(runOnThreads(tasks));
  REQUIRE(mismatch(xout.data(), xin) == "");
  REQUIRE(mismatch(yout.data(), yin) == "");
}

TEST_CASE("before and after hooks run around each task's steps", "[executor]") {
  // Rank 1 computes (3 * in1 + in0) / 2 the way the API edge does PreMulSum and Avg: `before` scales the input,
  // the schedule sums, `after` divides the output.
  Job job(2);
  const size_t n = 50000;
  std::vector<int32_t> in0 = pattern(0, n), in1 = pattern(1, n), original1 = in1, out1(n, kUntouched),
                       copyOfOut(n, kUntouched);
  std::vector<std::string> events;  // written by rank 1's thread only
  bool outputUntouchedAtBefore = false, outputSummedAtAfter = false, afterSawDivided = false;

  std::vector<std::vector<exec::Task>> tasks(2);
  tasks[0].push_back(task(job[0], schedule({{sched::send(1, sched::kInput, 0, n)}}), {bytes(in0)}, hocclInt32, 4,
                          kernels::BinOp::Sum, "send"));
  tasks[1].push_back(task(job[1], schedule({{sched::recvReduce(0, sched::kInput, 0, sched::kOutput, 0, n)}}),
                          {bytes(in1), bytes(out1)}, hocclInt32, 4, kernels::BinOp::Sum, "scaled sum"));
  tasks[1].back().before = [&] {
    events.push_back("sum.before");
    outputUntouchedAtBefore = std::all_of(out1.begin(), out1.end(), [](int32_t v) { return v == kUntouched; });
    const int32_t three = 3;
    kernels::scale(in1.data(), in1.data(), n, hocclInt32, &three);
  };
  tasks[1].back().after = [&] {
    events.push_back("sum.after");
    outputSummedAtAfter = true;
    for (size_t i = 0; i < n; ++i) outputSummedAtAfter &= out1[i] == 3 * original1[i] + in0[i];
    kernels::divide(out1.data(), n, hocclInt32, 2);
  };
  tasks[1].push_back(task(job[1], schedule({{sched::copy(sched::kOutput, 0, 3, 0, n)}}),
                          {bytes(in1), bytes(out1), nullptr, bytes(copyOfOut)}, hocclInt32, 4, kernels::BinOp::Sum,
                          "copy"));
  tasks[1].back().before = [&] {
    events.push_back("copy.before");
    afterSawDivided = out1[0] == (3 * original1[0] + in0[0]) / 2;
  };
  tasks[1].back().after = [&] { events.push_back("copy.after"); };
  requireAllOk(runOnThreads(tasks));

  REQUIRE(events == std::vector<std::string>{"sum.before", "sum.after", "copy.before", "copy.after"});
  CHECK(outputUntouchedAtBefore);
  CHECK(outputSummedAtAfter);
  CHECK(afterSawDivided);
  std::vector<int32_t> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = (3 * original1[i] + in0[i]) / 2;
  REQUIRE(mismatch(out1.data(), expected) == "");
  REQUIRE(mismatch(copyOfOut.data(), expected) == "");
}

TEST_CASE("a peer that never arrives is a hocclTimeout after HOCCL_TIMEOUT naming it", "[executor][timeout]") {
  setenv("HOCCL_CONNECT", "eager", 1);  // the executor's own wait (a lazy connect's is tests/unit/test_scale.cc's)
  Job job(2);
  unsetenv("HOCCL_CONNECT");
  std::vector<int32_t> out(64, kUntouched);

  SECTION("a scheduled receive") {
    std::vector<exec::Task> tasks;
    tasks.push_back(task(job[0],
                         schedule({{sched::copy(sched::kOutput, 0, sched::kOutput, 0, 1)},
                                   {sched::recv(1, sched::kOutput, 0, 64)}}),
                         {nullptr, bytes(out)}, hocclInt32, 4, kernels::BinOp::Sum, "Lonely(recv from 1)"));
    Outcome o = runCatching(tasks);  // rank 1 never runs anything
    INFO(o.error);
    CHECK(o.code == hocclTimeout);
    CHECK(o.error.find("Lonely(recv from 1)") != std::string::npos);
    CHECK(o.error.find("step 2/2") != std::string::npos);
    CHECK(o.error.find("waiting for rank 1 (host") != std::string::npos);
    CHECK(o.error.find(fmt::format("no progress for {} s", kTimeoutSec)) != std::string::npos);
    CHECK(o.error.find("HOCCL_TIMEOUT") != std::string::npos);
    CHECK(o.seconds >= kTimeoutSec);
    CHECK(o.seconds < kTimeoutSec + 10);
  }
  SECTION("a self-driven task") {
    std::vector<exec::Task> tasks;
    exec::Task t;
    t.comm = &job[0];
    t.poll = [] { return false; };
    t.waitingFor = [] { return std::string("rank 1 (host h, pid 42)"); };
    t.what = [] { return std::string("Stuck(poll)"); };
    tasks.push_back(std::move(t));
    Outcome o = runCatching(tasks);
    INFO(o.error);
    CHECK(o.code == hocclTimeout);
    CHECK(o.error.find("Stuck(poll)") != std::string::npos);
    CHECK(o.error.find("waiting for rank 1 (host h, pid 42)") != std::string::npos);
    CHECK(o.error.find(fmt::format("no progress for {} s", kTimeoutSec)) != std::string::npos);
    CHECK(o.seconds >= kTimeoutSec);
    CHECK(o.seconds < kTimeoutSec + 10);
  }
}

TEST_CASE("an abort releases a run that waits for a peer", "[executor][abort]") {
  Job job(2);
  std::vector<int32_t> out(64, kUntouched);
  std::vector<exec::Task> tasks;
  tasks.push_back(task(job[0], schedule({{sched::recv(1, sched::kOutput, 0, 64)}}), {nullptr, bytes(out)}, hocclInt32,
                       4, kernels::BinOp::Sum, "Waiting(recv from 1)"));
  Outcome o;
  std::thread waiter([&] { o = runCatching(tasks); });
  // The run counts itself in inFlight while it waits (hocclCommAbort waits for that count to drop).
  auto until = Clock::now() + std::chrono::seconds(2);
  while (job[0].inFlight.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int inFlightWhileWaiting = job[0].inFlight.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto abortedAt = Clock::now();
  job[0].health().abort();
  waiter.join();
  const double released = std::chrono::duration<double>(Clock::now() - abortedAt).count();
  INFO(o.error);
  CHECK(inFlightWhileWaiting == 1);
  CHECK(job[0].inFlight.load() == 0);
  CHECK(o.code == hocclInvalidUsage);
  CHECK(o.error.find("aborted") != std::string::npos);
  CHECK(released < 1.0);  // well before HOCCL_TIMEOUT
  CHECK(std::all_of(out.begin(), out.end(), [](int32_t v) { return v == kUntouched; }));
}
