// HO-Ring's host level on mapped registered memory (issue 16), on an emulated cluster: N ranks on this machine,
// HOCCL_HOSTID putting P consecutive ranks on each of H fake hosts (shm between the ranks of a host, tcp between
// hosts), HO-Ring forced (HOCCL_ALGO=ho_ring) and the host level taken from 1 byte (HOCCL_CMA_MIN_BYTES=1).
// Every all-reduce of the matrix (every type; sum, prod, max, min, avg, premulsum; odd counts; in place and out of
// place) runs on hocclMemAlloc buffers registered with the communicator, and is checked element by element against a
// double-precision reference. After each call the communicator's host-level counter says whether the host level ran
// through the mappings: it must have on every host whose ranks all registered, and must not have on a host where
// one rank (--unregistered R: rank R uses ordinary memory) did not, which falls back to HO-Ring's ring steps.
//
// Usage: mp_host_level --hosts H --per-host P [--unregistered R]
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

// One all-reduce; returns the number of failures.
int runOne(hocclComm_t comm, int rank, int n, size_t count, hocclDataType_t dt, hocclRedOp_t op, bool inPlace,
           uint64_t seed, bool hostRegistered) {
  const size_t elem = kernels::typeSize(dt), bytes = std::max<size_t>(count * elem, 1);
  const bool registerHere = rank != gUnregistered;
  const double scalar = 2;
  hocclRedOp_t realOp = op;
  std::vector<char> scalarBytes(elem);
  kernels::fromDouble(scalar, scalarBytes.data(), dt);
  if (op == kPreMulSum)
    MP_CHECK(rank, hocclRedOpCreatePreMulSum(&realOp, scalarBytes.data(), dt, hocclScalarHostImmediate, comm));
  // A PreMulSum's values are scaled by the scalar on every rank; the reference scales them too.
  std::vector<double> input = makeInput(seed, rank, count, dt, op == kPreMulSum ? hocclSum : op);
  void* a = nullptr;
  void* b = nullptr;
  void* ha = nullptr;
  void* hb = nullptr;
  std::vector<char> plainA(bytes), plainB(bytes);
  if (registerHere) {
    MP_CHECK(rank, hocclMemAlloc(&a, bytes));
    MP_CHECK(rank, hocclCommRegister(comm, a, bytes, &ha));
    if (!inPlace) {
      MP_CHECK(rank, hocclMemAlloc(&b, bytes));
      MP_CHECK(rank, hocclCommRegister(comm, b, bytes, &hb));
    }
  } else {
    a = plainA.data();
    b = plainB.data();
  }
  if (inPlace) b = a;
  store(input, a, dt);
  const uint64_t before = mappedCalls(comm);
  hocclResult_t rc = hocclAllReduce(a, b, count, dt, realOp, comm, nullptr);
  const uint64_t ran = mappedCalls(comm) - before;
  std::vector<double> got = rc == hocclSuccess ? load(b, count, dt) : std::vector<double>();
  if (op == kPreMulSum) hocclRedOpDestroy(realOp, comm);
  if (registerHere) {
    MP_CHECK(rank, hocclCommDeregister(comm, ha));
    MP_CHECK(rank, hocclMemFree(a));
    if (!inPlace) {
      MP_CHECK(rank, hocclCommDeregister(comm, hb));
      MP_CHECK(rank, hocclMemFree(b));
    }
  }
  const std::string what = "AllReduce count=" + std::to_string(count) + " type=" + kernels::typeName(dt) +
                           " op=" + (op == kPreMulSum ? "premulsum" : std::to_string(op)) +
                           (inPlace ? " in-place" : " out-of-place");
  if (rc != hocclSuccess) return fail(rank, what + ": " + hocclGetErrorString(rc) + ": " + hocclGetLastError(nullptr));
  // PreMulSum scales the input into scratch, which no peer can map: it always takes the ring steps.
  const uint64_t expected = hostRegistered && op != kPreMulSum ? 1 : 0;
  if (ran != expected)
    return fail(rank,
                what + ": the host level ran through mappings " + std::to_string(ran) + " time(s), expected " +
                    std::to_string(expected) +
                    (expected ? " (every rank of this host registered)" : " (a rank of this host did not register)"));
  // The reference: every rank's input regenerated, reduced in double precision.
  const hocclRedOp_t base = op == kPreMulSum ? hocclSum : op;
  std::vector<double> acc;
  for (int r = 0; r < n; ++r) {
    std::vector<double> in = makeInput(seed, r, count, dt, base);
    if (op == kPreMulSum)
      for (double& x : in) x *= scalar;
    if (r == 0) acc = in;
    else
      for (size_t i = 0; i < count; ++i) acc[i] = combine(acc[i], in[i], base);
  }
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const double expect = finish(acc[i], n, base, dt);
    if (close(got[i], expect, dt, base)) continue;
    if (bad++ == 0)
      fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                     std::to_string(expect));
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
  const size_t counts[] = {1, 2, 7, 1001, 65537};
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    for (hocclRedOp_t op : {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg, kPreMulSum})
      for (size_t count : counts)
        for (bool inPlace : {false, true}) bad += runOne(comm, rank, n, count, dt, op, inPlace, seed++, hostRegistered);
  }
  // Large and odd: many pipeline chunks, each rank's range in every one of them.
  for (bool inPlace : {false, true})
    bad += runOne(comm, rank, n, (size_t{4} << 20) + 3, hocclFloat, hocclSum, inPlace, seed++, hostRegistered);
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
    else {
      std::fprintf(stderr, "usage: mp_host_level --hosts H --per-host P [--unregistered R]\n");
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
