// The device path on the simulated device (HOCCL_DEVICE=sim), on N processes: stream ordering (work queued on the
// caller's stream before a collective is seen by it, work queued after waits for it, and the call returns before
// either has run), groups of device calls, grouped send/recv on device buffers, refusal of mixed host/device buffers
// and of an invalid stream, and a failure of a stream-ordered call reported through hocclCommGetAsyncError and the
// next call without leaving the stream waiting; ranks staging device buffers in pieces of different sizes fail
// naming HOCCL_STAGING_CHUNK; device buffers on one rank and host buffers on the others fail at once on every rank.
// Ranks of one host move device buffers directly between their devices
// (transports/cuda_ipc/; HOCCL_DEVICE_P2P=1, the default): the ordering checks run over that path, which must have
// carried bytes, and a send and a receive of different sizes fail on both ranks with hocclInvalidUsage naming both
// and the two sizes, with not a byte written into the receive buffer. With 2 ranks, last, rank 1 dies while rank 0's pieces
// of a large all-reduce wait in its slots (direct path): rank 0's call fails naming rank 1 (the shm channel carrying the
// frames watches its pid), its stream is released, and no wait outlives HOCCL_TIMEOUT. With HOCCL_CHECK_MISMATCH=0, a
// float against an int32 all-reduce of the same bytes fails on every rank (the device channels' call tags). With
// HOCCL_DEVICE_P2P=0 everything is staged and the direct path's own checks are skipped.
//
// With --dead-peer-one-kernel (2 ranks) only the dead peer runs, in a small all-reduce that rank 0 runs as one kernel.
//
// Usage: mp_device --ranks N [--dead-peer-one-kernel]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "comm/one_shot.h"
#include "harness.h"
#include "kernels/device/device.h"
#include "transports/device_channel.h"

using namespace hoccl::test;

