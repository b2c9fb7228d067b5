/// @file abi_device_sim.cc
/// The shim on device buffers of the simulated device (HOCCL_DEVICE=sim, strict: the host cannot touch device memory,
/// so every transfer is staged), through NVIDIA's nccl.h: ncclMemAlloc hands out device memory and ncclMemFree
/// checks what it frees; every collective and send/recv on ncclMemAlloc buffers is stream-ordered on the caller's
/// stream (work queued before it is seen by it, the call returns before that work has run), in and out of place,
/// odd and zero counts, five types and the reduction ops, against a double-precision reference computed from every
/// rank's (regenerated) random input; host buffers with a stream are ordered after the stream's earlier work;
/// registration of device memory; an invalid stream is refused.
///
/// White box: nccl.h has no calls to make streams or copy to and from device memory (programs use the CUDA runtime
/// for that), so this test is built from the shim's own objects and drives the simulated device through hoccl's
/// device interface (kernels/device/device.h), the same device instance the shim's calls use.
///
/// Usage: abi_device_sim NRANKS
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "abi_util.h"
#include "kernels/device/device.h"

using abi::check;
using abi::expectResult;
using hoccl::device::Device;

namespace {

bool lastErrorHas(const char* needle) {
  const char* text = ncclGetLastError(nullptr);
  return check(std::strstr(text, needle) != nullptr, "last error lacks '%s': %s", needle, text);
}

enum class Kind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv };
const char* kindName(Kind k) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                "AlltoAll",  "Gather",    "Scatter", "SendRecv"};
  return names[static_cast<int>(k)];
}

// Element i of rank r's input for call `salt`: a random small integer (exact in every type used here, so sums,
// products, minima and maxima are exact; the average is compared with a tolerance).
double input(int r, int salt, size_t i, ncclDataType_t t, ncclRedOp_t op) {
  std::mt19937_64 g(static_cast<uint64_t>(r) * 1000003u + static_cast<uint64_t>(salt) * 7919u + i);
  const int span = op == ncclProd ? 2 : 8;
  const int lo = abi::isUnsigned(t) ? 0 : -span;
  return static_cast<double>(lo + static_cast<int>(g() % static_cast<uint64_t>(span - lo + 1)));
}

double reduce(double a, double b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;  // sum, and avg before the division
  }
}

double reduced(int n, int salt, size_t i, ncclDataType_t t, ncclRedOp_t op) {
  double v = input(0, salt, i, t, op);
  for (int r = 1; r < n; ++r) v = reduce(v, input(r, salt, i, t, op), op);
  if (op == ncclAvg) v /= n;
  return v;
}

struct Sizes {
  size_t in, out;  // elements
};
Sizes sizesOf(Kind k, size_t count, int n) {
  const size_t nc = count * static_cast<size_t>(n);
  switch (k) {
    case Kind::AllGather:
    case Kind::Gather: return {count, nc};
    case Kind::ReduceScatter: return {nc, count};
    case Kind::AlltoAll: return {nc, nc};
    case Kind::Scatter: return {nc, count};
    default: return {count, count};
  }
}

// The expected element i of rank `rank`'s output (NaN: not checked, e.g. a non-root's output of a rooted call).
double expected(Kind k, int rank, int n, int root, int salt, size_t count, size_t i, ncclDataType_t t, ncclRedOp_t op) {
  const double none = std::nan("");
  switch (k) {
    case Kind::AllReduce: return reduced(n, salt, i, t, op);
    case Kind::Broadcast: return input(root, salt, i, t, op);
    case Kind::Reduce: return rank == root ? reduced(n, salt, i, t, op) : none;
    case Kind::AllGather: return input(static_cast<int>(i / count), salt, i % count, t, op);
    case Kind::ReduceScatter: return reduced(n, salt, static_cast<size_t>(rank) * count + i, t, op);
    case Kind::AlltoAll:
      return input(static_cast<int>(i / count), salt, static_cast<size_t>(rank) * count + i % count, t, op);
    case Kind::Gather: return rank == root ? input(static_cast<int>(i / count), salt, i % count, t, op) : none;
    case Kind::Scatter: return input(root, salt, static_cast<size_t>(rank) * count + i, t, op);
    case Kind::SendRecv: return input((rank + n - 1) % n, salt, i, t, op);
  }
  return none;
}

