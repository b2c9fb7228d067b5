// The one-kernel all-reduce's host side (one_shot.h): set-up at init, the choice of calls, launches and their status.
#include "comm/one_shot.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/boot/bootstrap.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/call_check.h"
#include "comm/communicator.h"
#include "comm/flight_recorder.h"
#include "comm/plan.h"
#include "kernels/memory.h"
#include "kernels/types.h"
#include "transports/transport_util.h"

namespace hoccl {
namespace os = kernels::one_shot;

namespace {

// What a rank offers in the first round of the set-up.
struct Offer {
  uint32_t willing = 0;     // it wants the path and exported its area
  int32_t pid = 0;          // for messages
  device::IpcHandle area;   // its area (size and offset included)
  char deviceKey[64] = {};  // device::Device::peerKey(), NUL-terminated
};

// The words of launch `epoch`'s status slot.
uint32_t* statusOf(uint32_t* words, uint64_t epoch) {
  return words + 1 + (epoch % OneShotAllReduce::kRing) * os::kStatusWords;
}

}  // namespace

bool OneShotAllReduce::wanted() {
  const int mode = static_cast<int>(params::DEVICE_ONE_SHOT.get());
  if (mode != 2) return mode == 1;
  return params::DEVICE.get() == "sim";
}

std::atomic<uint64_t>& OneShotAllReduce::launches() {
  static std::atomic<uint64_t> n{0};
  return n;
}

uint64_t oneShotDescriptor(const Op& op) {
  return uint64_t{callTagOf(op)} << 32 | uint64_t{static_cast<uint32_t>(op.dtype)} << 8 | static_cast<uint32_t>(op.op);
}

OneShotAllReduce::OneShotAllReduce(Communicator& comm, device::Device& dev)
    : comm_(comm), dev_(dev), areas_(static_cast<size_t>(comm.nranks()), nullptr), ring_(kRing) {
  timeoutNs_ = static_cast<uint64_t>(params::TIMEOUT.get()) * 1000000000ull;
  try {
    area_ = static_cast<char*>(dev_.malloc(os::kAreaBytes));
    const std::vector<char> zeros(os::kAreaBytes, 0);
    dev_.memcpy(area_, zeros.data(), os::kAreaBytes);
    const size_t words = 1 + kRing * os::kStatusWords;
    words_ = static_cast<uint32_t*>(dev_.mallocHost(words * sizeof(uint32_t)));
    std::memset(words_, 0, words * sizeof(uint32_t));
    last_ = dev_.createEvent();
  } catch (...) {
    release();
    throw;
  }
  areas_[static_cast<size_t>(comm.rank())] = area_;
}

std::unique_ptr<OneShotAllReduce> OneShotAllReduce::setUp(Communicator& comm) {
  const int n = comm.nranks(), me = comm.rank();
  // The same answer on every rank: the shortcuts exist on every rank or on none (one host, the shm session).
  if (n < 2 || n > os::kMaxRanks || comm.shortcuts().empty()) return nullptr;
  for (const boot::RankInfo& info : comm.bootstrap().ranks())  // the same answer on every rank, with no round
    if (!info.oneKernel) {
      if (!wanted())
        HOCCL_INFO(kInit, "{}: no one-kernel all-reduce: HOCCL_DEVICE_ONE_SHOT is off here", comm.describe());
      return nullptr;
    }
  std::unique_ptr<OneShotAllReduce> path;
  std::vector<Offer> offers(static_cast<size_t>(n));
  Offer& mine = offers[static_cast<size_t>(me)];
  mine.pid = static_cast<int32_t>(getpid());
  std::string why;
  try {
    device::Device* dev = device::current();
    if (!dev) throwInvalidArgument("this process has no device");
    path.reset(new OneShotAllReduce(comm, *dev));
    mine.area = dev->exportHandle(path->area_);
    const std::string key = dev->peerKey();
    std::snprintf(mine.deviceKey, sizeof mine.deviceKey, "%s", key.c_str());
    mine.willing = 1;
  } catch (const Error& e) {
    why = e.what();
    path.reset();
  }
  comm.bootstrap().allGather(offers.data(), sizeof(Offer));
  for (int r = 0; r < n; ++r) {
    if (offers[static_cast<size_t>(r)].willing) continue;
    if (r == me) HOCCL_INFO(kInit, "{}: no one-kernel all-reduce on device buffers: {}", comm.describe(), why);
    return nullptr;  // every rank sees the same offers
  }
  // Round 2: every rank maps every peer's area (no smaller than the kernel reads) and checks that its device reaches it.
  std::vector<uint8_t> ok(static_cast<size_t>(n), 0);
  try {
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const Offer& o = offers[static_cast<size_t>(j)];
      if (o.area.offset > o.area.size || o.area.size - o.area.offset < os::kAreaBytes)
        throwInvalidUsage(
            fmt::format("rank {} offers an area of {} bytes at offset {}, less than the {} the kernel "
                        "reads",
                        j, o.area.size, o.area.offset, os::kAreaBytes));
      const std::string key(o.deviceKey, strnlen(o.deviceKey, sizeof o.deviceKey));
      if (!path->dev_.canAccessPeer(key))
        throwInvalidUsage(fmt::format("this device cannot reach rank {}'s ({})", j, key));
      path->areas_[static_cast<size_t>(j)] = static_cast<char*>(path->dev_.importHandle(o.area));
    }
    ok[static_cast<size_t>(me)] = 1;
  } catch (const Error& e) {
    HOCCL_INFO(kInit, "{}: no one-kernel all-reduce on device buffers: {}", comm.describe(), e.what());
  }
  comm.bootstrap().allGather(ok.data(), 1);
  for (uint8_t v : ok)
    if (!v) return nullptr;  // the destructor unmaps what was mapped
  comm.health().mirrorInto(path->words_);
  HOCCL_INFO(kInit,
             "{}: small all-reduces on device buffers (up to {} bytes) run as one kernel over the {} ranks' "
             "mapped areas",
             comm.describe(), os::kSlotBytes, n);
  return path;
}

