// CUDA's lazy kernel loading on the simulated device (HOCCL_SIM_LAZY_LOADING=1, kernels/device/sim_device.cc), on N
// processes: the failure a real GPU showed, reproduced in CI. hoccl's proxy launches the reduce kernel while the
// caller's stream waits for the proxy's flag; on a GPU that first launch loads the kernel, which waits for the whole
// device, so the collective deadlocked (hence the CUDA device preloads its kernels). Here:
//   1. the first stream-ordered all-reduce on device buffers fails on every rank, within seconds (HOCCL_TIMEOUT is
//      60 s), with an error that names lazy loading, the kernel and the waiting stream (the rank's own finding or the
//      job's verdict carrying it); the stream is released, the communicator reports the async error;
//   2. on a new communicator, after a launch of the same kernel by the caller with no stream waiting (which loads
//      it, as the CUDA device's preload does), the same all-reduce passes with the right sums.
// Without the sim's check, step 1 would pass silently (the sim has no lazy loading of its own), so this test fails if
// the check stops biting; if hoccl ever launches kernels only where no stream waits for it, step 1 must change.
//
// Usage: mp_device_lazy --ranks N
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/device/device.h"

using namespace hoccl::test;

namespace {

constexpr size_t kCount = 50001;

int allReduce(hocclComm_t comm, int rank, int n, bool expectFailure) {
  std::vector<float> host(kCount);
  for (size_t i = 0; i < kCount; ++i) host[i] = float(rank + 1) + float(i % 5);
  float* buf = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float)));
  MP_CHECK(rank, hocclDeviceMemcpy(buf, host.data(), kCount * sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  const auto start = std::chrono::steady_clock::now();
  MP_CHECK(rank, hocclAllReduce(buf, buf, kCount, hocclFloat, hocclSum, comm, s));
  MP_CHECK(rank, hocclStreamSynchronize(s));  // released, not hung
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  const std::string why = hocclGetLastError(comm);
  if (expectFailure) {
    if (async == hocclSuccess || async == hocclInProgress)
      return fail(rank, "with HOCCL_SIM_LAZY_LOADING=1 the proxy's first reduce launch was not refused");
    for (const char* part : {"lazy loading", "reduce kernel (float, sum)", "waits for a host flag"})
      if (why.find(part) == std::string::npos)
        return fail(rank, std::string("the lazy-loading failure does not say '") + part + "': " + why);
    if (seconds > 20)
      return fail(rank, "the lazy-loading failure took " + std::to_string(seconds) + " s (HOCCL_TIMEOUT is 60 s)");
    std::printf("rank %d: refused after %.2f s as expected: %s\n", rank, seconds, why.c_str());
  } else {
    if (async != hocclSuccess) return fail(rank, "the all-reduce after loading the kernel failed: " + why);
    MP_CHECK(rank, hocclDeviceMemcpy(host.data(), buf, kCount * sizeof(float)));
    for (size_t i = 0; i < kCount; ++i) {
      const double want = double(n) * double(n + 1) / 2 + double(n) * double(i % 5);
      if (double(host[i]) != want)
        return fail(rank, "element " + std::to_string(i) + " is " + std::to_string(host[i]) + ", expected " +
                              std::to_string(want));
    }
  }
  MP_CHECK(rank, hocclStreamDestroy(s));
  MP_CHECK(rank, hocclDeviceFree(buf));
  return 0;
}

// Loads the reduce kernel (float, sum) the way the CUDA device's preload does: a launch while no stream waits.
int loadReduceKernel(int rank) {
  hoccl::device::Device* dev = hoccl::device::current();
  float* x = nullptr;
  MP_CHECK(rank, hocclDeviceMalloc(reinterpret_cast<void**>(&x), sizeof(float)));
  hocclStream_t s = nullptr;
  MP_CHECK(rank, hocclStreamCreate(&s));
  dev->launchReduce(s, x, x, x, 1, hocclFloat, hoccl::kernels::BinOp::Sum);
  MP_CHECK(rank, hocclStreamSynchronize(s));
  MP_CHECK(rank, hocclStreamDestroy(s));
  MP_CHECK(rank, hocclDeviceFree(x));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--ranks" && i + 1 < argc) nranks = std::atoi(argv[++i]);
  setenv("HOCCL_DEVICE", "sim", 1);
  setenv("HOCCL_SIM_LAZY_LOADING", "1", 1);
  setenv("HOCCL_TIMEOUT", "60", 1);
  int rc = runRanks(
      nranks,
      [&](int rank, int n, const hocclUniqueId& id) {
    hoccl::device::Device* dev = hoccl::device::current();
    if (!dev || !dev->simulated()) return fail(rank, "HOCCL_DEVICE=sim did not give the simulated device");
    hocclComm_t comm = nullptr, again = nullptr;
    MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
    MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &again, nullptr));  // for step 2, made while comm is healthy
    if (int e = allReduce(comm, rank, n, true)) return e;
    double one = 1, all = 0;  // every rank has seen the failure before any aborts (an abort is a verdict of its own)
    MP_CHECK(rank, hocclAllReduce(&one, &all, 1, hocclDouble, hocclSum, again, nullptr));
    hocclCommAbort(comm);
    if (int e = loadReduceKernel(rank)) return e;
    if (int e = allReduce(again, rank, n, false)) return e;
    MP_CHECK(rank, hocclCommDestroy(again));
    return 0;
      },
      120);
  std::printf("mp_device_lazy: %d ranks: %s\n", nranks, rc == 0 ? "PASS" : "FAIL");
  return rc;
}
