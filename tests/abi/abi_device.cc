/// @file abi_device.cc
/// The shim's CUDA-facing checks, compiled against NVIDIA's nccl.h and linked only against hoccl's libnccl.so.2.
/// Mode "fake" runs with tests/abi/fake_cuda/libcuda.so.1 on LD_LIBRARY_PATH (a driver stand-in, for machines
/// without a GPU): a device buffer is refused with ncclInvalidArgument and a text, and nothing is written; a valid
/// stream is synchronised before the host operation; a bad stream is refused with the driver's reason; ncclMemAlloc
/// refuses to hand out host memory when a device exists. Mode "none" runs without any driver: a non-null stream is
/// refused, ncclMemAlloc gives page-aligned host memory and ncclMemFree checks what it frees.
#include <dlfcn.h>

#include <string>

#include "abi_util.h"

using abi::check;
using abi::expectResult;

namespace {

bool lastErrorHas(const char* needle) {
  const char* text = ncclGetLastError(nullptr);
  return check(std::strstr(text, needle) != nullptr, "last error lacks '%s': %s", needle, text);
}

void withFakeDriver(ncclComm_t comm) {
  std::vector<float> device(64, 1.0f), host(64, 2.0f), out(64, -1.0f);
  char range[64];
  std::snprintf(range, sizeof range, "%llx:%zu",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(device.data())),
                device.size() * sizeof(float));
  setenv("HOCCL_FAKE_CUDA_DEVICE_RANGE", range, 1);

  expectResult(ncclAllReduce(device.data(), out.data(), 64, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument,
               "ncclAllReduce from a device buffer");
  lastErrorHas("CUDA device memory");
  check(out[0] == -1.0f, "a refused call wrote its output");
  expectResult(ncclBroadcast(host.data(), device.data(), 64, ncclFloat32, 0, comm, nullptr), ncclInvalidArgument,
               "ncclBroadcast into a device buffer");
  lastErrorHas("recvbuff");
  void* handle = nullptr;
  expectResult(ncclCommRegister(comm, device.data(), 256, &handle), ncclInvalidArgument,
               "ncclCommRegister of a device buffer");

  // The shim has loaded the driver by now (on the first buffer check): it must be the stand-in.
  using SyncCalls = int (*)();
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto syncCalls = driver ? reinterpret_cast<SyncCalls>(dlsym(driver, "hocclFakeCudaSyncCalls")) : nullptr;
  if (!check(syncCalls != nullptr, "the fake libcuda.so.1 was not the driver the shim loaded")) return;
  const int before = syncCalls();
  auto good = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x5700));
  expectResult(ncclAllReduce(host.data(), out.data(), 64, ncclFloat32, ncclSum, comm, good), ncclSuccess,
               "ncclAllReduce with a valid stream");
  check(out[63] == 2.0f, "allreduce with a stream gave %g", out[63]);
  check(syncCalls() == before + 1, "the stream was not synchronised before the host operation");
  auto bad = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x999));
  expectResult(ncclAllReduce(host.data(), out.data(), 64, ncclFloat32, ncclSum, comm, bad), ncclInvalidArgument,
               "ncclAllReduce with an invalid stream");
  lastErrorHas("invalid resource handle");
  // A stream being captured into a CUDA graph: refused before anything is enqueued or synchronised.
  auto capturing = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x5701));
  const int syncsBefore = syncCalls();
  out.assign(64, -1.0f);
  expectResult(ncclAllReduce(host.data(), out.data(), 64, ncclFloat32, ncclSum, comm, capturing), ncclInvalidUsage,
               "ncclAllReduce on a stream being captured into a CUDA graph");
  lastErrorHas("captured into a CUDA graph");
  check(out[0] == -1.0f && syncCalls() == syncsBefore, "a refused call on a capturing stream still ran");
  expectResult(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
  expectResult(ncclSend(host.data(), 64, ncclFloat32, 0, comm, capturing), ncclInvalidUsage,
               "ncclSend on a capturing stream inside a group");
  expectResult(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd after a refused call");

  void* mem = nullptr;
  expectResult(ncclMemAlloc(&mem, 4096), ncclInvalidUsage, "ncclMemAlloc with a CUDA device present");
  lastErrorHas("device memory");
}

void withoutDriver(ncclComm_t comm) {
  if (void* d = dlopen("libcuda.so.1", RTLD_NOW)) {
    dlclose(d);
    std::printf("a CUDA driver is installed: the no-driver checks do not apply here\n");
    return;
  }
  std::vector<float> host(64, 2.0f), out(64, -1.0f);
  auto stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x5700));
  expectResult(ncclAllReduce(host.data(), out.data(), 64, ncclFloat32, ncclSum, comm, stream), ncclInvalidArgument,
               "ncclAllReduce with a stream and no driver");
  lastErrorHas("null stream");
  check(out[0] == -1.0f, "a refused call wrote its output");

  void* mem = nullptr;
  if (expectResult(ncclMemAlloc(&mem, 10000), ncclSuccess, "ncclMemAlloc")) {
    check(reinterpret_cast<uintptr_t>(mem) % 4096 == 0, "ncclMemAlloc gave %p, not page-aligned", mem);
    std::memset(mem, 0x5a, 10000);
    float a = 1.5f;
    float* b = static_cast<float*>(mem);
    expectResult(ncclAllReduce(&a, b, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess, "allreduce into MemAlloc");
    check(*b == 1.5f, "allreduce into ncclMemAlloc memory gave %g", *b);
    expectResult(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
    expectResult(ncclMemFree(mem), ncclInvalidArgument, "second ncclMemFree");
  }
  expectResult(ncclMemFree(host.data()), ncclInvalidArgument, "ncclMemFree of memory not from ncclMemAlloc");
  expectResult(ncclMemAlloc(nullptr, 16), ncclInvalidArgument, "ncclMemAlloc(NULL)");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "fake" && mode != "none") {
    std::fprintf(stderr, "usage: %s fake|none\n", argv[0]);
    return 2;
  }
  const int bad = abi::runRanks(1, 60, [&](int, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    if (!expectResult(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess, "ncclCommInitRank")) return;
    if (mode == "fake") withFakeDriver(comm);
    else withoutDriver(comm);
    expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
  });
  std::printf("%d passed, %d failed\n", 1 - bad, bad);
  return bad == 0 ? 0 : 1;
}