OneShotAllReduce::~OneShotAllReduce() {
  if (words_) comm_.health().mirrorInto(nullptr);
  try {
    if (epoch_ > 0 && !dev_.query(last_)) {  // a launch still waits: stop it (the abort word), then let it end
      __atomic_store_n(words_, 1u, __ATOMIC_RELEASE);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!dev_.query(last_) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Peers may still read this rank's last input: wait (bounded) until each is done with it or failed.
    const uint64_t last = epoch_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (size_t j = 0; j < areas_.size() && last > 0; ++j) {
      if (!areas_[j] || areas_[j] == area_) continue;
      uint64_t done = 0, failed = 0;
      do {
        dev_.memcpy(&done, areas_[j] + os::kDoneOffset, sizeof done);
        dev_.memcpy(&failed, areas_[j] + os::kFailedOffset, sizeof failed);
        if (done >= last || failed != 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } while (std::chrono::steady_clock::now() < deadline);
    }
  } catch (const Error& e) {
    HOCCL_WARN(kColl, "{}: closing the one-kernel all-reduce: {}", comm_.describe(), e.what());
  }
  release();
}

void OneShotAllReduce::release() {
  for (size_t j = 0; j < areas_.size(); ++j) {
    if (!areas_[j] || areas_[j] == area_) continue;
    try {
      dev_.closeHandle(areas_[j]);
    } catch (const Error& e) {
      HOCCL_WARN(kColl, "{}: unmapping rank {}'s one-kernel area: {}", comm_.describe(), j, e.what());
    }
    areas_[j] = nullptr;
  }
  try {
    if (area_) dev_.free(area_);
    if (words_) dev_.freeHost(words_);
    if (last_) dev_.destroyEvent(last_);
  } catch (const Error& e) {
    HOCCL_WARN(kColl, "{}: freeing the one-kernel area: {}", comm_.describe(), e.what());
  }
  area_ = nullptr;
  words_ = nullptr;
  last_ = nullptr;
}

bool OneShotAllReduce::takes(const Op& op) const {
  if (op.kind != Op::Kind::Collective || op.coll != Coll::AllReduce || op.premul) return false;
  if (op.sendKind != kernels::MemoryKind::Device || op.recvKind != kernels::MemoryKind::Device) return false;
  if (op.op < hocclSum || op.op > hocclAvg) return false;  // PreMulSum handles take the proxy
  const size_t bytes = op.count * kernels::typeSize(op.dtype);
  if (op.count == 0 || bytes > os::kSlotBytes) return false;
  return !checkWanted(op);  // the mismatch check's exchange runs on the proxy
}

void OneShotAllReduce::orderBefore(device::Stream stream) {
  std::lock_guard<std::mutex> l(mu_);
  if (epoch_ > 0) dev_.streamWaitEvent(stream, last_);
}

void OneShotAllReduce::launch(const Op& op) {
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t e = epoch_ + 1;
  if (e > kRing && polled_ < e - kRing) {  // launch e - kRing must have ended before its status slot is reused
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(params::TIMEOUT.get());
    Backoff backoff(comm_.waitPolicy());
    while (true) {
      pollLocked();
      if (polled_ >= e - kRing || !failure_.empty()) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw Error(hocclTimeout, fmt::format("{}: {} one-kernel all-reduces are in flight and the oldest did not "
                                              "end within HOCCL_TIMEOUT",
                                              comm_.describe(), kRing));
      backoff.pause();
    }
  }
  if (!failure_.empty())
    throw Error(hocclInvalidUsage, fmt::format("{}: an earlier one-kernel all-reduce failed, so the communicator is "
                                               "unusable: {}",
                                               comm_.describe(), failure_));
  Launch& rec = ring_[e % kRing];
  rec = Launch{e, op.seq, op.traceId, oneShotDescriptor(op), op.count, op.dtype, op.op};
  uint32_t* status = statusOf(words_, e);
  for (int i = 0; i < os::kStatusWords; ++i) __atomic_store_n(&status[i], 0u, __ATOMIC_RELAXED);
  os::Args a;
  a.in = op.sendbuf;
  a.out = op.recvbuf;
  a.count = op.count;
  a.nranks = comm_.nranks();
  a.rank = comm_.rank();
  a.epoch = e;
  a.call = rec.call;
  for (size_t j = 0; j < areas_.size(); ++j) a.areas[j] = areas_[j];
  a.abort = words_;
  a.status = status;
  a.timeoutNs = timeoutNs_;
  try {
    if (epoch_ > 0) dev_.streamWaitEvent(op.stream, last_);  // after this communicator's previous launch
    dev_.launchOneShotAllReduce(op.stream, a, op.dtype, kernels::binOpOf(op.op == hocclAvg ? hocclSum : op.op));
    if (op.op == hocclAvg) dev_.launchDivide(op.stream, op.recvbuf, op.count, op.dtype, comm_.nranks());
    dev_.record(last_, op.stream);
  } catch (const Error& e) {
    // The peers' kernels would wait for this rank's input: its `failed` word stops them at once.
    try {
      dev_.memcpy(area_ + os::kFailedOffset, &a.epoch, sizeof a.epoch);
    } catch (const Error&) {
    }
    failure_ = fmt::format("{}: {} could not be launched: {}", comm_.describe(), describeOp(op), e.what());
    int expected = hocclSuccess;
    comm_.asyncError.compare_exchange_strong(expected, e.code());
    throw;
  }
  epoch_ = e;
  ++launches();
}

void OneShotAllReduce::drain() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(params::TIMEOUT.get());
  Backoff backoff(comm_.waitPolicy());
  while (true) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (epoch_ == 0 || dev_.query(last_)) break;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(hocclTimeout, fmt::format("{}: the one-kernel all-reduces queued on the callers' streams did not "
                                            "run within HOCCL_TIMEOUT (a stream waiting for something that never "
                                            "happens?)",
                                            comm_.describe()));
    backoff.pause();
  }
  poll();
}

