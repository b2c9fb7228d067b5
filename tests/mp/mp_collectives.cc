// Every collective x type x op, with awkward counts, in place and out of place, every root in turn, on N real
// processes over shm or tcp, checked element by element against a double-precision reference. Then grouped
// send/recv (ring and all-to-all patterns in shuffled call order) and CommSplit.
//
// With --device (and HOCCL_DEVICE=sim) every buffer of the matrix is device memory and every call is stream-ordered on
// a stream of this rank: the results are read after hocclStreamSynchronize. tests/mp/mp_device.cc checks the ordering.
//
// With --registered all|some every buffer of the matrix is hocclMemAlloc memory registered with the communicator (on
// every rank, or on the even ranks only), and the test checks afterwards whether peers' blocks were mapped (zero
// copy ran: all) or not (every rank fell back to the copy paths: some).
//
// Device buffers of ranks on one host go directly between their devices (transports/cuda_ipc/) unless
// HOCCL_DEVICE_P2P=0; --expect-path says which path must have run, from the process's device channel counters:
// p2p (every device channel agreed on the direct path and bytes went through it), staged (none did), hier (some
// direct bytes: ranks on several emulated hosts, --hosts H, sets HOCCL_HOSTID per rank), asym (--p2p-off-rank R sets
// HOCCL_DEVICE_P2P=0 on rank R only: R and its peers fall back to staging, and R moves no direct byte).
// --expect-one-kernel yes|no: whether the small all-reduces (past the mismatch check's first calls) ran as one kernel
// over the peers' mapped areas (comm/one_shot.h; ranks of one host with the shm session, HOCCL_DEVICE_ONE_SHOT);
// --one-kernel-off-rank R sets HOCCL_DEVICE_ONE_SHOT=0 on rank R only: no rank may take the path then.
//
// Usage: mp_collectives --ranks N --transport shm|tcp|ucx [--large] [--device] [--registered all|some]
//            [--hosts H] [--expect-path p2p|staged|hier|asym] [--expect-handle fd|legacy] [--p2p-off-rank R]
//            [--expect-one-kernel yes|no] [--one-kernel-off-rank R]
//            [--check-shm-release] (HOCCL_MAX_CONNS over shm: shm_release.h) [--skew]
//            --skew: every rank's buffers start 16 x rank bytes (mod 64) into a cache line, so that peers' buffers
//            lie at different offsets within one (single copy's bounce buffer, shm_single_copy.cc)
//        mp_collectives --ranks N --transport shm|tcp|ucx --soak CALLS [--seed S]
//            a soak instead: CALLS collectives of random kind, type, op, root and small count (0..4096 elements,
//            in and out of place), the same sequence on every rank, each checked like the matrix (tools/soak runs it
//            under ASan/UBSan)
#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data.h"
#include "harness.h"
#include "shm_release.h"
#include "comm/one_shot.h"
#include "kernels/cpu/reduce.h"
#include "sched/schedule.h"
#include "transports/device_channel.h"

using namespace hoccl;
using namespace hoccl::test;
using sched::Coll;