namespace {

bool has(const char* text, const char* part) { return std::strstr(text, part) != nullptr; }

// On stream s: a pause, then the device's copy of `prepared` into `in` (count floats), then the all-reduce (sum) of
// `in` into `out` on comm, then the device's copy of `out` into `snapshot`. Fails when the all-reduce waited for the
// earlier work (it must only be queued behind it); `seen` gets the snapshot after the stream has run.
int allReduceBehindEarlierWork(hocclComm_t comm, int rank, hocclStream_t s, float* in, float* out, const float* prepared,
                               float* snapshot, size_t count, std::vector<float>* seen) {
  hoccl::device::Device* dev = hoccl::device::current();
  std::atomic<bool> written{false};
  dev->launchHostFunc(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  dev->launchCopy(s, in, prepared, count * sizeof(float));
  dev->launchHostFunc(s, [&] { written = true; });
  MP_CHECK(rank, hocclAllReduce(in, out, count, hocclFloat, hocclSum, comm, s));
  if (written.load()) return fail(rank, "hocclAllReduce on device buffers waited for the stream's earlier work");
  dev->launchCopy(s, snapshot, out, count * sizeof(float));
  MP_CHECK(rank, hocclStreamSynchronize(s));
  seen->assign(count, -1.0f);
  MP_CHECK(rank, hocclDeviceMemcpy(seen->data(), snapshot, count * sizeof(float)));
  return 0;
}

int ordering(hocclComm_t comm, int rank, int n) {
  hoccl::device::Device* dev = hoccl::device::current();
  if (!dev || !dev->simulated()) return fail(rank, "HOCCL_DEVICE=sim did not give the simulated device");
  const char* hostAccess = std::getenv("HOCCL_SIM_HOST_ACCESS");
  if (dev->hostAccessible() != (hostAccess && std::string(hostAccess) == "1"))
    return fail(rank, "the simulated device's host access does not follow HOCCL_SIM_HOST_ACCESS (default: strict)");
  const size_t count = 100003;
  float *in = nullptr, *out = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&in), count * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&out), count * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  // Earlier work on the stream: after a pause, the device copies the input into place (the host cannot write device
  // memory: the simulated device is strict by default, as a GPU).
  std::vector<float> hostIn(count);
  for (size_t i = 0; i < count; ++i) hostIn[i] = float(rank + 1) + float(i % 7);
  float *prepared = nullptr, *snapshot = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&prepared), count * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&snapshot), count * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMemcpy(prepared, hostIn.data(), count * sizeof(float)));
  std::vector<float> seen;  // what the later work (the device's copy of the result) saw
  if (int e = allReduceBehindEarlierWork(comm, rank, s, in, out, prepared, snapshot, count, &seen)) return e;
  const float base = float(n) * float(n + 1) / 2;
  for (size_t i = 0; i < count; ++i)
    if (seen[i] != base + float(n) * float(i % 7))
      return fail(rank, "stream order: element " + std::to_string(i) + " seen by the later work is " +
                            std::to_string(seen[i]) + ", expected " + std::to_string(base + float(n) * float(i % 7)));
  // A group of two device all-reduces and a broadcast, launched together.
  double *a = nullptr, *b = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&a), 777 * sizeof(double)));
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&b), 777 * sizeof(double)));
  std::vector<double> ha(777, rank + 0.5), hb(777, rank == 1 % n ? 42.0 : -1.0);
  MP_CHECK(rank, hocclDeviceMemcpy(a, ha.data(), 777 * sizeof(double)));
  MP_CHECK(rank, hocclDeviceMemcpy(b, hb.data(), 777 * sizeof(double)));
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclAllReduce(a, a, 777, hocclDouble, hocclMax, comm, s));
  MP_CHECK(rank, hocclBroadcast(b, b, 777, hocclDouble, 1 % n, comm, s));
  MP_CHECK(rank, hocclAllReduce(a, a, 5, hocclDouble, hocclSum, comm, s));
  MP_CHECK(rank, hocclGroupEnd());
  MP_CHECK(rank, hocclStreamSynchronize(s));
  MP_CHECK(rank, hocclDeviceMemcpy(ha.data(), a, 777 * sizeof(double)));
  MP_CHECK(rank, hocclDeviceMemcpy(hb.data(), b, 777 * sizeof(double)));
  if (ha[0] != n * (n - 0.5) || ha[776] != n - 0.5 || hb[500] != 42.0)
    return fail(rank, "grouped device calls: wrong results " + std::to_string(ha[0]) + " " + std::to_string(ha[776]) +
                          " " + std::to_string(hb[500]));
  // Grouped send/recv around the ring, in place on device buffers.
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<int> ring(4099, rank);
  int* d = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&d), ring.size() * sizeof(int)));
  MP_CHECK(rank, hocclDeviceMemcpy(d, ring.data(), ring.size() * sizeof(int)));
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclRecv(d, ring.size(), hocclInt32, prev, comm, s));
  MP_CHECK(rank, hocclSend(d, ring.size(), hocclInt32, next, comm, s));
  MP_CHECK(rank, hocclGroupEnd());
  MP_CHECK(rank, hocclStreamSynchronize(s));
  MP_CHECK(rank, hocclDeviceMemcpy(ring.data(), d, ring.size() * sizeof(int)));
  if (ring[0] != prev || ring[4098] != prev) return fail(rank, "device send/recv: wrong data");
  // Host calls after stream-ordered ones see their results (they run after them).
  MP_CHECK(rank, hocclAllReduce(in, out, count, hocclFloat, hocclMin, comm, s));
  double host = rank, hostSum = 0;
  MP_CHECK(rank, hocclAllReduce(&host, &hostSum, 1, hocclDouble, hocclSum, comm, nullptr));
  if (hostSum != n * (n - 1) / 2.0) return fail(rank, "host all-reduce after a device one is wrong");
  MP_CHECK(rank, hocclStreamSynchronize(s));

  // Bad input: nothing is enqueued.
  std::vector<float> hostBuf(16);
  hocclResult_t rc = hocclAllReduce(hostBuf.data(), out, 16, hocclFloat, hocclSum, comm, s);
  if (rc != hocclInvalidArgument || !has(hocclGetLastError(nullptr), "recvbuff") ||
      !has(hocclGetLastError(nullptr), "device memory"))
    return fail(rank, std::string("mixed host/device buffers were not refused naming the buffer: ") +
                          hocclGetLastError(nullptr));
  rc = hocclAllReduce(hostBuf.data(), hostBuf.data(), 16, hocclFloat, hocclSum, comm,
                      reinterpret_cast<hocclStream_t>(uintptr_t(1)));
  if (rc != hocclInvalidArgument || !has(hocclGetLastError(nullptr), "not a live stream"))
    return fail(rank, std::string("stream 0x1 was not refused: ") + hocclGetLastError(nullptr));
  int cuDev = -2;
  MP_CHECK(rank, hocclCommCuDevice(comm, &cuDev));
  if (cuDev != 0) return fail(rank, "hocclCommCuDevice gave " + std::to_string(cuDev) + " on the simulated device");

  MP_CHECK(rank, hocclDeviceFree(d));
  MP_CHECK(rank, hocclDeviceFree(a));
  MP_CHECK(rank, hocclDeviceFree(b));
  MP_CHECK(rank, hocclDeviceFree(in));
  MP_CHECK(rank, hocclDeviceFree(out));
  MP_CHECK(rank, hocclDeviceFree(prepared));
  MP_CHECK(rank, hocclDeviceFree(snapshot));
  MP_CHECK(rank, hocclStreamDestroy(s));
  return 0;
}