std::string OneShotAllReduce::poll() {
  std::lock_guard<std::mutex> l(mu_);
  return pollLocked();
}

std::string OneShotAllReduce::pollLocked() {
  while (polled_ < epoch_) {
    const uint64_t e = polled_ + 1;
    const uint32_t* status = statusOf(words_, e);
    const uint32_t code = __atomic_load_n(&status[0], __ATOMIC_ACQUIRE);
    if (code == os::kRunning) break;
    const Launch& rec = ring_[e % kRing];
    if (code == os::kDone) {
      comm_.recorder().update(rec.traceId, TraceState::Done);
    } else {
      comm_.recorder().update(rec.traceId, TraceState::Failed);
      if (failure_.empty()) {
        failure_ = describeFailure(rec, status);
        const int result = code == os::kTimeout                               ? hocclTimeout
                           : code == os::kMismatch                            ? hocclInvalidUsage
                           : code == os::kAborted && comm_.health().aborted() ? hocclInvalidUsage
                                                                              : hocclRemoteError;
        int expected = hocclSuccess;
        comm_.asyncError.compare_exchange_strong(expected, result);
        HOCCL_WARN(kColl, "{}", failure_);
      }
    }
    ++polled_;
  }
  return failure_;
}

bool OneShotAllReduce::watch() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (epoch_ == 0) return false;
    if (polled_ < epoch_) pollLocked();  // finished launches leave the flight recorder's "running" soon
    if (dev_.query(last_)) return false;
    if (reported_ || !failure_.empty()) return true;
  }
  const auto& ranks = comm_.bootstrap().ranks();
  for (int j = 0; j < comm_.nranks(); ++j) {
    if (j == comm_.rank() || transport::processAlive(ranks[static_cast<size_t>(j)].pid)) continue;
    {
      std::lock_guard<std::mutex> l(mu_);
      reported_ = true;
    }
    const std::string message =
        fmt::format("{}: a one-kernel all-reduce on device buffers waits for {}, whose process is gone",
                    comm_.describe(), boot::describeRank(ranks[static_cast<size_t>(j)]));
    HOCCL_WARN(kColl, "{}", message);
    comm_.bootstrap().shareFailure(message, std::chrono::seconds(2), false);  // the verdict raises the abort word
    break;
  }
  return true;
}

