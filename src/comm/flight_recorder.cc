/*
 * The flight recorder (see flight_recorder.h). Each communicator owns one ring of TraceEntry; a process-wide
 * registry lists the live ones so that a dump writes them all. Dumps go to HOCCL_TRACE_DUMP: on a failed call
 * (src/comm/group.cc calls dumpAll) and on SIGUSR1. The signal handler only writes one byte into a pipe (write(2)
 * is async-signal-safe); a thread started with the first recorder reads the pipe and writes the dump outside the
 * signal context. The handler is installed only when HOCCL_TRACE_DUMP is set and SIGUSR1 still has its default
 * action (a program's own SIGUSR1 handler is left alone, with a warning). Files are written to a temporary name and
 * renamed, so a reader never sees half a dump.
 */
#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/params.h"
#include "kernels/cpu/reduce.h"
#include "transports/shortcut.h"

namespace hoccl {
namespace {

// The entries' times: the coarse real-time clock (a few ns to read where the fine clock costs tens of ns, which
// every small call would pay twice; its resolution, one kernel tick, goes into the dump): enough to see which call
// hung and since when, not to time a microsecond call (the perf tools do that).
int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t clockResolutionNs() {
  timespec ts{};
  clock_getres(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t fineNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Registry {
  std::mutex mutex;
  std::vector<const FlightRecorder*> live;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: dumps may run while the process exits
  return *r;
}

int gSignalPipe[2] = {-1, -1};

void onSigusr1(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(gSignalPipe[1], &byte, 1);
  errno = saved;
}

void dumperThread() {
  char buf[64];
  while (true) {
    const ssize_t n = read(gSignalPipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const std::string path = FlightRecorder::dumpAll("SIGUSR1");
    if (!path.empty()) HOCCL_INFO(kColl, "flight recorder: SIGUSR1: wrote {}", path);
  }
}

void installSignalDumper() {
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
    HOCCL_WARN(kColl,
               "flight recorder: SIGUSR1 already has a handler in this program; HOCCL_TRACE_DUMP is written "
               "on errors and timeouts only");
    return;
  }
  if (pipe2(gSignalPipe, O_CLOEXEC) != 0) {
    HOCCL_WARN(kColl, "flight recorder: no pipe for the SIGUSR1 dumper: {}", std::strerror(errno));
    return;
  }
  fcntl(gSignalPipe[1], F_SETFL, O_NONBLOCK);  // a flood of signals must never block the handler
  std::thread(dumperThread).detach();
  struct sigaction sa {};
  sa.sa_handler = onSigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

const char* kindName(TraceEntry::Kind k) {
  switch (k) {
    case TraceEntry::Kind::Collective: return "collective";
    case TraceEntry::Kind::Send: return "send";
    case TraceEntry::Kind::Recv: return "recv";
  }
  return "?";
}

nlohmann::json entryJson(const TraceEntry& e) {
  nlohmann::json j;
  j["id"] = e.id;
  j["kind"] = kindName(e.kind);
  if (e.kind == TraceEntry::Kind::Collective) {
    transport::CollCall c;
    c.coll = e.coll;
    c.count = e.count;
    c.dtype = e.dtype;
    c.op = static_cast<hocclRedOp_t>(e.op < 0 ? 0 : e.op);
    c.root = e.root;
    j["seq"] = e.seq;
    j["collective"] = collName(e.coll);
    j["call"] = transport::describeCall(c);
    if (e.op >= 0) j["op"] = e.op;
    if (e.root >= 0) j["root"] = e.root;
  } else {
    j["peer"] = e.peer;
    j["call"] = fmt::format("{}(count={}, {}, peer {})", e.kind == TraceEntry::Kind::Send ? "Send" : "Recv", e.count,
                            kernels::typeName(e.dtype), e.peer);
  }
  j["count"] = e.count;
  j["bytes"] = e.bytes;
  j["type"] = kernels::typeName(e.dtype);
  j["algorithm"] = e.algorithm ? e.algorithm : "";
  j["state"] = traceStateName(e.state);
  j["enqueued_ns"] = e.enqueuedNs;
  j["start_ns"] = e.startNs;
  j["end_ns"] = e.endNs;
  if (e.startNs && e.endNs) j["duration_us"] = static_cast<double>(e.endNs - e.startNs) / 1e3;
  return j;
}

}  // namespace

const char* traceStateName(TraceState s) {
  switch (s) {
    case TraceState::Enqueued: return "enqueued";
    case TraceState::Running: return "running";
    case TraceState::Done: return "done";
    case TraceState::Failed: return "failed";
    case TraceState::Discarded: return "discarded";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity, std::string commId, std::string name, int rank, int nranks)
    : ring_(capacity ? size_t{1} << (64 - __builtin_clzll((capacity - 1) | 1)) : 0), mask_(ring_.size() - 1),
      doneUntimed_(ring_.size()), commId_(std::move(commId)), name_(std::move(name)), rank_(rank), nranks_(nranks) {
  if (!params::TRACE_DUMP.get().empty()) {
    static std::once_flag once;
    std::call_once(once, installSignalDumper);
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().live.push_back(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& v = registry().live;
  v.erase(std::remove(v.begin(), v.end(), this), v.end());
}

uint64_t FlightRecorder::record(const TraceEntry& e, TraceState state) {
  if (ring_.empty()) return 0;
  const int64_t t = nowNs();
  std::lock_guard<SpinLock> lock(lock_);
  const uint64_t id = next_++;
  TraceEntry& slot = ring_[id & mask_];
  slot = e;  // (the slot's earlier entry, if ended by doneUntimed, is gone: its mark names another id)
  slot.id = id;
  slot.state = state;
  slot.enqueuedNs = t;
  slot.startNs = state != TraceState::Enqueued ? t : 0;
  slot.endNs = 0;
  return id;
}

void FlightRecorder::update(uint64_t id, TraceState state, const char* algorithm, int64_t seq) {
  if (ring_.empty()) return;
  const int64_t t = nowNs();
  std::lock_guard<SpinLock> lock(lock_);
  TraceEntry& e = ring_[id & mask_];
  if (e.id != id || id >= next_) return;
  settle(id & mask_);
  e.state = state;
  if (algorithm) e.algorithm = algorithm;
  if (seq >= 0) e.seq = seq;
  if (state == TraceState::Running) e.startNs = t;
  if (state == TraceState::Done || state == TraceState::Failed || state == TraceState::Discarded) {
    e.endNs = t;
    if (!e.startNs) e.startNs = t;
  }
}

void FlightRecorder::settle(uint64_t slot) const {
  TraceEntry& e = ring_[slot];
  if (e.state == TraceState::Running && doneUntimed_[slot].load(std::memory_order_acquire) == e.id + 1)
    e.state = TraceState::Done;
}

std::vector<TraceEntry> FlightRecorder::snapshot() const {
  std::lock_guard<SpinLock> lock(lock_);
  std::vector<TraceEntry> out;
  const uint64_t kept = std::min<uint64_t>(next_, ring_.size());
  out.reserve(kept);
  for (uint64_t id = next_ - kept; id < next_; ++id) {
    settle(id & mask_);
    out.push_back(ring_[id & mask_]);
  }
  return out;
}

uint64_t FlightRecorder::total() const {
  std::lock_guard<SpinLock> lock(lock_);
  return next_;
}

std::string FlightRecorder::toJson() const {
  nlohmann::json j;
  j["comm_id"] = commId_;
  j["name"] = name_;
  j["rank"] = rank_;
  j["nranks"] = nranks_;
  j["capacity"] = ring_.size();
  j["recorded"] = total();
  nlohmann::json entries = nlohmann::json::array();
  for (const TraceEntry& e : snapshot()) entries.push_back(entryJson(e));
  j["entries"] = std::move(entries);
  return j.dump();
}

std::string FlightRecorder::dumpPath(int rank) {
  const std::string pattern = params::TRACE_DUMP.get();
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      if (c == 'r') {
        out += rank >= 0 ? std::to_string(rank) : std::string("x");
        ++i;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(getpid());
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

std::string FlightRecorder::dumpAll(const std::string& reason, int rank) {
  if (params::TRACE_DUMP.get().empty()) return "";
  nlohmann::json doc;
  doc["format"] = "hoccl-trace/1";
  doc["pid"] = getpid();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  doc["host"] = host;
  doc["reason"] = reason;
  doc["time_ns"] = fineNowNs();
  doc["clock_resolution_ns"] = clockResolutionNs();
  nlohmann::json comms = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (const FlightRecorder* r : registry().live) {
      if (rank < 0) rank = r->rank_;
      comms.push_back(nlohmann::json::parse(r->toJson()));
    }
  }
  doc["communicators"] = std::move(comms);
  const std::string path = dumpPath(rank);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << doc.dump(1) << '\n';
    if (!f) {
      HOCCL_WARN(kColl, "flight recorder: cannot write {} (HOCCL_TRACE_DUMP): {}", tmp, std::strerror(errno));
      std::remove(tmp.c_str());
      return "";
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    HOCCL_WARN(kColl, "flight recorder: cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
    std::remove(tmp.c_str());
    return "";
  }
  return path;
}

}  // namespace hoccl
