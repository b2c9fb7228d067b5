/// @file rank.cc
/// One rank of a perf tool. For every (type, op, root, size): generate this rank's input once, then for the
/// out-of-place and the in-place variant run the warm-up iterations, time `-n` iterations of `-m` aggregated calls,
/// combine the time across ranks with a one-element all-reduce (per -a), and run `-c` checked calls whose output
/// is compared element by element with a reference computed independently in double precision (data.h).
#include "rank.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "data.h"

namespace hoccl_perf {
namespace {

constexpr size_t kGuard = 64;  // pattern bytes after each receive area, to catch stray writes

struct FreeDeleter {
  bool shared = false;  ///< from hocclMemAlloc
  void operator()(unsigned char* p) const {
    if (shared) hocclMemFree(p);
    else std::free(p);
  }
};
using Buffer = std::unique_ptr<unsigned char[], FreeDeleter>;

// Page-aligned host memory; with `shared`, from hocclMemAlloc (memory the ranks of a host can map: -R 1 and 2).
Buffer allocBuffer(size_t bytes, bool shared = false) {
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  if (shared) {
    void* p = nullptr;
    if (hocclMemAlloc(&p, rounded) != hocclSuccess) return Buffer(nullptr, FreeDeleter{true});
    return Buffer(static_cast<unsigned char*>(p), FreeDeleter{true});
  }
  return Buffer(static_cast<unsigned char*>(std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded)));
}

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t caseSeed(size_t bytes, hocclDataType_t type, OpKind op, int root) {
  return 0x6f63636c5eedULL ^ (static_cast<uint64_t>(bytes) * 0x100000001b3ULL) ^ (static_cast<uint64_t>(type) << 40) ^
         (static_cast<uint64_t>(op) << 48) ^ (static_cast<uint64_t>(root + 1) << 56);
}

/// One test case: the row it produces.
struct Case {
  hocclDataType_t type;
  OpKind op;
  int root;
  size_t bytes;
};

class Runner {
 public:
  Runner(Job& job, int thread)
      : job_(job), o_(job.opts), test_(*job.test), thread_(thread), rank_(job.procRank * job.opts.nThreads + thread),
        nranks_(job.worldSize()), printer_(rank_ == 0) {}

  int run();

 private:
  [[noreturn]] void fatal(const std::string& msg);
  void check(hocclResult_t r, const char* call);
  void init();
  std::vector<RankDesc> describeRanks();
  double allReduce(double v, hocclRedOp_t op);
  double now() const;
  void sweep();
  Row runCase(const Case& cs);
  Measure measure(const Case& cs, const Counts& c, const DataSpec& spec, hocclRedOp_t op, bool inPlace);
  void iteration(const CallArgs& a);
  void prepare(const Counts& c, size_t elt, bool inPlace);
  void checkOnce(const Case& cs, const Counts& c, const DataSpec& spec, const CallArgs& a, bool inPlace,
                 long long* wrong, long long* oob);
  void setWatchdog(const Case* cs);