std::string OneShotAllReduce::describeFailure(const Launch& l, const uint32_t* status) const {
  Op op;
  op.comm = &comm_;
  op.count = l.count;
  op.dtype = l.dtype;
  op.op = l.op;
  const std::string what = fmt::format("{}: {} [one-kernel] (collective #{} of the communicator)", comm_.describe(),
                                       describeOp(op), l.seq);
  const int peer = static_cast<int>(status[1]);
  const auto& ranks = comm_.bootstrap().ranks();
  const std::string who = peer >= 0 && peer < static_cast<int>(ranks.size())
                              ? boot::describeRank(ranks[static_cast<size_t>(peer)])
                              : fmt::format("rank {}", peer);
  switch (status[0]) {
    case os::kTimeout:
      return fmt::format(
          "{} waited {} s for {} to reach the same call (HOCCL_TIMEOUT): is it still running, and "
          "making the same calls in the same order?",
          what, timeoutNs_ / 1000000000ull, who);
    case os::kMismatch: {
      const uint64_t theirs = uint64_t{status[3]} << 32 | status[2];
      Op other = op;  // the peer's call as its descriptor and byte count say
      other.dtype = static_cast<hocclDataType_t>((theirs >> 8) & 0xff);
      other.op = static_cast<hocclRedOp_t>(theirs & 0xff);
      const bool known = other.dtype < hocclNumTypes && other.op < hocclNumOps;
      other.count = known ? status[4] / kernels::typeSize(other.dtype) : 0;
      const std::string call = known ? describeOp(other)
                                     : fmt::format("a call of {} bytes with descriptor {:#018x}", status[4], theirs);
      return fmt::format(
          "{}: {} made another call at this point: {} (call tag {:#010x}, this rank's {:#010x}; the tags "
          "differ for the same call made in another order too). Nothing was read from it. The ranks' "
          "calls differ (type, op, count, collective or order); HOCCL_CHECK_MISMATCH=2 checks every "
          "call on the proxy and names both",
          what, who, call, static_cast<uint32_t>(theirs >> 32), static_cast<uint32_t>(l.call >> 32));
    }
    case os::kPeerFailed: {
      const uint32_t theirs = status[2];
      const char* why = theirs == os::kMismatch     ? "found that the ranks' calls differ"
                        : theirs == os::kTimeout    ? "gave up waiting for another rank (HOCCL_TIMEOUT)"
                        : theirs == os::kAborted    ? "was stopped: its communicator was aborted or failed"
                        : theirs == os::kPeerFailed ? "stopped because a third rank's failed"
                                                    : "failed";
      return fmt::format(
          "{} stopped: {}'s one-kernel all-reduce of this call {} (its own error says more), so every "
          "rank stops",
          what, who, why);
    }
    default:
      if (comm_.health().aborted()) return what + " stopped: the communicator was aborted (hocclCommAbort)";
      return fmt::format("{} stopped: {}", what,
                         comm_.health().failed() ? comm_.health().failure() : std::string("aborted"));
  }
}

}  // namespace hoccl