namespace {

const Coll kColls[] = {Coll::AllReduce,     Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                       Coll::ReduceScatter, Coll::AlltoAll,  Coll::Gather, Coll::Scatter};
// Stands for "a PreMulSum op made for the call" in kOps (hocclMaxRedOp: inside the enum's range, never a real op).
constexpr hocclRedOp_t kPreMulSum = hocclMaxRedOp;
const hocclRedOp_t kOps[] = {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg, kPreMulSum};

bool gDevice = false;             // --device: device buffers, stream-ordered calls
int gRegistered = 0;              // --registered all|some: 1 every rank's buffers, 2 even ranks' only, from MemAlloc
hocclStream_t gStream = nullptr;  // this rank's stream in device mode
std::string gExpectPath;          // --expect-path: which device path must have run
std::string gExpectHandle;        // --expect-handle fd|legacy: how the direct path's peer areas must have been mapped
std::string gExpectOneKernel;     // --expect-one-kernel yes|no: whether small all-reduces ran as one kernel
int gP2pOffRank = -1;             // --p2p-off-rank: the rank with HOCCL_DEVICE_P2P=0
int gOneKernelOffRank = -1;       // --one-kernel-off-rank: the rank with HOCCL_DEVICE_ONE_SHOT=0
bool gCheckShmRelease = false;    // --check-shm-release: after the matrix, only the ring neighbours' slots stay mapped
bool gSkew = false;               // --skew: buffers at 16 x rank bytes (mod 64) past a cache line's start

// Checks --expect-path against this process's device channel counters (after the matrix).
int checkDevicePath(int rank, int n) {
  if (gExpectPath.empty() || n == 1) return 0;
  const auto& st = transport::deviceChannelStats();
  const uint64_t p2p = st.p2pChannels, fallback = st.fallbackChannels, in = st.p2pBytesReceived, out = st.p2pBytesSent;
  const std::string counts = " (direct channels " + std::to_string(p2p) + ", fallen back " + std::to_string(fallback) +
                             ", direct bytes in " + std::to_string(in) + ", out " + std::to_string(out) + ")";
  if (gExpectPath == "p2p" && (p2p == 0 || fallback != 0 || in == 0 || out == 0))
    return fail(rank, "the direct device path did not carry every peer" + counts);
  if (gExpectPath == "staged" && (p2p != 0 || in != 0 || out != 0))
    return fail(rank, "the direct device path ran where device buffers must be staged" + counts);
  if (gExpectPath == "hier" && (p2p == 0 || in == 0 || fallback != 0))
    return fail(rank, "the host's peers did not use the direct device path" + counts);
  const uint64_t fdMapped = st.fdMappedChannels, legacyMapped = st.legacyMappedChannels;
  if (gExpectHandle == "fd" && (fdMapped != p2p || legacyMapped != 0))
    return fail(rank, "a direct channel's peer area was not mapped from a passed cuMem descriptor" + counts + " (fd " +
                          std::to_string(fdMapped) + ", legacy " + std::to_string(legacyMapped) + ")");
  if (gExpectHandle == "legacy" && (legacyMapped != p2p || fdMapped != 0))
    return fail(rank, "a direct channel's peer area was not mapped from a legacy IPC handle" + counts + " (fd " +
                          std::to_string(fdMapped) + ", legacy " + std::to_string(legacyMapped) + ")");
  const uint64_t oneKernel = OneShotAllReduce::launches();
  if (gExpectOneKernel == "yes" && oneKernel == 0)
    return fail(rank, "no small all-reduce ran as one kernel (comm/one_shot.h)" + counts);
  if (gExpectOneKernel == "no" && oneKernel != 0)
    return fail(rank, std::to_string(oneKernel) + " all-reduces ran as one kernel where none may" + counts);
  if (!gExpectOneKernel.empty() && rank == 0)
    std::printf("rank 0: %llu all-reduces ran as one kernel\n", static_cast<unsigned long long>(oneKernel));
  if (gExpectPath == "asym") {
    if (rank == gP2pOffRank && (p2p != 0 || in != 0 || fallback == 0))
      return fail(rank, "HOCCL_DEVICE_P2P=0 here, yet the direct device path ran or nothing fell back" + counts);
    if (rank == (gP2pOffRank + 1) % n && fallback == 0)  // its ring neighbour talks to it
      return fail(rank, "the channel to the rank without the direct path did not fall back" + counts);
  }
  return 0;
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

hocclResult_t call(Coll c, const void* s, void* r, size_t count, hocclDataType_t dt, hocclRedOp_t op, int root,
                   hocclComm_t comm) {
  switch (c) {
    case Coll::AllReduce: return hocclAllReduce(s, r, count, dt, op, comm, gStream);
    case Coll::Broadcast: return hocclBroadcast(s, r, count, dt, root, comm, gStream);
    case Coll::Reduce: return hocclReduce(s, r, count, dt, op, root, comm, gStream);
    case Coll::AllGather: return hocclAllGather(s, r, count, dt, comm, gStream);
    case Coll::ReduceScatter: return hocclReduceScatter(s, r, count, dt, op, comm, gStream);
    case Coll::AlltoAll: return hocclAlltoAll(s, r, count, dt, comm, gStream);
    case Coll::Gather: return hocclGather(s, r, count, dt, root, comm, gStream);
    case Coll::Scatter: return hocclScatter(s, r, count, dt, root, comm, gStream);
  }
  return hocclInternalError;
}

// The expected output of `rank` (empty when its output is undefined), from every rank's regenerated input.
std::vector<double> expectedOutput(Coll c, int rank, int n, size_t count, int root, hocclDataType_t dt, hocclRedOp_t op,
                                   double scalar, uint64_t seed) {
  sched::CollArgs a;
  a.coll = c;
  a.nranks = n;
  a.count = count;
  a.root = root;
  std::vector<std::vector<double>> in(n);
  for (int r = 0; r < n; ++r) {
    a.rank = r;
    in[r] = makeInput(seed, r, sched::bufferCounts(a).input, dt, op == kPreMulSum ? hocclSum : op);
    if (op == kPreMulSum)
      for (double& x : in[r]) x *= scalar;
  }
  hocclRedOp_t base = op == kPreMulSum ? hocclSum : op;
  auto reduceRange = [&](size_t off, size_t cnt) {
    std::vector<double> acc(in[0].begin() + off, in[0].begin() + off + cnt);
    for (int r = 1; r < n; ++r)
      for (size_t i = 0; i < cnt; ++i) acc[i] = combine(acc[i], in[r][off + i], base);
    for (double& x : acc) x = finish(x, n, base, dt);
    return acc;
  };
  std::vector<double> out;
  switch (c) {
    case Coll::AllReduce: return reduceRange(0, count);
    case Coll::Reduce: return rank == root ? reduceRange(0, count) : out;
    case Coll::ReduceScatter: return reduceRange(rank * count, count);
    case Coll::Broadcast: return in[root];
    case Coll::AllGather:
      for (int r = 0; r < n; ++r) out.insert(out.end(), in[r].begin(), in[r].end());
      return out;
    case Coll::Gather:
      if (rank == root)
        for (int r = 0; r < n; ++r) out.insert(out.end(), in[r].begin(), in[r].end());
      return out;
    case Coll::Scatter:
      return std::vector<double>(in[root].begin() + rank * count, in[root].begin() + (rank + 1) * count);
    case Coll::AlltoAll:
      for (int r = 0; r < n; ++r)
        out.insert(out.end(), in[r].begin() + rank * count, in[r].begin() + (rank + 1) * count);
      return out;
  }
  return out;
}

// Inodes of the hocclMemAlloc blocks of peers mapped in this process now (every memfd block mapped here except the
// ones starting at `own1` and `own2`, this rank's own live blocks).
std::set<unsigned long> peerInodesMapped(const void* own1, const void* own2) {
  std::set<unsigned long> inodes;
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return inodes;
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    if (!std::strstr(line, "/memfd:hoccl-mem-")) continue;
    unsigned long start = 0, end = 0, offset = 0, inode = 0;
    char perms[8], dev[16];
    if (std::sscanf(line, "%lx-%lx %7s %lx %15s %lu", &start, &end, perms, &offset, dev, &inode) != 6) continue;
    if (start == reinterpret_cast<uintptr_t>(own1) || start == reinterpret_cast<uintptr_t>(own2)) continue;
    inodes.insert(inode);
  }
  std::fclose(f);
  return inodes;
}

// Registered on every rank: whether this rank must have read a peer's buffer through a mapping (zero copy) in a
// call the single-copy shortcut runs (HOCCL_ALGO=single_copy, HOCCL_CMA_MIN_BYTES=1, a built-in op).
bool zeroCopyExpected(Coll c, int rank, int n, int root, hocclRedOp_t op) {
  if (n < 2 || op == kPreMulSum) return false;
  switch (c) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll: return true;
    case Coll::Broadcast: return rank != root;  // receivers read the root's input
    default: return false;
  }
}

