// Failures must turn into errors, never hangs:
//  1. a rank killed (SIGKILL) in the middle of a stream of large all-reduces (ring), then of small ones (one-shot
//     path over the shared arena): every survivor gets hocclRemoteError within seconds, naming the dead rank;
//  2. a rank that stays silent: the others fail after HOCCL_TIMEOUT naming it;
//  3. after a failure the communicator reports the error from hocclCommGetAsyncError and refuses new work;
//     hocclCommAbort returns promptly;
//  4. no false alarm: a rank that exits once its part is done is not blamed by a rank still waiting for another.
//
// Usage: mp_failures --transport shm|tcp
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

using namespace hoccl::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kVictim = 1;

// Survivors loop on all-reduces of `count` floats until one fails; the victim kills itself after a few.
int killedPeer(int rank, int n, const hocclUniqueId& id, size_t count) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  std::vector<float> buf(count, 1.0f);
  if (rank == kVictim) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }).detach();
  }
  hocclResult_t rc = hocclSuccess;
  auto start = Clock::now();
  Clock::time_point failedAt;
  while (rc == hocclSuccess) {  // until the error (or the 60 s limit below)
    rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclMax, comm, nullptr);
    failedAt = Clock::now();
    if (failedAt - start > std::chrono::seconds(60)) return fail(rank, "no error 60 s after the peer was killed");
  }
  std::string msg = hocclGetLastError(nullptr);
  if (rc != hocclRemoteError)
    return fail(rank, std::string("expected hocclRemoteError, got ") + hocclGetErrorString(rc) + ": " + msg);
  // Everybody must name the dead rank, or (ranks that were waiting on a survivor) fail soon after it.
  bool named = msg.find("rank " + std::to_string(kVictim)) != std::string::npos;
  std::printf("[rank %d] got the expected error: %s\n", rank, msg.c_str());
  if (!named && msg.find("rank") == std::string::npos) return fail(rank, "the error names no peer: " + msg);
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  if (async != hocclRemoteError) return fail(rank, "CommGetAsyncError does not report the failure");
  float x = 1, y = 0;
  if (hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr) == hocclSuccess)
    return fail(rank, "a failed communicator accepted new work");
  auto abortStart = Clock::now();
  MP_CHECK(rank, hocclCommAbort(comm));
  if (Clock::now() - abortStart > std::chrono::seconds(5)) return fail(rank, "CommAbort took more than 5 s");
  return 0;
}

// The victim never calls the collective; the others must time out (HOCCL_TIMEOUT=3) naming it.
int silentPeer(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  if (rank == kVictim) {
    std::this_thread::sleep_for(std::chrono::seconds(8));
    hocclCommAbort(comm);
    return 0;
  }
  std::vector<int> buf(1000, rank);
  auto start = Clock::now();
  hocclResult_t rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclInt32, hocclSum, comm, nullptr);
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::string msg = hocclGetLastError(nullptr);
  if (rc == hocclSuccess) return fail(rank, "all-reduce succeeded without the silent rank");
  std::printf("[rank %d] after %.1f s: %s\n", rank, secs, msg.c_str());
  if (secs > 7) return fail(rank, "the timeout took too long");
  if (msg.find("rank") == std::string::npos) return fail(rank, "the error names no peer: " + msg);
  hocclCommAbort(comm);
  return 0;
}

// No false alarm: a rank that has nothing to wait for (a reduce contributor, a broadcast root) may finish and exit
// while another rank still waits for a slow third one; the waiting rank must not blame the rank that left.
int earlyLeaver(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  const int root = 1, slow = 2;
  if (rank == slow) std::this_thread::sleep_for(std::chrono::milliseconds(700));  // rank 0 is gone by then
  double mine = rank + 1, sum = 0;
  MP_CHECK(rank, hocclReduce(&mine, &sum, 1, hocclDouble, hocclSum, root, comm, nullptr));
  if (rank == root && sum != n * (n + 1) / 2.0) return fail(rank, "reduce with an early leaver gave a wrong sum");
  if (rank == 0) std::_Exit(0);  // leave at once, without destroying anything
  MP_CHECK(rank, hocclCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string transport = "shm";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--transport" && i + 1 < argc) transport = argv[++i];
  if (transport == "tcp") setenv("HOCCL_SHM_DISABLE", "1", 1);
  else unsetenv("HOCCL_SHM_DISABLE");
  int bad = 0;
  // The victim's exit code is the signal: only survivors' codes count.
  // Large all-reduces (ring over the transport), then small ones (the one-shot path over the shared arena).
  for (size_t count : {size_t{8} << 20, size_t{16}}) {
    int rc = runRanks(3, [count](int r, int n, const hocclUniqueId& id) { return killedPeer(r, n, id, count); }, 90);
    if (rc != 0 && rc != 128 + SIGKILL) bad = rc;
  }
  setenv("HOCCL_TIMEOUT", "3", 1);
  int rc2 = runRanks(3, [](int r, int n, const hocclUniqueId& id) { return silentPeer(r, n, id); }, 60);
  unsetenv("HOCCL_TIMEOUT");
  if (rc2 != 0) bad = rc2;
  if (int rc3 = runRanks(3, [](int r, int n, const hocclUniqueId& id) { return earlyLeaver(r, n, id); }, 60)) bad = rc3;
  std::printf("mp_failures over %s: %s\n", transport.c_str(), bad == 0 ? "PASS" : "FAIL");
  return bad == 0 ? 0 : 1;
}