// Ends a case run on `sub` (split from comm) after it failed: every rank has seen the failure before any aborts (an
// abort is a verdict of its own), then sub is aborted and the case's device buffers and stream go.
int endFailedCase(hocclComm_t comm, hocclComm_t sub, int rank, std::initializer_list<void*> buffers, hocclStream_t s) {
  double one = 1, all = 0;
  MP_CHECK(rank, hocclAllReduce(&one, &all, 1, hocclDouble, hocclSum, comm, nullptr));
  hocclCommAbort(sub);
  for (void* b : buffers) MP_CHECK(rank, hocclDeviceFree(b));
  MP_CHECK(rank, hocclStreamDestroy(s));
  return 0;
}

// Rank 0 reduces 1000 elements, the others 3000: the mismatch fails on the proxy; the stream is released, the
// failure is the communicator's async error and the next call's error.
int failure(hocclComm_t comm, int rank) {
  float* buf = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&buf), 3000 * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  MP_CHECK(rank, hocclAllReduce(buf, buf, rank == 0 ? 1000 : 3000, hocclFloat, hocclSum, comm, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  if (async == hocclSuccess || async == hocclInProgress)
    return fail(rank, "a failed stream-ordered all-reduce left no async error");
  hocclResult_t rc = hocclAllReduce(buf, buf, 10, hocclFloat, hocclSum, comm, s);
  if (rc == hocclSuccess) return fail(rank, "the call after a failed stream-ordered one succeeded");
  MP_CHECK(rank, hocclDeviceFree(buf));
  MP_CHECK(rank, hocclStreamDestroy(s));
  return 0;
}

// Past the mismatch check's first calls (comm/call_check.h: the first 16 are checked on the proxy), small
// all-reduces on device buffers run as one kernel on the caller's stream (comm/one_shot.h). Warms `comm` up to there.
int warmUp(hocclComm_t comm, int rank, hocclStream_t s) {
  float* w = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&w), 64 * sizeof(float)));
  for (int i = 0; i < 16; ++i) MP_CHECK(rank, hocclAllReduce(w, w, 64, hocclFloat, hocclSum, comm, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));
  MP_CHECK(rank, hocclDeviceFree(w));
  return 0;
}

