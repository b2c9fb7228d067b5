// HO-Ring's host level on mapped registered memory (issue 16), on an emulated cluster: N ranks on this machine,
// HOCCL_HOSTID putting P consecutive ranks on each of H fake hosts (shm between the ranks of a host, tcp between
// hosts), HO-Ring forced (HOCCL_ALGO=ho_ring) and the host level taken from 1 byte (HOCCL_CMA_MIN_BYTES=1).
// Every all-reduce of the matrix (every type; sum, prod, max, min, avg, premulsum; odd counts; in place and out of
// place) runs on hocclMemAlloc buffers registered with the communicator, and is checked element by element against a
// double-precision reference. After each call the communicator's host-level counter says whether the host level ran
// through the mappings: it must have on every host whose ranks all registered, and must not have on a host where
// one rank (--unregistered R: rank R uses ordinary memory) did not, which falls back to HO-Ring's ring steps.
//
// --coll reducescatter / allgather run the same matrix for those collectives (all-gather once per type: it has no
// op), each checked against the reference: reduce-scatter's block of this rank reduced over every rank's input,
// all-gather's every rank's input in rank order; in place means recvbuff = sendbuff + rank * count (reduce-scatter)
// and sendbuff = recvbuff + rank * count (all-gather).
//
// Usage: mp_host_level --hosts H --per-host P [--unregistered R] [--coll allreduce|reducescatter|allgather]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data.h"
#include "harness.h"
#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"

using namespace hoccl;
using namespace hoccl::test;

namespace {

int gHosts = 2, gPerHost = 2, gUnregistered = -1;

constexpr hocclRedOp_t kPreMulSum = hocclMaxRedOp;  // "a PreMulSum op made for the call"

uint64_t mappedCalls(hocclComm_t comm) {
  transport::HostLevel* h = comm->impl->hostLevel();
  return h ? h->mappedCalls() : 0;
}

enum class Which { AllReduce, ReduceScatter, AllGather };
Which gColl = Which::AllReduce;

const char* collName(Which c) {
  return c == Which::AllReduce ? "AllReduce" : c == Which::ReduceScatter ? "ReduceScatter" : "AllGather";
}

// One collective of the kind --coll names; returns the number of failures. `count` is the C API's count: all-reduce's
// elements, reduce-scatter's output block, all-gather's input block.
int runOne(hocclComm_t comm, int rank, int n, size_t count, hocclDataType_t dt, hocclRedOp_t op, bool inPlace,
           uint64_t seed, bool hostRegistered) {
  const size_t elem = kernels::typeSize(dt), un = static_cast<size_t>(n);
  const size_t inCount = gColl == Which::ReduceScatter ? count * un : count;
  const size_t outCount = gColl == Which::AllGather ? count * un : count;
  // In place, one buffer of the larger size: the input (reduce-scatter) or output (all-gather) in full, the other
  // at this rank's block of it.
  const size_t bigBytes = std::max<size_t>(std::max(inCount, outCount) * elem, 1);
  const size_t inBytes = std::max<size_t>(inCount * elem, 1), outBytes = std::max<size_t>(outCount * elem, 1);
  const bool registerHere = rank != gUnregistered;
  const double scalar = 2;
  hocclRedOp_t realOp = op;
  std::vector<char> scalarBytes(elem);
  kernels::fromDouble(scalar, scalarBytes.data(), dt);
  if (op == kPreMulSum)
    MP_CHECK(rank, hocclRedOpCreatePreMulSum(&realOp, scalarBytes.data(), dt, hocclScalarHostImmediate, comm));
  // A PreMulSum's values are scaled by the scalar on every rank; the reference scales them too.
  const hocclRedOp_t base = op == kPreMulSum ? hocclSum : op;
  std::vector<double> input = makeInput(seed, rank, inCount, dt, base);
  void* a = nullptr;  // the input, or in place the one buffer
  void* b = nullptr;  // the output (out of place)
  void* ha = nullptr;
  void* hb = nullptr;
  std::vector<char> plainA(inPlace ? bigBytes : inBytes), plainB(outBytes);
  const size_t aBytes = inPlace ? bigBytes : inBytes;
  if (registerHere) {
    MP_CHECK(rank, hocclMemAlloc(&a, aBytes));
    MP_CHECK(rank, hocclCommRegister(comm, a, aBytes, &ha));
    if (!inPlace) {
      MP_CHECK(rank, hocclMemAlloc(&b, outBytes));
      MP_CHECK(rank, hocclCommRegister(comm, b, outBytes, &hb));
    }
  } else {
    a = plainA.data();
    b = plainB.data();
  }
  void* send = a;
  void* recv = b;
  if (inPlace) {
    const size_t block = static_cast<size_t>(rank) * count * elem;
    send = gColl == Which::AllGather ? static_cast<char*>(a) + block : a;
    recv = gColl == Which::ReduceScatter ? static_cast<char*>(a) + block : a;
  }
  store(input, send, dt);
  const uint64_t before = mappedCalls(comm);
  hocclResult_t rc = hocclInternalError;
  switch (gColl) {
    case Which::AllReduce: rc = hocclAllReduce(send, recv, count, dt, realOp, comm, nullptr); break;
    case Which::ReduceScatter: rc = hocclReduceScatter(send, recv, count, dt, realOp, comm, nullptr); break;
    case Which::AllGather: rc = hocclAllGather(send, recv, count, dt, comm, nullptr); break;
  }
  const uint64_t ran = mappedCalls(comm) - before;
  std::vector<double> got = rc == hocclSuccess ? load(recv, outCount, dt) : std::vector<double>();
  if (op == kPreMulSum) hocclRedOpDestroy(realOp, comm);
  if (registerHere) {
    MP_CHECK(rank, hocclCommDeregister(comm, ha));
    MP_CHECK(rank, hocclMemFree(a));
    if (!inPlace) {
      MP_CHECK(rank, hocclCommDeregister(comm, hb));
      MP_CHECK(rank, hocclMemFree(b));
    }
  }
  const std::string what = std::string(collName(gColl)) + " count=" + std::to_string(count) +
                           " type=" + kernels::typeName(dt) +
                           (gColl == Which::AllGather
                                ? ""
                                : " op=" + (op == kPreMulSum ? std::string("premulsum") : std::to_string(op))) +
                           (inPlace ? " in-place" : " out-of-place");
  if (rc != hocclSuccess) return fail(rank, what + ": " + hocclGetErrorString(rc) + ": " + hocclGetLastError(nullptr));
  // PreMulSum scales the input into scratch, which no peer can map: it always takes the ring steps. A zero count
  // moves nothing.
  const uint64_t expected = hostRegistered && op != kPreMulSum && count > 0 ? 1 : 0;
  if (ran != expected)
    return fail(rank,
                what + ": the host level ran through mappings " + std::to_string(ran) + " time(s), expected " +
                    std::to_string(expected) +
                    (expected ? " (every rank of this host registered)" : " (a rank of this host did not register)"));
  // The reference: every rank's input regenerated, combined in double precision.
  std::vector<double> expect(outCount);
  if (gColl == Which::AllGather) {
    for (int r = 0; r < n; ++r) {
      const std::vector<double> in = makeInput(seed, r, inCount, dt, base);
      std::copy(in.begin(), in.end(), expect.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * count));
    }
  } else {
    const size_t from = gColl == Which::ReduceScatter ? static_cast<size_t>(rank) * count : 0;
    std::vector<double> acc;
    for (int r = 0; r < n; ++r) {
      std::vector<double> in = makeInput(seed, r, inCount, dt, base);
      if (op == kPreMulSum)
        for (double& x : in) x *= scalar;
      if (r == 0)
        acc.assign(in.begin() + static_cast<std::ptrdiff_t>(from),
                   in.begin() + static_cast<std::ptrdiff_t>(from + count));
      else
        for (size_t i = 0; i < count; ++i) acc[i] = combine(acc[i], in[from + i], base);
    }
    for (size_t i = 0; i < count; ++i) expect[i] = finish(acc[i], n, base, dt);
  }
  int bad = 0;
  for (size_t i = 0; i < outCount; ++i) {
    if (close(got[i], expect[i], dt, base)) continue;
    if (bad++ == 0)
      fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                     std::to_string(expect[i]));
  }
  return bad;
}

