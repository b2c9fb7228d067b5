// The simulated device's model of two CUDA calls that wait for the whole device (kernels/device/sim_device.cc, file
// comment): freeing device or pinned memory, and the first launch of a kernel under CUDA's lazy loading
// (HOCCL_SIM_LAZY_LOADING=1). While a stream waits for a host flag that is not set, they are refused with hoccl::Error
// naming the call, the stream, the flag's value and what to do, and nothing is freed or launched; the same calls
// succeed once the flag is set and the stream has run. A wait not reached yet (work queued before it) counts; a wait
// whose flag is already set does not. The default simulated device has every kernel loaded, as the CUDA device
// preloads them, and launches behind a waiting stream run once the flag is set.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/sim_device.h"
#include "error_of.h"

using namespace hoccl;
using kernels::BinOp;

namespace {

// The message of the hoccl::Error that fn throws, checked to be hocclInternalError (it breaks a communicator whose
// proxy meets it); the test fails when fn throws nothing.
template <class F>
std::string refusal(F&& fn) {
  return test::errorOf(std::forward<F>(fn), hocclInternalError);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets HOCCL_SIM_LAZY_LOADING for the simulated devices made in its lifetime.
struct LazyLoading {
  explicit LazyLoading(bool on) {
    if (on) setenv("HOCCL_SIM_LAZY_LOADING", "1", 1);
    else unsetenv("HOCCL_SIM_LAZY_LOADING");
  }
  ~LazyLoading() { unsetenv("HOCCL_SIM_LAZY_LOADING"); }
};

void setFlag(uint32_t* flag, uint32_t v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

std::vector<float> readBack(device::Device& dev, const void* p, size_t n) {
  std::vector<float> v(n);
  dev.memcpy(v.data(), p, n * sizeof(float));
  return v;
}

}  // namespace

TEST_CASE("sim device: free and freeHost while a stream waits for an unset host flag are refused, nothing freed") {
  LazyLoading lazy(false);
  auto dev = device::makeSimDevice();
  const size_t n = 1001;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = float(i % 13) - 6.0f;
  void* p = dev->malloc(n * sizeof(float));
  auto* pinned = static_cast<float*>(dev->mallocHost(n * sizeof(float)));
  dev->memcpy(p, values.data(), n * sizeof(float));
  device::Stream s = dev->createStream();
  uint32_t* flag = dev->allocFlag();
  setFlag(flag, 4);
  dev->streamWaitFlag(s, flag, 5);  // the proxy's ticket 5 while the flag holds 4
  std::atomic<bool> after{false};
  dev->launchHostFunc(s, [&] { after = true; });

  const std::string why = refusal([&] { dev->free(p); });
  INFO(why);
  for (const std::string& part : {fmt::format("simulated device: cuMemFree-like free of {}", p),
                                  fmt::format("while stream {}", s), std::string("waits for a host flag (value 5"),
                                  std::string("holds 4)"), std::string("waits for the whole device"),
                                  std::string("deadlocks"), std::string("free after the stream has run past the wait")})
    CHECK(has(why, part));
  const std::string whyHost = refusal([&] { dev->freeHost(pinned); });
  INFO(whyHost);
  CHECK(has(whyHost, fmt::format("cuMemFreeHost-like freeHost of {}", static_cast<void*>(pinned))));
  CHECK(has(whyHost, "waits for a host flag (value 5"));
  // Bad input is still named as such, not as the hazard.
  int local = 0;
  CHECK_THROWS_WITH(dev->free(&local), Catch::Contains("not the start of a device allocation"));

  // Nothing was freed: the allocation is still the device's and holds its bytes; the pinned memory is still pinned
  // (a kernel in strict mode takes it) and the host still writes it.
  CHECK(dev->owns(p));
  CHECK(readBack(*dev, p, n) == values);
  for (size_t i = 0; i < n; ++i) pinned[i] = 1.0f;
  CHECK_FALSE(after.load());

  // The flag is set and the stream has run: both calls go through.
  setFlag(flag, 5);
  dev->synchronize(s);
  CHECK(after.load());
  device::Stream s2 = dev->createStream();
  dev->launchReduce(s2, p, p, pinned, n, hocclFloat, BinOp::Sum);
  dev->synchronize(s2);
  const std::vector<float> sum = readBack(*dev, p, n);
  for (size_t i = 0; i < n; ++i) CHECK(sum[i] == values[i] + 1.0f);
  dev->freeHost(pinned);
  dev->free(p);
  CHECK_FALSE(dev->owns(p));
  dev->destroyStream(s2);
  dev->destroyStream(s);
  dev->freeFlag(flag);
}

TEST_CASE("sim device: a flag wait not reached yet counts, a met one does not, the default stream's too") {
  LazyLoading lazy(false);
  auto dev = device::makeSimDevice();
  void* p = dev->malloc(64);
  device::Stream s = dev->createStream();
  uint32_t* unset = dev->allocFlag();
  uint32_t* set = dev->allocFlag();
  setFlag(set, 1);
  std::atomic<bool> go{false};
  // The worker is held by earlier work, so neither wait has been reached; the one on a set flag is no hazard.
  dev->launchHostFunc(s, [&] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  dev->streamWaitFlag(s, set, 1);
  void* q = dev->malloc(64);
  dev->free(q);
  dev->streamWaitFlag(s, unset, 2);
  const std::string why = refusal([&] { dev->free(p); });
  CHECK(has(why, "waits for a host flag (value 2"));
  CHECK(has(why, "holds 0)"));
  go = true;
  CHECK(has(refusal([&] { dev->free(p); }), "value 2"));  // now reached: still refused
  setFlag(unset, 2);
  dev->synchronize(s);
  // The default stream (null handle) is named as such.
  setFlag(unset, 0);
  dev->streamWaitFlag(nullptr, unset, 1);
  CHECK(has(refusal([&] { dev->free(p); }), "the default stream"));
  setFlag(unset, 1);
  dev->synchronize(nullptr);
  dev->free(p);
  dev->destroyStream(s);
  dev->freeFlag(unset);
  dev->freeFlag(set);
}

TEST_CASE(
    "sim device, HOCCL_SIM_LAZY_LOADING=1: a kernel's first launch while a stream waits for a host flag is "
    "refused") {
  LazyLoading lazy(true);
  auto dev = device::makeSimDevice();
  const size_t n = 333;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = float(i % 5);
    b[i] = float(i % 3) + 0.5f;
  }
  void* x = dev->malloc(n * sizeof(float));
  void* y = dev->malloc(n * sizeof(float));
  dev->memcpy(x, a.data(), n * sizeof(float));
  dev->memcpy(y, b.data(), n * sizeof(float));
  device::Stream waiting = dev->createStream(), other = dev->createStream();
  uint32_t* flag = dev->allocFlag();
  dev->streamWaitFlag(waiting, flag, 1);

  // Every kind of kernel, on the waiting stream or another: refused, nothing launched.
  const float two = 2.0f;
  const std::string why = refusal([&] { dev->launchReduce(other, x, x, y, n, hocclFloat, BinOp::Sum); });
  INFO(why);
  for (const std::string& part :
       {std::string("simulated device: the first launch of the reduce kernel (float, sum) loads it"),
        std::string("lazy loading"), std::string("HOCCL_SIM_LAZY_LOADING=1"), fmt::format("while stream {}", waiting),
        std::string("waits for a host flag (value 1"), std::string("holds 0)"), std::string("deadlocks"),
        std::string("load every kernel before any stream waits for the host")})
    CHECK(has(why, part));
  CHECK(has(refusal([&] { dev->launchReduce(waiting, x, x, y, n, hocclFloat, BinOp::Sum); }), "reduce kernel"));
  CHECK(has(refusal([&] { dev->launchScale(other, x, y, n, hocclFloat, &two); }), "scale kernel (float)"));
  CHECK(has(refusal([&] { dev->launchDivide(other, x, n, hocclFloat, 3); }), "divide kernel (float)"));
  // Copies need no kernel; launches of nothing launch nothing.
  dev->launchCopy(other, y, y, 4);
  dev->launchReduce(other, x, x, y, 0, hocclFloat, BinOp::Sum);
  dev->synchronize(other);
  CHECK(readBack(*dev, x, n) == a);

  // The flag set and the stream drained: the first launch loads the kernel and runs.
  setFlag(flag, 1);
  dev->synchronize(waiting);
  dev->launchReduce(other, x, x, y, n, hocclFloat, BinOp::Sum);
  dev->synchronize(other);
  std::vector<float> got = readBack(*dev, x, n);
  for (size_t i = 0; i < n; ++i) CHECK(double(got[i]) == double(a[i]) + double(b[i]));

  // A loaded kernel launches while a stream waits (and runs after the flag); a kernel of another op or type was not
  // loaded by it.
  dev->streamWaitFlag(waiting, flag, 2);
  dev->launchReduce(waiting, x, x, y, n, hocclFloat, BinOp::Sum);
  CHECK(has(refusal([&] { dev->launchReduce(other, x, x, y, n, hocclFloat, BinOp::Max); }),
            "reduce kernel (float, max)"));
  CHECK(has(refusal([&] { dev->launchReduce(other, x, x, y, n / 2, hocclDouble, BinOp::Sum); }),
            "reduce kernel (double, sum)"));
  setFlag(flag, 2);
  dev->synchronize(waiting);
  got = readBack(*dev, x, n);
  for (size_t i = 0; i < n; ++i) CHECK(double(got[i]) == double(a[i]) + 2.0 * double(b[i]));
  dev->destroyStream(waiting);
  dev->destroyStream(other);
  dev->freeFlag(flag);
  dev->free(x);
  dev->free(y);
}

TEST_CASE("sim device, default: every kernel is preloaded, so launches while a stream waits for a host flag run") {
  LazyLoading lazy(false);
  auto dev = device::makeSimDevice();
  const size_t n = 517;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = float(i % 11) - 5.0f;
    b[i] = float(i % 7) * 0.25f;
  }
  void* x = dev->malloc(n * sizeof(float));
  void* y = dev->malloc(n * sizeof(float));
  dev->memcpy(x, a.data(), n * sizeof(float));
  dev->memcpy(y, b.data(), n * sizeof(float));
  device::Stream s = dev->createStream();
  uint32_t* flag = dev->allocFlag();
  dev->streamWaitFlag(s, flag, 1);
  const float three = 3.0f;
  dev->launchReduce(s, x, x, y, n, hocclFloat, BinOp::Max);  // x = max(a, b)
  dev->launchScale(s, x, x, n, hocclFloat, &three);          // x *= 3
  dev->launchDivide(s, x, n, hocclFloat, 2);                 // x /= 2
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(readBack(*dev, x, n) == a);  // held by the wait
  setFlag(flag, 1);
  dev->synchronize(s);
  const std::vector<float> got = readBack(*dev, x, n);
  for (size_t i = 0; i < n; ++i) {
    const double want = std::max(double(a[i]), double(b[i])) * 3.0 * 0.5;
    CHECK(double(got[i]) == want);
  }
  dev->destroyStream(s);
  dev->freeFlag(flag);
  dev->free(x);
  dev->free(y);
}