// The one-kernel all-reduce (over shm, HOCCL_DEVICE_ONE_SHOT not 0): it runs (the process's count of launches
// grows); it is stream-ordered (the call returns before the stream's earlier work has run, which it sees; later work
// sees its result); it keeps the communicator's order across streams with calls on the proxy (a group on stream A,
// the kernel on stream B, a group on A again, all on one buffer); and a rank alone in a call stops at once when its
// communicator is aborted (the abort word), its stream released. Ranks 2 and up sit the last part out.
int oneKernel(hocclComm_t comm, int rank, int n) {
  const char* mode = std::getenv("HOCCL_DEVICE_ONE_SHOT");
  if (hoccl::device::current()->hostAccessible() || (mode && std::string(mode) == "0")) return 0;
  const char* noShm = std::getenv("HOCCL_SHM_DISABLE");
  if (noShm && std::string(noShm) == "1") return 0;  // no shm session: the proxy runs every call
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &sub, nullptr));
  hocclStream_t s = nullptr, t = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  MP_CHECK(rank, hocclStreamCreate(&t));
  if (int e = warmUp(sub, rank, s)) return e;
  hoccl::device::Device* dev = hoccl::device::current();
  const size_t count = 1001;
  float *in = nullptr, *out = nullptr, *prepared = nullptr, *snapshot = nullptr;
  for (float** p : {&in, &out, &prepared, &snapshot})
    MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(p), count * sizeof(float)));
  std::vector<float> hostIn(count);
  for (size_t i = 0; i < count; ++i) hostIn[i] = float(rank + 1) * float(1 + i % 5);
  MP_CHECK(rank, hocclDeviceMemcpy(prepared, hostIn.data(), count * sizeof(float)));
  const uint64_t before = hoccl::OneShotAllReduce::launches();
  std::vector<float> seen;
  if (int e = allReduceBehindEarlierWork(sub, rank, s, in, out, prepared, snapshot, count, &seen)) return e;
  if (hoccl::OneShotAllReduce::launches() != before + 1)
    return fail(rank, "a small all-reduce on device buffers past the checked calls did not run as one kernel");
  // Alone in a group (nccl-tests and frameworks wrap single calls in groups) it runs as one kernel too.
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclAllReduce(in, snapshot, count, hocclFloat, hocclSum, sub, s));
  MP_CHECK(rank, hocclGroupEnd());
  MP_CHECK(rank, hocclStreamSynchronize(s));
  if (hoccl::OneShotAllReduce::launches() != before + 2)
    return fail(rank, "a group of one small all-reduce on device buffers did not run as one kernel");
  std::vector<float> grouped(count);
  MP_CHECK(rank, hocclDeviceMemcpy(grouped.data(), snapshot, count * sizeof(float)));
  if (grouped != seen) return fail(rank, "the grouped one-kernel all-reduce gave another result than the plain one");
  const float ranks = float(n) * float(n + 1) / 2;
  for (size_t i = 0; i < count; ++i)
    if (seen[i] != ranks * float(1 + i % 5))
      return fail(rank, "one-kernel stream order: element " + std::to_string(i) + " is " + std::to_string(seen[i]) +
                            ", expected " + std::to_string(ranks * float(1 + i % 5)));
  // Across streams, in call order: sum (proxy, stream s, behind a pause), product (one kernel, stream t), sum
  // (proxy, stream s). In this order v = n x S^n (S = 1 + ... + n); any other order gives another value. The proxy's
  // calls are groups of two (a group of one small all-reduce would run as one kernel).
  std::vector<double> v(300, rank + 1.0);
  double* dv = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&dv), v.size() * sizeof(double)));
  MP_CHECK(rank, hocclDeviceMemcpy(dv, v.data(), v.size() * sizeof(double)));
  dev->launchHostFunc(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclAllReduce(dv, dv, v.size(), hocclFloat64, hocclSum, sub, s));
  MP_CHECK(rank, hocclAllReduce(out, out, 1, hocclFloat, hocclSum, sub, s));
  MP_CHECK(rank, hocclGroupEnd());
  MP_CHECK(rank, hocclAllReduce(dv, dv, v.size(), hocclFloat64, hocclProd, sub, t));
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclAllReduce(dv, dv, v.size(), hocclFloat64, hocclSum, sub, s));
  MP_CHECK(rank, hocclAllReduce(out, out, 1, hocclFloat, hocclSum, sub, s));
  MP_CHECK(rank, hocclGroupEnd());
  MP_CHECK(rank, hocclStreamSynchronize(s));
  MP_CHECK(rank, hocclStreamSynchronize(t));
  MP_CHECK(rank, hocclDeviceMemcpy(v.data(), dv, v.size() * sizeof(double)));
  const double expect = double(n) * std::pow(double(ranks), n);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != expect)
      return fail(rank, "proxy, one-kernel and proxy calls on two streams gave " + std::to_string(v[i]) +
                            " at element " + std::to_string(i) + ", expected " + std::to_string(expect) +
                            ": they did not run in call order");
  // Rank 0 alone in a call: aborting the communicator stops its kernel's wait at once.
  if (rank == 0) {
    MP_CHECK(rank, hocclAllReduce(in, out, count, hocclFloat, hocclSum, sub, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto start = std::chrono::steady_clock::now();
    std::thread aborter([&] { hocclCommAbort(sub); });
    MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
    aborter.join();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > 5) return fail(rank, "an aborted one-kernel all-reduce held its stream " + std::to_string(waited) + " s");
  }
  double one = 1, all = 0;  // every rank is past the abort's verdict
  MP_CHECK(rank, hocclAllReduce(&one, &all, 1, hocclDouble, hocclSum, comm, nullptr));
  if (rank != 0) hocclCommAbort(sub);
  for (void* p : {static_cast<void*>(in), static_cast<void*>(out), static_cast<void*>(prepared),
                  static_cast<void*>(snapshot), static_cast<void*>(dv)})
    MP_CHECK(rank, hocclDeviceFree(p));
  MP_CHECK(rank, hocclStreamDestroy(s));
  MP_CHECK(rank, hocclStreamDestroy(t));
  return 0;
}