/// `bytes` of 0x5a starting `skew` bytes past a cache line's start.
class SkewedBuffer {
 public:
  SkewedBuffer(size_t bytes, size_t skew) : bytes_(bytes), storage_(bytes + 128, 0x5a) {
    const auto line = (reinterpret_cast<uintptr_t>(storage_.data()) + 63) & ~uintptr_t{63};
    data_ = reinterpret_cast<char*>(line) + skew;
  }
  char* data() { return data_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  std::vector<char> storage_;
  char* data_ = nullptr;
};

// One call: returns the number of wrong elements (and prints the first).
int runOne(hocclComm_t comm, int rank, int n, Coll c, size_t count, hocclDataType_t dt, hocclRedOp_t op, bool inPlace,
           uint64_t seed) {
  const int root = static_cast<int>(seed % n);
  const size_t elem = kernels::typeSize(dt);
  sched::CollArgs a;
  a.coll = c;
  a.nranks = n;
  a.rank = rank;
  a.count = count;
  auto bc = sched::bufferCounts(a);
  const double scalar = 2.0;
  hocclRedOp_t realOp = op;
  if (op == kPreMulSum) {
    std::vector<char> s(elem);
    kernels::fromDouble(scalar, s.data(), dt);
    // Alternate host-immediate and pointer residence.
    if (hocclRedOpCreatePreMulSum(&realOp, s.data(), dt, static_cast<hocclScalarResidence_t>(seed & 1), comm) !=
        hocclSuccess)
      return fail(rank, std::string("RedOpCreatePreMulSum: ") + hocclGetLastError(nullptr));
    // For pointer residence the scalar must outlive the call: keep it in a static.
    static thread_local std::vector<char> keep;
    keep = s;
    if ((seed & 1) == 0) {
      hocclRedOpDestroy(realOp, comm);
      void* where = keep.data();
      if (gDevice) {  // device mode: the scalar in device memory, as NCCL's users pass it
        static thread_local void* deviceScalar = nullptr;
        if (!deviceScalar) MP_CHECK(rank, hocclDeviceMalloc(&deviceScalar, 16));
        MP_CHECK(rank, hocclDeviceMemcpy(deviceScalar, keep.data(), elem));
        where = deviceScalar;
      }
      hocclRedOpCreatePreMulSum(&realOp, where, dt, hocclScalarDevice, comm);
    }
  }
  std::vector<double> input = makeInput(seed, rank, bc.input, dt, op == kPreMulSum ? hocclSum : op);
  // In place as the API defines it: one buffer of the larger size with the input at its place.
  size_t big = std::max(bc.input, bc.output);
  const size_t skew = gSkew ? static_cast<size_t>(16 * rank % 64) : 0;
  SkewedBuffer buf1((big + 1) * elem, skew), buf2((bc.output + 1) * elem, skew);
  const void* send;
  void* recv;
  bool inPlaceHere = inPlace && !((c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter) && rank != root);
  if (inPlaceHere) {
    size_t inOff = (c == Coll::AllGather || c == Coll::Gather) ? rank * count : 0;
    size_t outOff = (c == Coll::ReduceScatter || c == Coll::Scatter) ? rank * count : 0;
    store(input, buf1.data() + inOff * elem, dt);
    send = buf1.data() + inOff * elem;
    recv = buf1.data() + outOff * elem;
  } else {
    store(input, buf1.data(), dt);
    send = buf1.data();
    recv = buf2.data();
  }
  // Device mode: the same layout in device memory (guard bytes included), read back after the stream has run.
  void* dev1 = nullptr;
  void* dev2 = nullptr;
  // Registered mode: the same layout in hocclMemAlloc memory registered with the communicator (by every rank, or by
  // the even ranks only: the others then use ordinary memory, and every rank must fall back to the copy paths).
  const bool registerHere = gRegistered == 1 || (gRegistered == 2 && rank % 2 == 0);
  void* reg1 = nullptr;
  void* reg2 = nullptr;
  if (registerHere) {
    MP_CHECK(rank, hocclMemAlloc(&dev1, buf1.size()));
    MP_CHECK(rank, hocclMemAlloc(&dev2, buf2.size()));
    std::memcpy(dev1, buf1.data(), buf1.size());
    std::memcpy(dev2, buf2.data(), buf2.size());
    MP_CHECK(rank, hocclCommRegister(comm, dev1, buf1.size(), &reg1));
    MP_CHECK(rank, hocclCommRegister(comm, dev2, buf2.size(), &reg2));
  }
  if (gDevice) {
    MP_CHECK(rank, hocclDeviceMalloc(&dev1, buf1.size()));
    MP_CHECK(rank, hocclDeviceMalloc(&dev2, buf2.size()));
    MP_CHECK(rank, hocclDeviceMemcpy(dev1, buf1.data(), buf1.size()));
    MP_CHECK(rank, hocclDeviceMemcpy(dev2, buf2.data(), buf2.size()));
  }
  auto onDev = [&](const void* p) -> void* {
    if (!gDevice && !registerHere) return const_cast<void*>(p);
    const char* c = static_cast<const char*>(p);
    if (c >= buf1.data() && c <= buf1.data() + buf1.size()) return static_cast<char*>(dev1) + (c - buf1.data());
    return static_cast<char*>(dev2) + (c - buf2.data());
  };
  // The op is destroyed as soon as the call returns (allowed), before a stream-ordered call has run.
  std::set<unsigned long> mappedBefore;
  if (gRegistered == 1) mappedBefore = peerInodesMapped(dev1, dev2);
  hocclResult_t rc = call(c, onDev(send), onDev(recv), count, dt, realOp, root, comm);
  if (op == kPreMulSum) hocclRedOpDestroy(realOp, comm);
  // Zero copy maps the peers' fresh blocks of this call: a block not mapped before must be mapped now.
  bool newPeerBlock = false;
  if (gRegistered == 1)
    for (unsigned long inode : peerInodesMapped(dev1, dev2)) newPeerBlock |= mappedBefore.count(inode) == 0;
  if (gDevice) {
    if (rc == hocclSuccess) rc = hocclStreamSynchronize(gStream);
    hocclResult_t async = hocclSuccess;
    if (rc == hocclSuccess) rc = hocclCommGetAsyncError(comm, &async);
    if (rc == hocclSuccess) rc = async;
    hocclDeviceMemcpy(buf1.data(), dev1, buf1.size());
    hocclDeviceMemcpy(buf2.data(), dev2, buf2.size());
    hocclDeviceFree(dev1);
    hocclDeviceFree(dev2);
  }
  if (registerHere) {
    std::memcpy(buf1.data(), dev1, buf1.size());
    std::memcpy(buf2.data(), dev2, buf2.size());
    MP_CHECK(rank, hocclCommDeregister(comm, reg1));
    MP_CHECK(rank, hocclCommDeregister(comm, reg2));
    MP_CHECK(rank, hocclMemFree(dev1));
    MP_CHECK(rank, hocclMemFree(dev2));
  }
  std::string what = std::string(sched::collName(c)) + " count=" + std::to_string(count) +
                     " type=" + kernels::typeName(dt) + " op=" + (op == kPreMulSum ? "premulsum" : std::to_string(op)) +
                     " root=" + std::to_string(root) + (inPlace ? " in-place" : " out-of-place");
  if (rc != hocclSuccess) return fail(rank, what + ": " + hocclGetErrorString(rc) + ": " + hocclGetLastError(nullptr));
  if (gRegistered == 1 && count > 0 && zeroCopyExpected(c, rank, n, root, op) && !newPeerBlock)
    return fail(rank,
                what + ": every rank registered its buffers, but no peer's buffer was mapped: zero copy did not run");
  std::vector<double> expect = expectedOutput(c, rank, n, count, root, dt, op, scalar, seed);
  if (expect.empty()) return 0;
  std::vector<double> got = load(recv, expect.size(), dt);
  int bad = 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    if (!close(got[i], expect[i], dt, op == kPreMulSum ? hocclSum : op)) {
      if (bad == 0)
        fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                       std::to_string(expect[i]));
      ++bad;
    }
  }
  return bad;
}

