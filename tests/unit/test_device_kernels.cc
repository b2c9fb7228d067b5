// The simulated device's kernels (kernels/device/sim_kernels.h) against a double-precision reference, for every type
// and op, with heads and tails of every misalignment (operands equally and differently misaligned, so both the packed
// and the all-scalar split run), in place and out of place; the split itself (kernels/device/elementwise.h); and the
// simulated device's streams, events and IPC mapping; its strict mode (the host cannot touch device memory).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/elementwise.h"
#include "kernels/device/sim_device.h"
#include "kernels/device/sim_kernels.h"
#include "device_reference.h"

using namespace hoccl;
using namespace hoccl::kernels;
using hoccl::testref::refOp;
using hoccl::testref::valueAt;

namespace {}  // namespace

TEST_CASE("elementwise split covers every element once") {
  for (size_t elem : {1, 2, 4, 8})
    for (size_t n : {0, 1, 5, 16, 17, 1000})
      for (uintptr_t mis : {0, 1, 2, 4, 8, 12})
        for (uintptr_t misB : {mis, uintptr_t(0)}) {
          if (mis % elem || misB % elem) continue;
          alignas(16) static char base[1];
          const char* dst = reinterpret_cast<const char*>(uintptr_t(4096) + mis);
          const char* b = reinterpret_cast<const char*>(uintptr_t(8192) + misB);
          (void)base;
          const elementwise::Split s = elementwise::split(dst, dst, b, n, elem);
          const size_t per = elementwise::kPackBytes / elem;
          CHECK(s.head + s.packs * per <= n);
          if (mis != misB) CHECK(s.packs == 0);
          if (s.packs) CHECK((uintptr_t(dst) + s.head * elem) % 16 == 0);
        }
}

TEST_CASE("sim reduce, scale and divide match a double reference with unaligned heads and tails") {
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    const size_t e = typeSize(dt);
    for (size_t n : {0, 1, 3, 17, 1029, 70001})
      for (size_t offA : {0, 1, 3})
        for (size_t offB : {0, 1}) {
          std::vector<char> A((n + 20) * e), B((n + 20) * e), D((n + 20) * e, 0x5a);
          char* a = A.data() + 16 + offA * e;
          char* b = B.data() + 16 + offB * e;
          char* d = D.data() + 16 + offA * e;
          for (size_t i = 0; i < n; ++i) {
            fromDouble(valueAt(i, 1, dt), a + i * e, dt);
            fromDouble(valueAt(i, 2, dt), b + i * e, dt);
          }
          for (BinOp op : {BinOp::Sum, BinOp::Prod, BinOp::Max, BinOp::Min}) {
            sim::reduce(d, a, b, n, dt, op);
            size_t wrong = 0;
            for (size_t i = 0; i < n; ++i) {
              double want = refOp(valueAt(i, 1, dt), valueAt(i, 2, dt), op);
              std::vector<char> w(e);
              fromDouble(want, w.data(), dt);
              if (std::memcmp(d + i * e, w.data(), e) != 0 && wrong++ == 0) {
                INFO("type " << typeName(dt) << " n " << n << " offsets " << offA << "," << offB << " element " << i);
                CHECK(toDouble(d + i * e, dt) == toDouble(w.data(), dt));
              }
            }
            CHECK(wrong == 0);
            CHECK(static_cast<unsigned char>(D[16 + offA * e + n * e]) == 0x5a);  // the tail stops at n
            CHECK(static_cast<unsigned char>(D[15 + offA * e]) == 0x5a);          // the head starts at 0
          }
          // In place (dst == a), scale by 2, divide by 3 (compared with the CPU kernels, the same functor).
          std::vector<char> copyA(A);
          char* ca = copyA.data() + 16 + offA * e;
          sim::reduce(a, a, b, n, dt, BinOp::Sum);
          kernels::reduce(ca, ca, b, n, dt, BinOp::Sum);
          CHECK(std::memcmp(A.data(), copyA.data(), A.size()) == 0);
          std::vector<char> two(e);
          fromDouble(2.0, two.data(), dt);
          sim::scale(d, b, n, dt, two.data());
          size_t wrong = 0;
          for (size_t i = 0; i < n; ++i) {
            std::vector<char> w(e);
            fromDouble(valueAt(i, 2, dt) * 2.0, w.data(), dt);
            wrong += toDouble(d + i * e, dt) != toDouble(w.data(), dt);
          }
          INFO("scale: type " << typeName(dt) << " n " << n);
          CHECK(wrong == 0);
          sim::divide(a, n, dt, 3);
          kernels::divide(ca, n, dt, 3);
          CHECK(std::memcmp(A.data(), copyA.data(), A.size()) == 0);
          sim::copy(d, b, n * e);
          CHECK(std::memcmp(d, b, n * e) == 0);
        }
  }
}