// True with HOCCL_DEVICE_P2P=0: device buffers are staged through host memory, never direct.
bool stagedOnly() {
  const char* p2p = std::getenv("HOCCL_DEVICE_P2P");
  return p2p && std::string(p2p) == "0";
}

// Staging with different HOCCL_STAGING_CHUNK on the ranks (set before a new communicator's first staged transfer):
// the call fails on every rank instead of mixing up messages, naming the variable (a rank that compared pieces
// itself, or the job's verdict); the stream is released and the failure is the communicator's async error.
int stagingMismatch(hocclComm_t comm, int rank) {
  if (hoccl::device::current()->hostAccessible()) return 0;  // nothing is staged
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &sub, nullptr));
  const bool stagedAll = stagedOnly();
  setenv("HOCCL_STAGING_CHUNK", rank == 0 ? "4096" : "8192", 1);
  setenv("HOCCL_DEVICE_P2P", "0", 1);  // the direct path does not need equal pieces: stage
  float* buf = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&buf), 20000 * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  MP_CHECK(rank, hocclAllReduce(buf, buf, 20000, hocclFloat, hocclSum, sub, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  unsetenv("HOCCL_STAGING_CHUNK");
  if (!stagedAll) unsetenv("HOCCL_DEVICE_P2P");  // as the test was started
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(sub, &async));
  if (async == hocclSuccess || async == hocclInProgress)
    return fail(rank, "different HOCCL_STAGING_CHUNK on the ranks left no async error");
  const std::string why = hocclGetLastError(sub);
  if (why.find("HOCCL_STAGING_CHUNK") == std::string::npos)  // this rank's own finding, or the job's verdict
    return fail(rank, "the staging mismatch is not named: " + why);
  if (hocclAllReduce(buf, buf, 10, hocclFloat, hocclSum, sub, s) == hocclSuccess)
    return fail(rank, "the call after a staging mismatch succeeded");
  return endFailedCase(comm, sub, rank, {buf}, s);
}

// Rank 0 passes device buffers (staged), the others host buffers, to the same all-reduce: every rank fails at once
// with hocclInvalidUsage naming the ranks and the kinds of their buffers, long before HOCCL_TIMEOUT (the test sets it
// to 60 s and requires the failure within 5 s); rank 0's stream is released. Three sizes: 20000 floats (the host
// ranks run a schedule), 256 (over shm they take the small one-shot shortcut, which rank 0 never joins) and 200000
// (over shm the host ranks first ask, in an arena round, whether every rank registered its buffers for single copy).
// Without the mismatch check, an arena wait reads rank 0's call board and fails at once (shm_session.h). Without the
// check, broadcast (rank 0 the root), all-gather and reduce-scatter of 1, 4000 and 200000 floats are tried too.
// The collective `coll` ("allreduce", "broadcast" from rank 0, "allgather", "reducescatter") of count floats per
// rank, from `in` to `out` (each count x nranks floats), on `stream` (null for host buffers).
hocclResult_t issueKindCall(const std::string& coll, float* in, float* out, size_t count, hocclComm_t comm,
                            hocclStream_t stream) {
  if (coll == "broadcast") return hocclBroadcast(in, out, count, hocclFloat, 0, comm, stream);
  if (coll == "allgather") return hocclAllGather(in, out, count, hocclFloat, comm, stream);
  if (coll == "reducescatter") return hocclReduceScatter(in, out, count, hocclFloat, hocclSum, comm, stream);
  return hocclAllReduce(in, out, count, hocclFloat, hocclSum, comm, stream);
}