// Shared blocks of hocclMemAlloc mapped in this process. Every block this process allocated is freed by then, so
// what remains are the peers' blocks that the shm transport mapped (and caches).
int peerBlocksMapped() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[4096];
  int n = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::strstr(line, "/memfd:hoccl-mem-")) ++n;
  std::fclose(f);
  return n;
}

int collectivesMatrix(hocclComm_t comm, int rank, int n, bool large) {
  int bad = 0;
  uint64_t seed = 1;
  std::vector<size_t> counts = {0, 1, 2, 7, static_cast<size_t>(std::max(n - 1, 0)), static_cast<size_t>(n + 1), 1000};
  for (Coll c : kColls) {
    for (int t = 0; t < hocclNumTypes; ++t) {
      auto dt = static_cast<hocclDataType_t>(t);
      for (hocclRedOp_t op : kOps) {
        if (!reduces(c) && op != hocclSum) continue;
        for (size_t count : counts)
          for (bool inPlace : {false, true}) bad += runOne(comm, rank, n, c, count, dt, op, inPlace, seed++);
      }
    }
    // Large odd counts: every collective with float sum, and the others' default.
    size_t bigCount = large ? 1000003 : 65537;
    for (bool inPlace : {false, true}) bad += runOne(comm, rank, n, c, bigCount, hocclFloat, hocclSum, inPlace, seed++);
    if (large) bad += runOne(comm, rank, n, c, bigCount, hocclBfloat16, hocclMax, false, seed++);
  }
  return bad;
}