int body(int rank, int n, const hocclUniqueId& id) {
  const int host = rank / gPerHost;
  setenv("HOCCL_HOSTID", ("hostlevel-test-" + std::to_string(host)).c_str(), 1);
  hocclComm_t comm = nullptr;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  if (!comm->impl->hostLevel()) return fail(rank, "no host level on a communicator that spans hosts");
  const bool hostRegistered = gUnregistered < 0 || gUnregistered / gPerHost != host;
  int bad = 0;
  uint64_t seed = 11;
  const size_t counts[] = {0, 1, 2, 7, 1001, 65537};
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    for (hocclRedOp_t op : {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg, kPreMulSum}) {
      if (gColl == Which::AllGather && op != hocclSum) continue;  // no op: once per type
      for (size_t count : counts)
        for (bool inPlace : {false, true}) bad += runOne(comm, rank, n, count, dt, op, inPlace, seed++, hostRegistered);
    }
  }
  // Large and odd: many pipeline chunks, each rank's range in every one of them (the same total bytes for every
  // collective).
  const size_t large = ((size_t{4} << 20) + 3) / (gColl == Which::AllReduce ? 1 : static_cast<size_t>(n)) | 1;
  for (bool inPlace : {false, true})
    bad += runOne(comm, rank, n, large, hocclFloat, hocclSum, inPlace, seed++, hostRegistered);
  MP_CHECK(rank, hocclCommDestroy(comm));
  if (bad) std::fprintf(stderr, "rank %d: %d wrong result(s)\n", rank, bad);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hosts" && i + 1 < argc) gHosts = std::atoi(argv[++i]);
    else if (a == "--per-host" && i + 1 < argc) gPerHost = std::atoi(argv[++i]);
    else if (a == "--unregistered" && i + 1 < argc) gUnregistered = std::atoi(argv[++i]);
    else if (a == "--coll" && i + 1 < argc && std::string(argv[i + 1]) == "allreduce") gColl = Which::AllReduce, ++i;
    else if (a == "--coll" && i + 1 < argc && std::string(argv[i + 1]) == "reducescatter")
      gColl = Which::ReduceScatter, ++i;
    else if (a == "--coll" && i + 1 < argc && std::string(argv[i + 1]) == "allgather") gColl = Which::AllGather, ++i;
    else {
      std::fprintf(stderr,
                   "usage: mp_host_level --hosts H --per-host P [--unregistered R] "
                   "[--coll allreduce|reducescatter|allgather]\n");
      return 2;
    }
  }
  if (gHosts < 2 || gPerHost < 2) {
    std::fprintf(stderr, "mp_host_level: needs at least 2 hosts of 2 ranks\n");
    return 2;
  }
  const int rc = runRanks(gHosts * gPerHost, body, 600);
  std::printf("%s\n", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