int kindMismatch(hocclComm_t comm, int rank, size_t count, const std::string& coll = "allreduce") {
  if (hoccl::device::current()->hostAccessible()) return 0;  // nothing is staged
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &sub, nullptr));
  int n = 0;
  MP_CHECK(rank, hocclCommCount(sub, &n));
  const size_t span = count * static_cast<size_t>(n);
  std::vector<float> host(span, 1.0f), hostOut(span, 0.0f);
  float *dev = nullptr, *devOut = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&dev), span * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&devOut), span * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  const auto start = std::chrono::steady_clock::now();
  hocclResult_t rc = hocclSuccess;
  std::string why;
  if (rank == 0) {
    rc = issueKindCall(coll, dev, devOut, count, sub, s);
    if (rc != hocclSuccess)
      return fail(rank, std::string("the device ") + coll + " was not enqueued: " + hocclGetLastError(sub));
    MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
    MP_CHECK(rank, hocclCommGetAsyncError(sub, &rc));
  } else {
    rc = issueKindCall(coll, host.data(), hostOut.data(), count, sub, nullptr);
  }
  why = hocclGetLastError(sub);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const char* mode = std::getenv("HOCCL_CHECK_MISMATCH");
  if (mode && std::string(mode) == "0") {
    // No mismatch check: the staging hello and the transports' size check catch it, at once; each rank fails with its
    // own finding (rank 0 names both kinds, the host rank the size mismatch) or the job's verdict.
    if (rc == hocclSuccess || rc == hocclInProgress || seconds > 5.0)
      return fail(rank, "without the mismatch check the buffer-kind mismatch gave " + std::to_string(rc) + " after " +
                            std::to_string(seconds) + " s (HOCCL_TIMEOUT is 60 s): " + why);
    const char* noShm = std::getenv("HOCCL_SHM_DISABLE");
    const bool arena = coll == "allreduce" && (count == 256 || count == 200000);  // the host ranks wait in an arena
    if (arena && !(noShm && std::string(noShm) == "1"))  // round: the call board names both kinds
      for (const char* part : {"rank 0", "on device buffers", "on host buffers"})
        if (why.find(part) == std::string::npos)
          return fail(rank, std::string("the call board's finding does not name '") + part + "': " + why);
    std::printf("rank %d: kind mismatch, %s of %zu floats, without the check: code %d after %.2f s: %s\n", rank,
                coll.c_str(), count, rc, seconds, why.c_str());
  } else if (rc != hocclInvalidUsage)
    return fail(rank, "device buffers on rank 0 and host buffers elsewhere gave " + std::to_string(rc) +
                          " instead of hocclInvalidUsage: " + why);
  else if (seconds > 5.0)
    return fail(rank, "the buffer-kind mismatch took " + std::to_string(seconds) + " s to fail (HOCCL_TIMEOUT " +
                          "is 60 s): it must be detected at once");
  else
    for (const char* part : {"rank 0", "device buffers", "host buffers"})
      if (why.find(part) == std::string::npos ||
          (why.find("rank 1") == std::string::npos && why.find("ranks 1") == std::string::npos))
        return fail(rank, std::string("the buffer-kind mismatch does not name rank 1 and '") + part + "': " + why);
  return endFailedCase(comm, sub, rank, {dev, devOut}, s);
}