// Grouped send/recv: a ring in both directions and an all-to-all, with calls in a shuffled order per rank.
int groupedP2P(hocclComm_t comm, int rank, int n) {
  std::mt19937 rng(rank * 31 + 5);
  const size_t count = 1001;
  std::vector<std::vector<int>> out(n, std::vector<int>(count)), in(n, std::vector<int>(count, -1));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) out[p][i] = rank * 1000000 + p * 10000 + static_cast<int>(i);
  // All-to-all, including self.
  std::vector<int> order(2 * n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  MP_CHECK(rank, hocclGroupStart());
  for (int k : order) {
    int p = k % n;
    if (k < n) MP_CHECK(rank, hocclSend(out[p].data(), count, hocclInt32, p, comm, nullptr));
    else MP_CHECK(rank, hocclRecv(in[p].data(), count, hocclInt32, p, comm, nullptr));
  }
  MP_CHECK(rank, hocclGroupEnd());
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      if (in[p][i] != p * 1000000 + rank * 10000 + static_cast<int>(i))
        return fail(rank, "grouped all-to-all: wrong data from rank " + std::to_string(p));
  // Two messages to each ring neighbour, receives posted before sends on odd ranks; FIFO order must hold.
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<double> a(777, rank + 0.5), b(333, rank + 0.25), ra(777), rb(333);
  MP_CHECK(rank, hocclGroupStart());
  if (rank % 2) {
    MP_CHECK(rank, hocclRecv(ra.data(), ra.size(), hocclDouble, prev, comm, nullptr));
    MP_CHECK(rank, hocclRecv(rb.data(), rb.size(), hocclDouble, prev, comm, nullptr));
  }
  MP_CHECK(rank, hocclSend(a.data(), a.size(), hocclDouble, next, comm, nullptr));
  MP_CHECK(rank, hocclSend(b.data(), b.size(), hocclDouble, next, comm, nullptr));
  if (rank % 2 == 0) {
    MP_CHECK(rank, hocclRecv(ra.data(), ra.size(), hocclDouble, prev, comm, nullptr));
    MP_CHECK(rank, hocclRecv(rb.data(), rb.size(), hocclDouble, prev, comm, nullptr));
  }
  MP_CHECK(rank, hocclGroupEnd());
  if (ra[776] != prev + 0.5 || rb[0] != prev + 0.25) return fail(rank, "grouped ring: wrong or reordered data");
  // In place, as nccl-tests' in-place sendrecv: send a buffer to next while receiving into it from prev.
  std::vector<double> same(3 << 20);
  for (size_t i = 0; i < same.size(); ++i) same[i] = rank * 1e7 + static_cast<double>(i);
  MP_CHECK(rank, hocclGroupStart());
  MP_CHECK(rank, hocclRecv(same.data(), same.size(), hocclDouble, prev, comm, nullptr));
  MP_CHECK(rank, hocclSend(same.data(), same.size(), hocclDouble, next, comm, nullptr));
  MP_CHECK(rank, hocclGroupEnd());
  for (size_t i = 0; i < same.size(); ++i)
    if (same[i] != prev * 1e7 + static_cast<double>(i))
      return fail(rank, "in-place grouped send/recv: element " + std::to_string(i) + " is wrong");
  return 0;
}