ncclResult_t issue(Kind k, const void* in, void* out, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                   int rank, int n, ncclComm_t comm, cudaStream_t s) {
  switch (k) {
    case Kind::AllReduce: return ncclAllReduce(in, out, count, t, op, comm, s);
    case Kind::Broadcast: return ncclBroadcast(in, out, count, t, root, comm, s);
    case Kind::Reduce: return ncclReduce(in, out, count, t, op, root, comm, s);
    case Kind::AllGather: return ncclAllGather(in, out, count, t, comm, s);
    case Kind::ReduceScatter: return ncclReduceScatter(in, out, count, t, op, comm, s);
    case Kind::AlltoAll: return ncclAlltoAll(in, out, count, t, comm, s);
    case Kind::Gather: return ncclGather(in, out, count, t, root, comm, s);
    case Kind::Scatter: return ncclScatter(in, out, count, t, root, comm, s);
    case Kind::SendRecv: {
      ncclResult_t r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(in, count, t, (rank + 1) % n, comm, s);
      if (r == ncclSuccess) r = ncclRecv(out, count, t, (rank + n - 1) % n, comm, s);
      const ncclResult_t e = ncclGroupEnd();
      return r == ncclSuccess ? e : r;
    }
  }
  return ncclInternalError;
}

// One call on ncclMemAlloc buffers, stream-ordered on s: the input reaches `in` by a device copy queued on s (behind
// a pause when `pause`), so a call that did not wait for the stream's earlier work would read a poisoned input; with
// the pause the call must also return before that copy has run. The output is read after the stream is synchronised.
void runOne(Device& dev, ncclComm_t comm, cudaStream_t s, int rank, int n, Kind k, size_t count, ncclDataType_t t,
            ncclRedOp_t op, bool inPlace, int salt, bool pause = false) {
  const size_t es = abi::typeSize(t);
  const Sizes sz = sizesOf(k, count, n);
  const int root = salt % n;
  char what[160];
  std::snprintf(what, sizeof what, "%s %s op %d count %zu%s", kindName(k), abi::typeName(t), static_cast<int>(op),
                count, inPlace ? " in place" : "");
  // In place as NCCL defines it: the rank's part of the larger buffer (all-gather: its block of the output;
  // reduce-scatter: its block of the input is the output).
  const size_t bufElems = std::max(sz.in, sz.out);
  void *in = nullptr, *out = nullptr, *staging = nullptr;
  if (!expectResult(ncclMemAlloc(&in, bufElems * es + 1), ncclSuccess, "ncclMemAlloc")) return;
  if (!inPlace && !expectResult(ncclMemAlloc(&out, bufElems * es + 1), ncclSuccess, "ncclMemAlloc")) return;
  check(dev.owns(in), "%s: ncclMemAlloc gave %p, not memory of %s", what, in, dev.name().c_str());
  staging = dev.malloc(bufElems * es + 1);
  size_t inOffset = 0, outOffset = 0;  // elements
  if (inPlace) {
    out = in;
    if (k == Kind::AllGather) inOffset = static_cast<size_t>(rank) * count;
    if (k == Kind::ReduceScatter) outOffset = static_cast<size_t>(rank) * count;
    if (k == Kind::Gather) inOffset = static_cast<size_t>(rank) * count;
    if (k == Kind::Scatter) outOffset = static_cast<size_t>(rank) * count;
  }
  std::vector<char> host(bufElems * es), poison(bufElems * es, 0x7f);
  for (size_t i = 0; i < sz.in; ++i) abi::setElem(host.data(), t, i + inOffset, input(rank, salt, i, t, op));
  dev.memcpy(in, poison.data(), poison.size());
  if (!inPlace) dev.memcpy(out, poison.data(), poison.size());
  dev.memcpy(staging, host.data(), host.size());
  std::atomic<bool> earlierRan{false};
  if (pause) dev.launchHostFunc(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  dev.launchCopy(s, static_cast<char*>(in) + inOffset * es, static_cast<char*>(staging) + inOffset * es, sz.in * es);
  dev.launchHostFunc(s, [&] { earlierRan = true; });
  const void* sendPtr = static_cast<char*>(in) + inOffset * es;
  void* recvPtr = static_cast<char*>(out) + outOffset * es;
  if (expectResult(issue(k, sendPtr, recvPtr, count, t, op, root, rank, n, comm, s), ncclSuccess, what)) {
    check(!pause || count == 0 || !earlierRan.load(), "%s: the call waited for the stream's earlier work", what);
    dev.synchronize(s);
    check(earlierRan.load(), "%s: the stream's earlier work has not run after synchronisation", what);
    std::vector<char> got(sz.out * es);
    dev.memcpy(got.data(), recvPtr, got.size());
    size_t bad = 0, firstBad = 0;
    double gotBad = 0, wantBad = 0;
    for (size_t i = 0; i < sz.out; ++i) {
      const double want = expected(k, rank, n, root, salt, count, i, t, op);
      if (std::isnan(want)) continue;
      const double g = abi::getElem(got.data(), t, i);
      const double tol = op == ncclAvg ? 0.02 * (1 + std::fabs(want)) : 0;
      if (std::fabs(g - want) > tol && !(abi::isUnsigned(t) || t == ncclInt32 ? g == std::trunc(want) : false)) {
        if (bad++ == 0) firstBad = i, gotBad = g, wantBad = want;
      }
    }
    check(bad == 0, "%s: %zu wrong elements, first %zu: %g, expected %g", what, bad, firstBad, gotBad, wantBad);
  }
  dev.synchronize(s);  // the queued work refers to earlierRan
  dev.free(staging);
  expectResult(ncclMemFree(in), ncclSuccess, "ncclMemFree");
  if (!inPlace) expectResult(ncclMemFree(out), ncclSuccess, "ncclMemFree");
}

void rankBody(int rank, int n, const ncclUniqueId& id) {
  Device* dev = hoccl::device::current();
  if (!check(dev && dev->simulated() && !dev->hostAccessible(),
             "HOCCL_DEVICE=sim did not give the strict simulated device"))
    return;
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, n, id, rank), ncclSuccess, "ncclCommInitRank")) return;
  int cuDev = -2;
  expectResult(ncclCommCuDevice(comm, &cuDev), ncclSuccess, "ncclCommCuDevice");
  check(cuDev == 0, "ncclCommCuDevice gave %d on the simulated device", cuDev);

  // ncclMemAlloc / ncclMemFree on the device.
  void* mem = nullptr;
  if (expectResult(ncclMemAlloc(&mem, 10000), ncclSuccess, "ncclMemAlloc")) {
    check(dev->owns(mem), "ncclMemAlloc gave %p, not device memory", mem);
    void* handle = nullptr;
    if (expectResult(ncclCommRegister(comm, mem, 10000, &handle), ncclSuccess, "ncclCommRegister of device memory"))
      expectResult(ncclCommDeregister(comm, handle), ncclSuccess, "ncclCommDeregister of device memory");
    expectResult(ncclMemFree(static_cast<char*>(mem) + 256), ncclInvalidArgument, "ncclMemFree inside a block");
    expectResult(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
    expectResult(ncclMemFree(mem), ncclInvalidArgument, "second ncclMemFree");
  }
  void* other = dev->malloc(64);
  expectResult(ncclMemFree(other), ncclInvalidArgument, "ncclMemFree of device memory not from ncclMemAlloc");
  lastErrorHas("did not hand out");
  dev->free(other);

  auto s = static_cast<cudaStream_t>(dev->createStream());
  // What PyTorch's NCCL backend issues for empty tensors (data pointer NULL): a grouped send/recv of 0 elements on
  // the stream; then the first real collective on device buffers must still run.
  {
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(nullptr, 0, ncclFloat32, (rank + 1) % n, comm, s);
    if (r == ncclSuccess) r = ncclRecv(nullptr, 0, ncclFloat32, (rank + n - 1) % n, comm, s);
    const ncclResult_t e = ncclGroupEnd();
    expectResult(r == ncclSuccess ? e : r, ncclSuccess, "grouped send/recv of 0 elements, NULL buffers");
    // all_to_all_single of empty tensors: a send and a receive of 0 elements with every rank, itself included.
    r = ncclGroupStart();
    for (int p = 0; p < n && r == ncclSuccess; ++p) {
      r = ncclSend(nullptr, 0, ncclFloat32, p, comm, s);
      if (r == ncclSuccess) r = ncclRecv(nullptr, 0, ncclFloat32, p, comm, s);
    }
    const ncclResult_t e2 = ncclGroupEnd();
    expectResult(r == ncclSuccess ? e2 : r, ncclSuccess, "all-to-all of 0 elements through send/recv, self included");
  }
  int salt = 1;
  runOne(*dev, comm, s, rank, n, Kind::AllReduce, 1, ncclFloat32, ncclSum, false, salt++);
  const Kind kinds[] = {Kind::AllReduce, Kind::Broadcast, Kind::Reduce,  Kind::AllGather, Kind::ReduceScatter,
                        Kind::AlltoAll,  Kind::Gather,    Kind::Scatter, Kind::SendRecv};
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclInt32, ncclFloat16, ncclUint8};
  for (Kind k : kinds) {
    runOne(*dev, comm, s, rank, n, k, 30011, ncclFloat32, ncclSum, false, salt++, true);  // earlier work paused
    for (ncclDataType_t t : types)
      for (size_t count : {size_t{1}, size_t{4099}})
        runOne(*dev, comm, s, rank, n, k, count, t, ncclSum, false, salt++);
    // A larger message: 9 staging pieces (meson sets HOCCL_STAGING_CHUNK=65536).
    runOne(*dev, comm, s, rank, n, k, 70001, ncclFloat64, ncclSum, false, salt++);
  }
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg})
    for (ncclDataType_t t : {ncclFloat32, ncclInt32, ncclFloat64}) {
      runOne(*dev, comm, s, rank, n, Kind::AllReduce, 3001, t, op, false, salt++);
      runOne(*dev, comm, s, rank, n, Kind::ReduceScatter, 513, t, op, false, salt++);
    }
  for (Kind k : {Kind::AllReduce, Kind::Broadcast, Kind::Reduce, Kind::AllGather, Kind::ReduceScatter})
    runOne(*dev, comm, s, rank, n, k, 12345, ncclFloat32, ncclMax, true, salt++);
  runOne(*dev, comm, s, rank, n, Kind::AllReduce, 0, ncclFloat32, ncclSum, false, salt++);  // zero count

  // Host buffers with the device's stream: the call runs after the stream's earlier work, at once.
  std::atomic<bool> ran{false};
  dev->launchHostFunc(s, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ran = true;
  });
  double one = 1, all = 0;
  expectResult(ncclAllReduce(&one, &all, 1, ncclFloat64, ncclSum, comm, s), ncclSuccess, "host all-reduce on a stream");
  check(ran.load(), "a host-buffer call did not wait for its stream's earlier work");
  check(all == n, "host all-reduce gave %g, expected %d", all, n);

  // Bad input: an invalid stream with device buffers; a device and a host buffer in one call. Nothing is enqueued.
  void* d = nullptr;
  if (expectResult(ncclMemAlloc(&d, 64), ncclSuccess, "ncclMemAlloc")) {
    auto bad = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x1));
    expectResult(ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, comm, bad), ncclInvalidArgument,
                 "device all-reduce on stream 0x1");
    lastErrorHas("not a live stream");
    float h[16] = {};
    expectResult(ncclAllReduce(h, d, 16, ncclFloat32, ncclSum, comm, s), ncclInvalidArgument,
                 "all-reduce from host into device memory");
    lastErrorHas("device memory");
    expectResult(ncclMemFree(d), ncclSuccess, "ncclMemFree");
  }
  dev->synchronize(s);
  dev->destroyStream(s);
  expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 2;
  if (nranks < 1) {
    std::fprintf(stderr, "usage: %s NRANKS\n", argv[0]);
    return 2;
  }
  setenv("HOCCL_DEVICE", "sim", 1);
  const int bad = abi::runRanks(nranks, 540, [&](int rank, const ncclUniqueId& id) { rankBody(rank, nranks, id); });
  std::printf("abi_device_sim: %d ranks: %d failed\n", nranks, bad);
  return bad == 0 ? 0 : 1;
}