// Without the mismatch check (HOCCL_CHECK_MISMATCH=0), device buffers everywhere: rank 0 all-reduces kCount floats,
// the others kCount int32 (the same bytes, so no size check can tell). 10,000 elements (40 KB) take the one-kernel
// path over shm (comm/one_shot.h: every rank compares every peer's call descriptor), 20,000 the device channels,
// where every piece carries its call's tag (transport.h: RecvTarget::tag), directly between the devices and staged
// alike: every rank's call must fail (never success with wrong data), within 5 s, its stream released.
int typeMismatch(hocclComm_t comm, int rank, size_t kCount) {
  if (hoccl::device::current()->hostAccessible()) return 0;  // the transports move device buffers themselves
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &sub, nullptr));
  void *in = nullptr, *out = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(&in, kCount * 4));
  MP_CHECK(rank, hocclDeviceMalloc(&out, kCount * 4));
  std::vector<int32_t> ones(kCount, 1);
  MP_CHECK(rank, hocclDeviceMemcpy(in, ones.data(), kCount * 4));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  const auto start = std::chrono::steady_clock::now();
  const hocclDataType_t type = rank == 0 ? hocclFloat : hocclInt32;
  MP_CHECK(rank, hocclAllReduce(in, out, kCount, type, hocclSum, sub, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(sub, &async));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string why = hocclGetLastError(sub);
  if (async == hocclSuccess || async == hocclInProgress || seconds > 5.0)
    return fail(rank, "float against int32 all-reduce of " + std::to_string(kCount) +
                          " elements on device buffers, unchecked, gave code " + std::to_string(async) + " after " +
                          std::to_string(seconds) + " s: " + why);
  std::printf("rank %d: float vs int32, %zu elements on device buffers without the check: code %d after %.2f s: %s\n",
              rank, kCount, async, seconds, why.c_str());
  return endFailedCase(comm, sub, rank, {in, out}, s);
}

// The direct path carried the ordering checks' bytes (ranks on one host, strict simulated device).
int directPathRan(int rank) {
  if (hoccl::device::current()->hostAccessible() || stagedOnly()) return 0;  // the transports move device buffers themselves
  const auto& st = hoccl::transport::deviceChannelStats();
  if (st.p2pChannels == 0 || st.p2pBytesReceived == 0 || st.fallbackChannels != 0)
    return fail(rank,
                "the device buffers of ranks on one host did not go directly between the devices (direct "
                "channels " +
                    std::to_string(st.p2pChannels.load()) + ", bytes in " + std::to_string(st.p2pBytesReceived.load()) +
                    ", fallen back " + std::to_string(st.fallbackChannels.load()) + ")");
  return 0;
}