// The small one-shot path must be chosen the same way whether or not a call sits in a group: even ranks group a
// stream of small and large collectives, odd ranks call them one by one. Sizes alternate between payloads inside
// the arena's sequence line and beyond it, and the stream is long enough to reuse both arena parities many times.
// Every result is exact (small integers in doubles).
int groupedAndUngrouped(hocclComm_t comm, int rank, int n) {
  const size_t counts[] = {3, 200, 1, 511, 7, 100000};  // 24 B inline, 1600 B, 8 B, 4088 B, 56 B, 800 KB (large)
  MP_CHECK(rank, hocclCommResetCounters(comm));
  for (int round = 0; round < 12; ++round) {
    const size_t count = counts[round % 6];
    const int root = round % n;
    std::vector<double> in(count), sum(count), gathered(count * n), bcast(count);
    for (size_t i = 0; i < count; ++i) in[i] = rank * 1000 + static_cast<double>(i % 997) + round;
    if (rank == root) bcast = in;
    const bool grouped = rank % 2 == 0;
    if (grouped) MP_CHECK(rank, hocclGroupStart());
    MP_CHECK(rank, hocclAllReduce(in.data(), sum.data(), count, hocclDouble, hocclSum, comm, nullptr));
    MP_CHECK(rank, hocclAllGather(in.data(), gathered.data(), count, hocclDouble, comm, nullptr));
    MP_CHECK(rank, hocclBroadcast(bcast.data(), bcast.data(), count, hocclDouble, root, comm, nullptr));
    double tiny[3] = {1.0 * rank, 2.0, 3.0 * round}, tinySum[3] = {0, 0, 0};  // small, after large ones
    MP_CHECK(rank, hocclAllReduce(tiny, tinySum, 3, hocclDouble, hocclSum, comm, nullptr));
    if (grouped) MP_CHECK(rank, hocclGroupEnd());
    if (tinySum[0] != n * (n - 1) / 2.0 || tinySum[1] != 2.0 * n || tinySum[2] != 3.0 * round * n)
      return fail(rank, "mixed grouping, round " + std::to_string(round) + ": the small all-reduce is wrong");
    for (size_t i = 0; i < count; ++i) {
      double expect = 0;
      for (int r = 0; r < n; ++r) expect += r * 1000 + static_cast<double>(i % 997) + round;
      const std::string where = "mixed grouping, round " + std::to_string(round) + ", element " + std::to_string(i);
      if (sum[i] != expect) return fail(rank, where + ": all-reduce is wrong");
      for (int r = 0; r < n; ++r)
        if (gathered[r * count + i] != r * 1000 + static_cast<double>(i % 997) + round)
          return fail(rank, where + ": all-gather block " + std::to_string(r) + " is wrong");
      if (bcast[i] != root * 1000 + static_cast<double>(i % 997) + round)
        return fail(rank, where + ": broadcast is wrong");
    }
  }
  // Whatever path each call took (small one-shot, single copy, schedules), the byte counters must balance: every
  // byte one rank counts as sent, another counts as received.
  hocclCommCounters_t ctr{};
  MP_CHECK(rank, hocclCommGetCounters(comm, &ctr));
  unsigned long long totals[2] = {0, 0};
  for (int k = 0; k < hocclNumLinkClasses; ++k) {
    totals[0] += ctr.bytesSent[k];
    totals[1] += ctr.bytesReceived[k];
  }
  MP_CHECK(rank, hocclAllReduce(totals, totals, 2, hocclUint64, hocclSum, comm, nullptr));
  if (n > 1 && (totals[0] != totals[1] || totals[0] == 0))
    return fail(rank, "byte counters do not balance: " + std::to_string(totals[0]) + " sent, " +
                          std::to_string(totals[1]) + " received");
  return 0;
}