TEST_CASE("sim device: stream order, events, flags, memory and IPC mapping") {
  auto dev = device::makeSimDevice();
  CHECK(dev->simulated());
  void* p = dev->malloc(1000);
  CHECK(dev->owns(p));
  CHECK(dev->owns(static_cast<char*>(p) + 999));
  int local = 0;
  CHECK_FALSE(dev->owns(&local));
  device::Stream s = dev->createStream();
  CHECK(dev->validStream(s));
  CHECK_FALSE(dev->validStream(reinterpret_cast<device::Stream>(uintptr_t(1))));
  // A flag wait holds later work until the flag is set; an event completes only after the work before it.
  uint32_t* flag = dev->allocFlag();
  std::atomic<int> order{0};
  dev->streamWaitFlag(s, flag, 1);
  dev->launchHostFunc(s, [&] { order = 1; });
  device::Event ev = dev->createEvent();
  dev->record(ev, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(order.load() == 0);
  CHECK_FALSE(dev->query(ev));
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  dev->synchronize(s);
  CHECK(order.load() == 1);
  CHECK(dev->query(ev));
  // Kernels on a stream; IPC: the same bytes through a second mapping.
  std::vector<float> h(250, 1.5f);
  dev->memcpy(p, h.data(), 1000);
  dev->launchReduce(s, p, p, p, 250, hocclFloat, BinOp::Sum);
  dev->synchronize(s);
  device::IpcHandle handle = dev->exportHandle(static_cast<char*>(p) + 8);
  float* mapped = static_cast<float*>(dev->importHandle(handle));
  float first = 0;
  dev->memcpy(&first, mapped, sizeof first);  // the device's copy: the host cannot read the mapping (strict mode)
  CHECK(first == 3.0f);
  // A copy into the mapping lands in the exporter's allocation (what the direct device path does with a peer's slot).
  const float seven = 7.0f;
  dev->launchCopy(s, mapped + 1, &seven, sizeof seven);
  dev->synchronize(s);
  float second = 0;
  dev->memcpy(&second, static_cast<char*>(p) + 12, sizeof second);
  CHECK(second == 7.0f);
  // Peer access: any simulated device of this host reaches another; a CUDA bus id is not one.
  CHECK(dev->peerKey() == "sim");
  CHECK(dev->canAccessPeer(dev->peerKey()));
  CHECK_FALSE(dev->canAccessPeer("0000:3b:00.0"));
  dev->closeHandle(mapped);
  dev->destroyEvent(ev);
  dev->freeFlag(flag);
  dev->destroyStream(s);
  dev->free(p);
  CHECK_FALSE(dev->owns(p));
}

namespace {

// Runs fn in a child process; returns the signal that ended it (0 when it exited normally).
template <class F>
int signalOf(F&& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);  // the library's crash report is not what this checks
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

}  // namespace

TEST_CASE("sim device, strict mode: the host cannot touch device memory; the device's copies and kernels can") {
  unsetenv("HOCCL_SIM_HOST_ACCESS");  // the default is strict
  auto dev = device::makeSimDevice();
  CHECK_FALSE(dev->hostAccessible());
  auto* p = static_cast<float*>(dev->malloc(64 * sizeof(float)));
  // A direct host read or write of device memory faults, as on a GPU.
  CHECK(signalOf([&] { std::printf("%f\n", static_cast<double>(*static_cast<volatile float*>(p))); }) == SIGSEGV);
  CHECK(signalOf([&] { p[3] = 1.0f; }) == SIGSEGV);
  // The device's own copies and kernels reach it; kernels also reach pinned host memory (mallocHost).
  std::vector<float> h(64, 2.0f), back(64, 0.0f);
  dev->memcpy(p, h.data(), 64 * sizeof(float));
  auto* pinned = static_cast<float*>(dev->mallocHost(64 * sizeof(float)));
  for (int i = 0; i < 64; ++i) pinned[i] = float(i);
  device::Stream s = dev->createStream();
  dev->launchReduce(s, p, p, pinned, 64, hocclFloat, BinOp::Sum);
  dev->synchronize(s);
  dev->memcpy(back.data(), p, 64 * sizeof(float));
  for (int i = 0; i < 64; ++i) CHECK(back[i] == 2.0f + float(i));
  // A kernel refuses pageable host memory (a GPU kernel cannot read it) and a range past an allocation's end.
  CHECK_THROWS_AS(dev->launchReduce(s, p, p, h.data(), 64, hocclFloat, BinOp::Sum), Error);
  CHECK_THROWS_AS(dev->launchReduce(s, p, p, p, 65, hocclFloat, BinOp::Sum), Error);
  // A copy takes pageable host memory (as cuMemcpyAsync does).
  dev->launchCopy(s, h.data(), p, 64 * sizeof(float));
  dev->synchronize(s);
  CHECK(h[5] == 7.0f);
  // The scale kernel's scalar must be host memory.
  CHECK_THROWS_AS(dev->launchScale(s, p, p, 64, hocclFloat, p), Error);
  dev->destroyStream(s);
  dev->freeHost(pinned);
  dev->free(p);
}

TEST_CASE("sim device, HOCCL_SIM_HOST_ACCESS=1: the host may touch device memory") {
  setenv("HOCCL_SIM_HOST_ACCESS", "1", 1);
  auto dev = device::makeSimDevice();
  unsetenv("HOCCL_SIM_HOST_ACCESS");
  CHECK(dev->hostAccessible());
  auto* p = static_cast<float*>(dev->malloc(4 * sizeof(float)));
  p[1] = 5.0f;
  float v = 0;
  dev->memcpy(&v, p + 1, sizeof v);
  CHECK(v == 5.0f);
  dev->free(p);
}