// Over the direct path, rank 0 sends 1000 floats to rank 1, which receives 500: rank 1 refuses the first piece with
// hocclInvalidUsage naming both ranks and both sizes before any byte lands (its whole buffer keeps its pattern), and
// rank 0 fails too (the job's verdict) instead of waiting for credits. Ranks 2 and up sit it out in a communicator of
// their own.
int directSizeMismatch(hocclComm_t comm, int rank) {
  if (hoccl::device::current()->hostAccessible() || stagedOnly()) return 0;
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, rank < 2 ? 0 : 1, rank, &sub, nullptr));
  if (rank >= 2) {
    double one = 1, all = 0;
    MP_CHECK(rank, hocclAllReduce(&one, &all, 1, hocclDouble, hocclSum, comm, nullptr));
    MP_CHECK(rank, hocclCommDestroy(sub));
    return 0;
  }
  constexpr size_t kCount = 1000;
  std::vector<float> pattern(kCount);
  for (size_t i = 0; i < kCount; ++i) pattern[i] = static_cast<float>(rank * 10000 + i) + 0.5f;
  float* buf = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMemcpy(buf, pattern.data(), kCount * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  if (rank == 0) MP_CHECK(rank, hocclSend(buf, kCount, hocclFloat, 1, sub, s));
  else MP_CHECK(rank, hocclRecv(buf, kCount / 2, hocclFloat, 0, sub, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(sub, &async));
  const std::string why = hocclGetLastError(sub);
  if (async == hocclSuccess || async == hocclInProgress)
    return fail(rank, "a send and a receive of different sizes over the direct device path left no async error");
  if (rank == 1 && (async != hocclInvalidUsage ||
                    why.find("rank 0 sends 4000 bytes where rank 1 receives 2000") == std::string::npos))
    return fail(rank, "the size mismatch is not named with both ranks and sizes (code " + std::to_string(async) +
                          "): " + why);
  std::vector<float> after(kCount);
  MP_CHECK(rank, hocclDeviceMemcpy(after.data(), buf, kCount * sizeof(float)));
  if (std::memcmp(after.data(), pattern.data(), kCount * sizeof(float)) != 0)
    return fail(rank, "the refused transfer changed the buffer");
  return endFailedCase(comm, sub, rank, {buf}, s);
}

// See the file comment. Rank 1 exits (status 0) without joining the large call; rank 0 checks its error. With
// `small` (--dead-peer-one-kernel) the call is a small one past the checked calls, which rank 0 runs as one kernel
// (comm/one_shot.h) waiting for rank 1's input: the bootstrap's verdict reaches the kernel through the abort word.
int deadPeer(hocclComm_t comm, int rank, bool small) {
  if (hoccl::device::current()->hostAccessible()) return 0;
  const size_t kCount = small ? 1000 : size_t{4} << 20;  // 16 MiB: many pieces, so rank 1 dies with pieces in flight
  float* buf = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  MP_CHECK(rank, hocclAllReduce(buf, buf, 1000, hocclFloat, hocclSum, comm, s));  // the direct path is agreed
  MP_CHECK(rank, hocclStreamSynchronize(s));
  if (small)
    if (int e = warmUp(comm, rank, s)) return e;
  const uint64_t launched = hoccl::OneShotAllReduce::launches();
  // Rank 1 never joins the large all-reduce: it exits while rank 0's pieces wait in its slots for credits. (Letting
  // rank 1 join and exit after a pause raced with the call finishing first on an idle machine.)
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0's pieces are moving by now
    _exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  MP_CHECK(rank, hocclAllReduce(buf, buf, kCount, hocclFloat, hocclSum, comm, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  const std::string why = hocclGetLastError(comm);
  if (async != hocclRemoteError || why.find("rank 1") == std::string::npos)
    return fail(rank, "a peer dead during a direct all-reduce gave code " + std::to_string(async) +
                          " and not a remote error naming rank 1: " + why);
  if (waited > 60) return fail(rank, "the dead peer was noticed only after " + std::to_string(waited) + " s");
  if (small && (hoccl::OneShotAllReduce::launches() != launched + 1 || why.find("[one-kernel]") == std::string::npos))
    return fail(rank, "the call rank 1 died in was not a one-kernel all-reduce: " + why);
  std::printf("rank 0: %s all-reduce, rank 1 dead: code %d after %.2f s: %s\n", small ? "one-kernel" : "direct",
              async, waited, why.c_str());
  hocclCommAbort(comm);
  hocclStreamDestroy(s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  bool deadInOneKernel = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ranks" && i + 1 < argc) nranks = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--dead-peer-one-kernel") deadInOneKernel = true;
  }
  setenv("HOCCL_DEVICE", "sim", 1);
  setenv("HOCCL_TIMEOUT", "60", 1);  // kindMismatch: a failure detected only by a timeout would take a minute
  int rc = runRanks(
      nranks,
      [&](int rank, int n, const hocclUniqueId& id) {
    hocclComm_t comm;
    MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
    hocclComm_t spare = nullptr;  // for the dead peer, made while comm is healthy
    if (n == 2) MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &spare, nullptr));
    if (deadInOneKernel) {  // only that
      hocclCommAbort(comm);
      return deadPeer(spare, rank, true);
    }
    if (int e = ordering(comm, rank, n)) return e;
    if (n > 1)
      if (int e = directPathRan(rank)) return e;
    if (n > 1)
      if (int e = oneKernel(comm, rank, n)) return e;
    if (n > 1)
      if (int e = directSizeMismatch(comm, rank)) return e;
    if (n > 1)
      if (int e = stagingMismatch(comm, rank)) return e;
    if (n > 1)
      for (size_t count : {size_t{20000}, size_t{256}, size_t{200000}})
        if (int e = kindMismatch(comm, rank, count)) return e;
    const char* checkMode = std::getenv("HOCCL_CHECK_MISMATCH");
    if (n > 1 && checkMode && std::string(checkMode) == "0") {  // where no check catches them
      for (const char* coll : {"broadcast", "allgather", "reducescatter"})
        for (size_t count : {size_t{1}, size_t{4000}, size_t{200000}})
          if (int e = kindMismatch(comm, rank, count, coll)) return e;
      for (size_t count : {size_t{10000}, size_t{20000}})
        if (int e = typeMismatch(comm, rank, count)) return e;
    }
    if (n > 1)
      if (int e = failure(comm, rank)) return e;
    if (n == 2) {  // last: rank 1 dies in it
      hocclCommAbort(comm);
      return deadPeer(spare, rank, false);
    }
    hocclCommAbort(comm);
    return 0;
      },
      120);
  std::printf("mp_device: %d ranks: %s\n", nranks, rc == 0 ? "PASS" : "FAIL");
  return rc;
}