// The soak: `calls` random small collectives, each checked against the reference; the sequence comes from `seed`
// (the same on every rank). Returns the number of wrong elements (0 = pass).
int soak(hocclComm_t comm, int rank, int n, long calls, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int bad = 0;
  for (long i = 0; i < calls && bad == 0; ++i) {
    const Coll c = kColls[rng() % std::size(kColls)];
    const auto dt = static_cast<hocclDataType_t>(rng() % hocclNumTypes);
    const hocclRedOp_t op = reduces(c) ? kOps[rng() % std::size(kOps)] : hocclSum;
    // Mostly tiny (the one-host shortcuts), sometimes up to 4096 elements; a few empty calls.
    const size_t count = rng() % 8 == 0 ? rng() % 4097 : rng() % 64;
    const bool inPlace = rng() % 2 == 0;
    bad += runOne(comm, rank, n, c, count, dt, op, inPlace, rng());
  }
  return bad;
}

// CommSplit: odd/even colors with reversed keys, one rank left out; the new communicators work.
int split(hocclComm_t comm, int rank, int n) {
  int color = (n > 2 && rank == n - 1) ? HOCCL_SPLIT_NOCOLOR : rank % 2;
  hocclComm_t sub = nullptr;
  MP_CHECK(rank, hocclCommSplit(comm, color, -rank, &sub, nullptr));
  if (color == HOCCL_SPLIT_NOCOLOR) return sub == nullptr ? 0 : fail(rank, "NOCOLOR rank got a communicator");
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (r % 2 == color && !(n > 2 && r == n - 1)) members.push_back(r);
  std::reverse(members.begin(), members.end());  // key = -rank
  int subRank = -1, subSize = -1;
  MP_CHECK(rank, hocclCommUserRank(sub, &subRank));
  MP_CHECK(rank, hocclCommCount(sub, &subSize));
  if (subSize != static_cast<int>(members.size()) || members[subRank] != rank)
    return fail(rank, "CommSplit gave rank " + std::to_string(subRank) + " of " + std::to_string(subSize));
  long v = rank, total = 0;
  MP_CHECK(rank, hocclAllReduce(&v, &total, 1, hocclInt64, hocclSum, sub, nullptr));
  long expect = 0;
  for (int m : members) expect += m;
  if (total != expect) return fail(rank, "all-reduce on the split communicator is wrong");
  MP_CHECK(rank, hocclCommDestroy(sub));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 4;
  std::string transport = "shm";
  bool large = false;
  int hosts = 1;
  long soakCalls = 0;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) nranks = std::atoi(argv[++i]);
    else if (a == "--soak" && i + 1 < argc) soakCalls = std::atol(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--transport" && i + 1 < argc) transport = argv[++i];
    else if (a == "--large") large = true;
    else if (a == "--device") gDevice = true;
    else if (a == "--registered" && i + 1 < argc) gRegistered = std::string(argv[++i]) == "some" ? 2 : 1;
    else if (a == "--hosts" && i + 1 < argc) hosts = std::atoi(argv[++i]);
    else if (a == "--expect-path" && i + 1 < argc) gExpectPath = argv[++i];
    else if (a == "--expect-one-kernel" && i + 1 < argc) gExpectOneKernel = argv[++i];
    else if (a == "--expect-handle" && i + 1 < argc) gExpectHandle = argv[++i];
    else if (a == "--p2p-off-rank" && i + 1 < argc) gP2pOffRank = std::atoi(argv[++i]);
    else if (a == "--one-kernel-off-rank" && i + 1 < argc) gOneKernelOffRank = std::atoi(argv[++i]);
    else if (a == "--check-shm-release") gCheckShmRelease = true;
    else if (a == "--skew") gSkew = true;
  }
  // tcp and ucx carry every peer (shm off); ucx runs over the wires UCX_TLS names.
  if (transport == "tcp" || transport == "ucx") setenv("HOCCL_SHM_DISABLE", "1", 1);
  else unsetenv("HOCCL_SHM_DISABLE");
  if (transport == "ucx") setenv("HOCCL_NET", "ucx", 1);
  else unsetenv("HOCCL_NET");
  if (soakCalls > 0) {
    const auto start = std::chrono::steady_clock::now();
    int rc = runRanks(
        nranks,
        [&](int rank, int n, const hocclUniqueId& id) {
      hocclComm_t comm;
      MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
      if (int bad = soak(comm, rank, n, soakCalls, seed))
        return fail(rank, std::to_string(bad) + " wrong elements in the soak");
      MP_CHECK(rank, hocclCommDestroy(comm));
      return 0;
        },
        3600);
    std::printf("mp_collectives: soak of %ld collectives (seed %llu), %d ranks over %s: %s in %.1f s\n", soakCalls,
                static_cast<unsigned long long>(seed), nranks, transport.c_str(), rc == 0 ? "PASS" : "FAIL",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return rc;
  }
  int rc = runRanks(
      nranks,
      [&](int rank, int n, const hocclUniqueId& id) {
    if (hosts > 1)  // emulated hosts of n / hosts consecutive ranks each (read at init)
      setenv("HOCCL_HOSTID", ("mp-host-" + std::to_string(rank * hosts / n)).c_str(), 1);
    if (rank == gP2pOffRank) setenv("HOCCL_DEVICE_P2P", "0", 1);
    if (rank == gOneKernelOffRank) setenv("HOCCL_DEVICE_ONE_SHOT", "0", 1);
    hocclComm_t comm;
    MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
    if (gDevice) MP_CHECK(rank, hocclStreamCreate(&gStream));
    int bad = collectivesMatrix(comm, rank, n, large);
    if (bad) return fail(rank, std::to_string(bad) + " wrong elements in the collectives matrix");
    if (int e = checkDevicePath(rank, n)) return e;
    if (gCheckShmRelease)
      if (int e = checkShmReleased(comm, rank, n)) return e;
    if (gRegistered) {  // which path ran: peers' blocks stay mapped here (cached) only when zero copy ran
      const int mapped = peerBlocksMapped();
      if (gRegistered == 1 && n > 1 && mapped == 0)
        return fail(rank,
                    "every rank registered its buffers, but no peer's block was ever mapped: zero copy never ran");
      if (gRegistered == 2 && mapped != 0)
        return fail(rank, "only some ranks registered, yet " + std::to_string(mapped) +
                              " peer blocks are mapped: zero copy ran where it must fall back");
      MP_CHECK(rank, hocclCommDestroy(comm));
      return 0;
    }
    if (gDevice) {  // the host-buffer parts below are the host tests' business
      MP_CHECK(rank, hocclStreamDestroy(gStream));
      MP_CHECK(rank, hocclCommFinalize(comm));
      MP_CHECK(rank, hocclCommDestroy(comm));
      return 0;
    }
    if (int e = groupedP2P(comm, rank, n)) return e;
    if (int e = groupedAndUngrouped(comm, rank, n)) return e;
    if (int e = split(comm, rank, n)) return e;
    MP_CHECK(rank, hocclCommFinalize(comm));
    MP_CHECK(rank, hocclCommDestroy(comm));
    return 0;
      },
      600);
  std::printf("mp_collectives: %d ranks over %s%s: %s\n", nranks, transport.c_str(),
              gDevice ? " with device buffers" : "", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