  Job& job_;
  const Options& o_;
  const CollTest& test_;
  int thread_, rank_, nranks_;
  bool printer_;
  hocclComm_t comm_ = nullptr;
  std::unique_ptr<Report> report_;
  Buffer send_, recv_, pristine_;
  size_t bufBytes_ = 0;
  // Device mode (a device is present, e.g. HOCCL_DEVICE=sim): the calls use device copies of send_ and recv_ on
  // stream_; data is prepared and checked in the host buffers and copied across around each checked call.
  bool device_ = false;
  void* dsend_ = nullptr;
  void* drecv_ = nullptr;
  hocclStream_t stream_ = nullptr;
  void* toDevice(const void* host) const;
  void upload();
  void download();
  void syncStream();
  std::vector<Block> blocks_;
  long long totalWrong_ = 0, totalOob_ = 0;
};

void Runner::fatal(const std::string& msg) {
  std::fflush(stdout);
  fmt::print(stderr, "{}: rank {} of {} (pid {}): {}\n", test_.name, rank_, nranks_, getpid(), msg);
  std::fflush(stderr);
  if (comm_ != nullptr) hocclCommAbort(comm_);
  std::_Exit(1);
}

void Runner::check(hocclResult_t r, const char* call) {
  if (r == hocclSuccess) return;
  fatal(fmt::format("{} failed: {} ({}). Run with HOCCL_DEBUG=INFO for details.", call, hocclGetErrorString(r),
                    hocclGetLastError(comm_)));
}

void Runner::init() {
  hocclResult_t r;
  if (job_.launched) {
    r = hocclCommInitRankFromEnv(&comm_, nranks_, rank_);
  } else {
    r = hocclCommInitRank(&comm_, nranks_, job_.id, rank_);
  }
  if (r != hocclSuccess) {
    comm_ = nullptr;
    fatal(
        fmt::format("creating the communicator ({} ranks, {} process(es) x {} thread(s)) failed: {} ({}). "
                    "Check that every rank was started and that HOCCL_COMM_ID is reachable.",
                    nranks_, job_.nProcs, o_.nThreads, hocclGetErrorString(r), hocclGetLastError(nullptr)));
  }
}

std::vector<RankDesc> Runner::describeRanks() {
  struct Wire {
    int32_t pid;
    char host[60];
    char transports[64];
  };
  Wire mine{};
  mine.pid = getpid();
  gethostname(mine.host, sizeof(mine.host) - 1);
  // Which transports carry this rank's peers, with how many peers each ("shm x1, ucx x6").
  std::vector<std::pair<std::string, int>> used;
  for (int p = 0; p < nranks_; ++p) {
    const char* name = nullptr;
    if (p == rank_ || hocclCommPeerTransport(comm_, p, &name) != hocclSuccess || !name) continue;
    auto it = std::find_if(used.begin(), used.end(), [&](const auto& u) { return u.first == name; });
    if (it == used.end()) used.emplace_back(name, 1);
    else ++it->second;
  }
  std::string summary;
  for (const auto& [name, n] : used) summary += fmt::format("{}{} x{}", summary.empty() ? "" : ", ", name, n);
  std::snprintf(mine.transports, sizeof(mine.transports), "%s", summary.empty() ? "none" : summary.c_str());
  std::vector<Wire> all(nranks_);
  check(hocclAllGather(&mine, all.data(), sizeof(Wire), hocclUint8, comm_, nullptr), "hocclAllGather (rank table)");
  std::vector<RankDesc> out;
  for (int r = 0; r < nranks_; ++r) {
    all[r].host[sizeof(all[r].host) - 1] = '\0';
    all[r].transports[sizeof(all[r].transports) - 1] = '\0';
    out.push_back({r, all[r].pid, all[r].host, all[r].transports});
  }
  return out;
}

double Runner::allReduce(double v, hocclRedOp_t op) {
  double out = 0;
  check(hocclAllReduce(&v, &out, 1, hocclFloat64, op, comm_, nullptr), "hocclAllReduce (timing/results)");
  return out;
}

double Runner::now() const {
  if (o_.cpuTime) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return steadyNs() * 1e-9;
}

void Runner::setWatchdog(const Case* cs) {
  if (o_.timeoutSec <= 0) return;
  if (cs == nullptr) {
    job_.deadlines[thread_] = 0;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(job_.whatMutex);
    job_.what[thread_] = fmt::format("rank {}: size {} B, type {}, op {}, root {}", rank_, cs->bytes,
                                     typeInfo(cs->type).name, test_.hasOp ? opName(cs->op) : "none",
                                     test_.hasRoot ? cs->root : -1);
  }
  job_.deadlines[thread_] = steadyNs() + static_cast<int64_t>(o_.timeoutSec * 1e9);
}

void* Runner::toDevice(const void* host) const {
  const auto* p = static_cast<const unsigned char*>(host);
  if (!device_) return const_cast<unsigned char*>(p);
  if (p >= send_.get() && p <= send_.get() + bufBytes_) return static_cast<unsigned char*>(dsend_) + (p - send_.get());
  return static_cast<unsigned char*>(drecv_) + (p - recv_.get());
}

void Runner::upload() {
  if (!device_) return;
  check(hocclDeviceMemcpy(dsend_, send_.get(), bufBytes_), "hocclDeviceMemcpy (send buffer)");
  check(hocclDeviceMemcpy(drecv_, recv_.get(), bufBytes_), "hocclDeviceMemcpy (receive buffer)");
}

void Runner::download() {
  if (!device_) return;
  check(hocclDeviceMemcpy(send_.get(), dsend_, bufBytes_), "hocclDeviceMemcpy (send buffer)");
  check(hocclDeviceMemcpy(recv_.get(), drecv_, bufBytes_), "hocclDeviceMemcpy (receive buffer)");
}

void Runner::syncStream() {
  if (!device_) return;
  check(hocclStreamSynchronize(stream_), "hocclStreamSynchronize");
  hocclResult_t async = hocclSuccess;
  check(hocclCommGetAsyncError(comm_, &async), "hocclCommGetAsyncError");
  check(async, "a stream-ordered collective");
}

void Runner::iteration(const CallArgs& a) {
  if (o_.aggIters > 1) check(hocclGroupStart(), "hocclGroupStart");
  for (int i = 0; i < o_.aggIters; ++i) check(test_.run(a), test_.name);
  if (o_.aggIters > 1) check(hocclGroupEnd(), "hocclGroupEnd");
}

/// Puts this rank's input where the variant reads it; in-place also fills the rest of the buffer with the pattern.
void Runner::prepare(const Counts& c, size_t elt, bool inPlace) {
  unsigned char* recvBase = recv_.get() + o_.misalign * elt;
  if (inPlace) {
    std::memset(recv_.get(), kPattern, bufBytes_);
    std::memcpy(recvBase + c.sendInplaceOffset * rank_ * elt, pristine_.get(), c.send * elt);
  } else {
    std::memset(recvBase, kPattern, c.recv * elt + kGuard);
  }
}

void Runner::checkOnce(const Case& cs, const Counts& c, const DataSpec& spec, const CallArgs& a, bool inPlace,
                       long long* wrong, long long* oob) {
  const size_t elt = typeInfo(cs.type).size;
  prepare(c, elt, inPlace);
  upload();
  CallArgs d = a;  // a holds the host addresses
  d.send = toDevice(a.send);
  d.recv = toDevice(a.recv);
  check(test_.run(d), test_.name);
  syncStream();
  download();
  CheckResult res = checkOutput(a.recv, blocks_, spec);
  const char* variant = inPlace ? "in-place" : "out-of-place";
  if (res.wrong > 0) {
    fmt::print(stderr,
               "{}: rank {}: {} wrong values ({}, type {}, op {}, size {} B, count {}, root {}); first at "
               "index {}: got {}, expected {}\n",
               test_.name, rank_, res.wrong, variant, typeInfo(cs.type).name, test_.hasOp ? opName(cs.op) : "none",
               cs.bytes, c.param, test_.hasRoot ? cs.root : -1, res.firstBad, res.got, res.want);
  }
  *wrong += static_cast<long long>(res.wrong);
  if (!inPlace) {
    const unsigned char* recv = static_cast<const unsigned char*>(a.recv);
    size_t stray = blocks_.empty() ? countChanged(recv, c.recv * elt + kGuard)
                                   : countChanged(recv + c.recv * elt, kGuard);
    if (std::memcmp(a.send, pristine_.get(), c.send * elt) != 0) {
      fmt::print(stderr, "{}: rank {}: the out-of-place send buffer was modified (type {}, size {} B)\n", test_.name,
                 rank_, typeInfo(cs.type).name, cs.bytes);
      ++stray;
    }
    if (stray > 0)
      fmt::print(stderr, "{}: rank {}: {} bytes written outside the expected output (type {}, size {} B)\n", test_.name,
                 rank_, stray, typeInfo(cs.type).name, cs.bytes);
    *oob += static_cast<long long>(stray);
  }
}

Measure Runner::measure(const Case& cs, const Counts& c, const DataSpec& spec, hocclRedOp_t op, bool inPlace) {
  const size_t elt = typeInfo(cs.type).size;
  unsigned char* recvBase = recv_.get() + o_.misalign * elt;
  CallArgs a{};
  a.send = inPlace ? recvBase + c.sendInplaceOffset * rank_ * elt : send_.get() + o_.misalign * elt;
  a.recv = inPlace ? recvBase + c.recvInplaceOffset * rank_ * elt : recvBase;
  a.count = c.param;
  a.type = cs.type;
  a.op = op;
  a.root = cs.root;
  a.rank = rank_;
  a.nranks = nranks_;
  a.comm = comm_;
  a.stream = stream_;
  if (inPlace) prepare(c, elt, true);
  upload();
  CallArgs d = a;
  d.send = toDevice(a.send);
  d.recv = toDevice(a.recv);
  for (int i = 0; i < o_.warmupIters; ++i) iteration(d);
  syncStream();
  allReduce(0, hocclSum);  // line the ranks up before the clock starts
  double t0 = now();
  for (int i = 0; i < o_.iters; ++i) iteration(d);
  syncStream();  // stream-ordered calls: the time includes their completion
  double sec = (now() - t0) / (static_cast<double>(o_.iters) * o_.aggIters);
  Measure m;
  switch (o_.average) {
    case 0: sec = allReduce(rank_ == 0 ? sec : 0, hocclSum); break;
    case 2: sec = allReduce(sec, hocclMin); break;
    case 3: sec = allReduce(sec, hocclMax); break;
    default: sec = allReduce(sec, hocclSum) / nranks_; break;
  }
  m.timeUs = sec * 1e6;
  m.algBw = sec > 0 ? test_.algBytes(c.param, elt, nranks_) / 1e9 / sec : 0;
  m.busBw = m.algBw * test_.busFactor(nranks_);
  if (o_.check > 0) {
    long long wrong = 0, oob = 0;
    for (int i = 0; i < o_.check; ++i) checkOnce(cs, c, spec, a, inPlace, &wrong, &oob);
    m.wrong = static_cast<long long>(allReduce(static_cast<double>(wrong), hocclSum));
    m.checked = true;
    totalWrong_ += m.wrong;
    totalOob_ += static_cast<long long>(allReduce(static_cast<double>(oob), hocclSum));
  }
  return m;
}

Row Runner::runCase(const Case& cs) {
  const TypeInfo& ti = typeInfo(cs.type);
  Counts c = test_.counts(cs.bytes / ti.size, ti.size, nranks_);
  DataSpec spec{cs.type, cs.op, caseSeed(cs.bytes, cs.type, cs.op, cs.root), nranks_};
  fillInput(pristine_.get(), spec, rank_, 0, c.send);  // generated once per case, copied where needed
  std::memcpy(send_.get() + o_.misalign * ti.size, pristine_.get(), c.send * ti.size);
  blocks_.clear();
  test_.expected(blocks_, c.param, rank_, nranks_, cs.root);

  hocclRedOp_t op = builtinOp(cs.op);
  bool dynamicOp = test_.hasOp && cs.op == OpKind::MulSum;
  alignas(8) unsigned char scalar[8] = {};
  if (dynamicOp) {
    mulSumScalar(cs.type, scalar);
    check(hocclRedOpCreatePreMulSum(&op, scalar, cs.type, hocclScalarHostImmediate, comm_),
          "hocclRedOpCreatePreMulSum");
  }
  Row row{std::max(c.send, c.recv) * ti.size, c.param, ti.name, test_.hasOp ? opName(cs.op) : "none",
          test_.hasRoot ? cs.root : -1,       {},      {}};
  row.oop = measure(cs, c, spec, op, false);
  row.ip = measure(cs, c, spec, op, true);
  if (dynamicOp) check(hocclRedOpDestroy(op, comm_), "hocclRedOpDestroy");
  return row;
}

void Runner::sweep() {
  std::vector<int> roots;
  if (!test_.hasRoot) {
    roots = {0};
  } else if (o_.root == -1) {
    for (int r = 0; r < nranks_; ++r) roots.push_back(r);
  } else {
    roots = {o_.root};
  }
  std::vector<OpKind> ops = test_.hasOp ? o_.ops : std::vector<OpKind>{OpKind::Sum};
  for (int cycle = 0; o_.cycles == 0 || cycle < o_.cycles; ++cycle) {
    for (hocclDataType_t type : o_.types) {
      for (OpKind op : ops) {
        for (int root : roots) {
          for (size_t bytes = o_.minBytes; bytes <= o_.maxBytes;) {
            Case cs{type, op, root, bytes};
            setWatchdog(&cs);
            Row row = runCase(cs);
            if (printer_) report_->addRow(row);
            // After a zero size, a factor continues from 1 byte (nccl-tests would loop on 0 forever).
            size_t next = o_.stepFactor > 1 ? std::max<size_t>(bytes * o_.stepFactor, 1) : bytes + o_.stepBytes;
            if (next <= bytes) break;  // an overflow, or -i 0
            bytes = next;
          }
        }
      }
    }
  }
  setWatchdog(nullptr);
}

int Runner::run() {
  init();
  std::vector<RankDesc> ranks = describeRanks();
  if (printer_) {
    report_ = std::make_unique<Report>(test_.name, o_, nranks_);
    report_->printPreamble(ranks);
  }
  if (test_.hasRoot && o_.root >= nranks_) {
    if (printer_)
      fmt::print(stderr, "{}: -r {}: there are only {} ranks (0..{}); use -1 for every root\n", test_.name, o_.root,
                 nranks_, nranks_ - 1);
    hocclCommDestroy(comm_);
    return 2;
  }
  bufBytes_ = o_.maxBytes + static_cast<size_t>(o_.misalign) * 8 + kGuard + 64;
  send_ = allocBuffer(bufBytes_, o_.registration != 0);
  recv_ = allocBuffer(bufBytes_, o_.registration != 0);
  pristine_ = allocBuffer(o_.maxBytes + 64);
  if (!send_ || !recv_ || !pristine_)
    fatal(fmt::format("cannot allocate 3 buffers of {} bytes; try a smaller -e", bufBytes_));
  const char* deviceName = nullptr;
  check(hocclDeviceName(&deviceName), "hocclDeviceName");
  device_ = deviceName != nullptr;  // device buffers whenever a device (real or simulated) is present
  if (device_) {
    check(hocclStreamCreate(&stream_), "hocclStreamCreate");
    check(hocclDeviceMalloc(&dsend_, bufBytes_), "hocclDeviceMalloc (send buffer)");
    check(hocclDeviceMalloc(&drecv_, bufBytes_), "hocclDeviceMalloc (receive buffer)");
  }
  void* sendReg = nullptr;
  void* recvReg = nullptr;
  if (o_.registration != 0) {
    if (device_) fatal("-R 1/2 registers host buffers, but this run uses device buffers; use -R 0");
    check(hocclCommRegister(comm_, send_.get(), bufBytes_, &sendReg), "hocclCommRegister (send buffer)");
    check(hocclCommRegister(comm_, recv_.get(), bufBytes_, &recvReg), "hocclCommRegister (receive buffer)");
  }
  if (printer_) report_->printHeader();
  sweep();
  if (sendReg) check(hocclCommDeregister(comm_, sendReg), "hocclCommDeregister (send buffer)");
  if (recvReg) check(hocclCommDeregister(comm_, recvReg), "hocclCommDeregister (receive buffer)");
  bool ok = true;
  if (printer_) ok = report_->finish(totalOob_, totalWrong_);
  check(hocclCommDestroy(comm_), "hocclCommDestroy");
  comm_ = nullptr;
  if (device_) {
    hocclDeviceFree(dsend_);
    hocclDeviceFree(drecv_);
    hocclStreamDestroy(stream_);
  }
  return (totalWrong_ > 0 || totalOob_ > 0 || !ok) ? 1 : 0;
}

}  // namespace

int runRank(Job& job, int thread) {
  Runner runner(job, thread);
  return runner.run();
}

}  // namespace hoccl_perf
