// A wait that gives up because HOCCL_TIMEOUT passed is hocclTimeout at the C API (issue 13; the NCCL shim passes it
// on as ncclTimeout), with a message naming the peer it waited for; a dead peer stays hocclRemoteError. Two real
// processes, HOCCL_TIMEOUT=2:
//  1. silent: rank 1 initializes but never calls the all-reduce: rank 0 gets hocclTimeout after at least
//     HOCCL_TIMEOUT and within HOCCL_TIMEOUT + 1 s, naming rank 1; hocclCommGetAsyncError then says hocclTimeout too;
//  2. absent: rank 1 never calls hocclCommInitRank: rank 0's init gives hocclTimeout within HOCCL_TIMEOUT + 1 s,
//     naming rank 1 as missing;
//  3. dead: rank 1 exits (SIGKILL) after init and rank 0 then calls an all-reduce: hocclRemoteError well before
//     HOCCL_TIMEOUT, not hocclTimeout.
//
// Usage: mp_timeout [--transport shm|tcp]
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

using namespace hoccl::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kTimeoutSeconds = 2;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Checks a result that must be hocclTimeout, after [HOCCL_TIMEOUT, HOCCL_TIMEOUT + 1 s), naming `mentions`.
int expectTimeout(int rank, const char* what, hocclResult_t rc, double secs, const std::string& mentions) {
  const std::string msg = hocclGetLastError(nullptr);
  std::printf("[rank %d] %s: %s after %.2f s: %s\n", rank, what, hocclGetErrorString(rc), secs, msg.c_str());
  std::fflush(stdout);
  if (rc != hocclTimeout)
    return fail(rank, std::string(what) + ": expected hocclTimeout, got " + hocclGetErrorString(rc) + ": " + msg);
  if (secs < kTimeoutSeconds - 0.5 || secs >= kTimeoutSeconds + 1)  // the root counts from the id's creation
    return fail(rank, std::string(what) + ": hocclTimeout after " + std::to_string(secs) +
                          " s with HOCCL_TIMEOUT=" + std::to_string(kTimeoutSeconds));
  if (msg.find(mentions) == std::string::npos)
    return fail(rank, std::string(what) + ": the message does not name '" + mentions + "': " + msg);
  if (msg.find("HOCCL_TIMEOUT") == std::string::npos)
    return fail(rank, std::string(what) + ": the message does not mention HOCCL_TIMEOUT: " + msg);
  return 0;
}

int silent(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  if (rank == 1) {  // never calls; stays alive until rank 0 is done
    std::this_thread::sleep_for(std::chrono::seconds(kTimeoutSeconds + 2));
    hocclCommAbort(comm);
    return 0;
  }
  std::vector<float> x(4096, 1.0f);
  const auto start = Clock::now();
  hocclResult_t rc = hocclAllReduce(x.data(), x.data(), x.size(), hocclFloat, hocclSum, comm, nullptr);
  if (int bad = expectTimeout(rank, "all-reduce with a silent peer", rc, since(start), "rank 1 (host ")) return bad;
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  if (async != hocclTimeout)
    return fail(rank, std::string("CommGetAsyncError says ") + hocclGetErrorString(async) + ", not hocclTimeout");
  MP_CHECK(rank, hocclCommAbort(comm));
  return 0;
}

int absent(int rank, int n, const hocclUniqueId& id) {
  if (rank == 1) {  // never arrives
    std::this_thread::sleep_for(std::chrono::seconds(kTimeoutSeconds + 2));
    return 0;
  }
  hocclComm_t comm = nullptr;
  const auto start = Clock::now();
  hocclResult_t rc = hocclCommInitRank(&comm, n, id, rank);
  return expectTimeout(rank, "init without rank 1", rc, since(start), "rank(s) 1 never joined");
}

int dead(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  if (rank == 1) raise(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 is gone by now
  std::vector<float> x(4096, 1.0f);
  const auto start = Clock::now();
  hocclResult_t rc = hocclAllReduce(x.data(), x.data(), x.size(), hocclFloat, hocclSum, comm, nullptr);
  const double secs = since(start);
  const std::string msg = hocclGetLastError(nullptr);
  std::printf("[rank %d] all-reduce with a dead peer: %s after %.2f s: %s\n", rank, hocclGetErrorString(rc), secs,
              msg.c_str());
  if (rc != hocclRemoteError)
    return fail(rank, std::string("dead peer: expected hocclRemoteError, got ") + hocclGetErrorString(rc) + ": " + msg);
  if (secs >= kTimeoutSeconds) return fail(rank, "dead peer: the error took as long as HOCCL_TIMEOUT");
  hocclCommAbort(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string transport = "shm";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--transport" && i + 1 < argc) transport = argv[++i];
  setenv("HOCCL_TIMEOUT", std::to_string(kTimeoutSeconds).c_str(), 1);
  if (transport == "tcp") setenv("HOCCL_SHM_DISABLE", "1", 1);
  int bad = 0;
  for (auto [name, body] : {std::pair<const char*, RankBody>{"silent", silent}, {"absent", absent}, {"dead", dead}}) {
    const int rc = runRanks(2, body, 30);
    const bool ok = rc == 0 || rc == 128 + SIGKILL;
    std::printf("== %s over %s: %s\n", name, transport.c_str(), ok ? "ok" : "FAILED");
    std::fflush(stdout);
    bad += ok ? 0 : 1;
  }
  return bad == 0 ? 0 : 1;
}
