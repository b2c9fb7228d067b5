// The overlapped collectives and the ring shift (issue 18, docs/overlap.md) on real forked ranks:
//  1. hocclAllGatherOverlap, every type, counts 0/1/7/1001, separate and in place: onBlock is called once per rank,
//     own block first, then rank-1, rank-2, ... (the ring on one host), each time with the block complete at its
//     place in recvbuff; the result equals hocclAllGather's;
//  2. hocclReduceScatterOverlap, every type, sum/prod/max/min/avg, the same counts, separate and in place: produce is
//     asked for rank-1, rank-2, ..., own block last; the result equals the float64 reference within the type's
//     tolerance, as hocclReduceScatter's does; a PreMulSum op (scalar 3) scales every produced block;
//  3. hocclRingShift for k = 0, 1, -1, 2, n, n+1, -n-3, INT_MAX, INT_MIN, counts 0/5/100000, in place or not; the
//     nonblocking form (hocclRingShiftStart + hocclTest + hocclWait) in a double-buffered loop of n shifts by 1;
//  4. misuse: NULL callbacks, every overlap call inside a group (refused; the group's other calls run), a hoccl
//     call from inside a callback, a call while a ring shift is in flight: clear errors, nothing broken;
//  5. failing callbacks (a non-zero return on one rank; a C++ exception on another): that rank fails with a message
//     naming the callback, every other rank fails too (never a hang), within seconds.
//
// Usage: mp_overlap --ranks N [--transport shm|tcp]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "data.h"
#include "harness.h"
#include "kernels/cpu/reduce.h"

using namespace hoccl::test;

namespace {

using hoccl::kernels::typeSize;

const uint64_t kSeed = 18;

// ---- 1. all-gather ----

struct AgSeen {
  int rank, n;
  size_t count;
  hocclDataType_t dt;
  const char* recv;
  std::vector<int> order;
  int wrong = 0;
};

int onBlock(void* user, int src, const void* block, size_t count) {
  auto* s = static_cast<AgSeen*>(user);
  s->order.push_back(src);
  if (count != s->count) ++s->wrong;
  if (count && block != s->recv + src * s->count * typeSize(s->dt)) ++s->wrong;
  if (count) {
    std::vector<double> want = makeInput(kSeed, src, count, s->dt, hocclSum);
    std::vector<double> got = load(block, count, s->dt);
    for (size_t i = 0; i < count; ++i) s->wrong += got[i] != want[i];
  }
  return 0;
}

int allGatherCases(hocclComm_t comm, int rank, int n) {
  for (int t = 0; t < hocclNumTypes; ++t)
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001)})
      for (bool inPlace : {false, true}) {
        const auto dt = static_cast<hocclDataType_t>(t);
        const size_t elem = typeSize(dt);
        std::vector<char> in(count * elem + 1), out(count * n * elem + 1, 0x5a), plain(count * n * elem + 1);
        std::vector<double> mine = makeInput(kSeed, rank, count, dt, hocclSum);
        store(mine, in.data(), dt);
        const void* send = in.data();
        if (inPlace) {
          store(mine, out.data() + rank * count * elem, dt);
          send = out.data() + rank * count * elem;
        }
        AgSeen seen{rank, n, count, dt, out.data()};
        MP_CHECK(rank, hocclAllGatherOverlap(send, out.data(), count, dt, comm, nullptr, onBlock, &seen));
        MP_CHECK(rank, hocclAllGather(in.data(), plain.data(), count, dt, comm, nullptr));
        const std::string what = "AllGatherOverlap type " + std::to_string(t) + " count " + std::to_string(count) +
                                 (inPlace ? " in place" : "");
        if (seen.wrong) return fail(rank, what + ": " + std::to_string(seen.wrong) + " wrong elements in callbacks");
        std::vector<int> want;
        for (int i = 0; i < n; ++i) want.push_back(((rank - i) % n + n) % n);
        if (seen.order != want) return fail(rank, what + ": blocks came in the wrong order");
        if (count && std::memcmp(out.data(), plain.data(), count * n * elem) != 0)
          return fail(rank, what + ": result differs from hocclAllGather");
      }
  return 0;
}

// ---- 2. reduce-scatter ----

struct RsProduce {
  int rank;
  size_t count;
  hocclDataType_t dt;
  hocclRedOp_t op;
  char* send;
  const std::vector<double>* input;  // the rank's full input (8 blocks, enough for up to 8 ranks)
  std::vector<int> order;
  int wrong = 0;
};

int produce(void* user, int dst, void* block, size_t count) {
  auto* p = static_cast<RsProduce*>(user);
  p->order.push_back(dst);
  if (count != p->count || (count && block != p->send + dst * p->count * typeSize(p->dt))) ++p->wrong;
  if (!count) return 0;
  // Only this block of the rank's full input (the same data hocclReduceScatter gets).
  const std::vector<double>& all = *p->input;
  store(std::vector<double>(all.begin() + dst * count, all.begin() + (dst + 1) * count), block, p->dt);
  return 0;
}

int reduceScatterCases(hocclComm_t comm, int rank, int n) {
  for (int t = 0; t < hocclNumTypes; ++t)
    for (hocclRedOp_t op : {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg})
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001)})
        for (bool inPlace : {false, true}) {
          const auto dt = static_cast<hocclDataType_t>(t);
          const size_t elem = typeSize(dt);
          std::vector<char> work(count * n * elem + 1, static_cast<char>(0xff)), out(count * elem + 1, 0x5a);
          std::vector<char> full(count * n * elem + 1), plain(count * elem + 1);
          std::vector<double> input = makeInput(kSeed, rank, count * 8, dt, op);  // 8 >= n: blocks for up to 8 ranks
          store(std::vector<double>(input.begin(), input.begin() + count * n), full.data(), dt);
          void* recv = inPlace ? work.data() + rank * count * elem : out.data();
          RsProduce p{rank, count, dt, op, work.data(), &input};
          MP_CHECK(rank, hocclReduceScatterOverlap(work.data(), recv, count, dt, op, comm, nullptr, produce, &p));
          MP_CHECK(rank, hocclReduceScatter(full.data(), plain.data(), count, dt, op, comm, nullptr));
          const std::string what = "ReduceScatterOverlap type " + std::to_string(t) + " op " + std::to_string(op) +
                                   " count " + std::to_string(count) + (inPlace ? " in place" : "");
          if (p.wrong) return fail(rank, what + ": produce got a wrong block or pointer");
          std::vector<int> want;
          for (int i = 1; i <= n; ++i) want.push_back(((rank - i) % n + n) % n);
          if (p.order != want) return fail(rank, what + ": blocks were asked for in the wrong order");
          // The float64 reference over every rank's input.
          std::vector<std::vector<double>> inputs(n);
          for (int r = 0; r < n; ++r) inputs[r] = makeInput(kSeed, r, count * 8, dt, op);
          std::vector<double> expect(count);
          for (size_t e = 0; e < count; ++e) {
            double acc = inputs[0][rank * count + e];
            for (int r = 1; r < n; ++r) acc = combine(acc, inputs[r][rank * count + e], op);
            expect[e] = finish(acc, n, op, dt);
          }
          std::vector<double> got = load(recv, count, dt), base = load(plain.data(), count, dt);
          for (size_t e = 0; e < count; ++e) {
            if (!close(got[e], expect[e], dt, op))
              return fail(rank, what + ": element " + std::to_string(e) + " is " + std::to_string(got[e]) +
                                    ", the reference " + std::to_string(expect[e]));
            if (!close(base[e], expect[e], dt, op)) return fail(rank, what + ": hocclReduceScatter itself is off");
          }
        }
  return 0;
}

// PreMulSum: each produced block is scaled by the scalar (here 3, held by value) before the sum.
int preMulSumCase(hocclComm_t comm, int rank, int n) {
  const size_t count = 257;
  for (hocclDataType_t dt : {hocclFloat, hocclInt32, hocclFloat64}) {
    const size_t elem = typeSize(dt);
    std::vector<char> scalar(elem), work(count * n * elem), out(count * elem);
    store({3.0}, scalar.data(), dt);
    hocclRedOp_t op;
    MP_CHECK(rank, hocclRedOpCreatePreMulSum(&op, scalar.data(), dt, hocclScalarHostImmediate, comm));
    std::vector<double> input = makeInput(kSeed, rank, count * 8, dt, hocclSum);
    RsProduce p{rank, count, dt, hocclSum, work.data(), &input};
    MP_CHECK(rank, hocclReduceScatterOverlap(work.data(), out.data(), count, dt, op, comm, nullptr, produce, &p));
    MP_CHECK(rank, hocclRedOpDestroy(op, comm));
    std::vector<double> got = load(out.data(), count, dt);
    std::vector<std::vector<double>> inputs(n);
    for (int r = 0; r < n; ++r) inputs[r] = makeInput(kSeed, r, count * 8, dt, hocclSum);
    for (size_t e = 0; e < count; ++e) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += 3.0 * inputs[r][rank * count + e];
      if (!close(got[e], want, dt, hocclSum))
        return fail(rank, "ReduceScatterOverlap PreMulSum type " + std::to_string(dt) + ": element " +
                              std::to_string(e) + " is " + std::to_string(got[e]) + ", want " + std::to_string(want));
    }
  }
  return 0;
}

// ---- 3. ring shift ----

int ringShiftCases(hocclComm_t comm, int rank, int n) {
  for (long long k : {0LL, 1LL, -1LL, 2LL, static_cast<long long>(n), n + 1LL, -n - 3LL,
                      static_cast<long long>(INT_MAX), static_cast<long long>(INT_MIN)})
    for (size_t count : {size_t(0), size_t(5), size_t(100000)})
      for (hocclDataType_t dt : {hocclFloat, hocclInt8, hocclFloat64, hocclBfloat16})
        for (bool inPlace : {false, true}) {
          const size_t elem = typeSize(dt);
          std::vector<char> a(count * elem + 1), b(count * elem + 1, 0x5a);
          store(makeInput(kSeed + 1, rank, count, dt, hocclSum), a.data(), dt);
          void* recv = inPlace ? a.data() : b.data();
          MP_CHECK(rank, hocclRingShift(a.data(), recv, count, dt, static_cast<int>(k), comm, nullptr));
          const int sh = static_cast<int>(((k % n) + n) % n), from = (rank - sh + n) % n;
          if (load(recv, count, dt) != makeInput(kSeed + 1, from, count, dt, hocclSum))
            return fail(rank, "RingShift k=" + std::to_string(k) + " count " + std::to_string(count) + " type " +
                                  std::to_string(dt) + (inPlace ? " in place" : "") + ": wrong data");
        }
  // Double-buffered: n shifts by 1 while "computing" on the current buffer; the blocks come back home.
  const size_t count = 1 << 16;
  std::vector<float> buf[2] = {std::vector<float>(count), std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) buf[0][i] = static_cast<float>(rank * 100000 + i % 1000);
  double sum = 0;
  for (int step = 0; step < n; ++step) {
    hocclRequest_t req = nullptr;
    MP_CHECK(rank, hocclRingShiftStart(buf[step % 2].data(), buf[(step + 1) % 2].data(), count, hocclFloat, 1, comm,
                                       nullptr, &req));
    // While it is in flight: the communicator refuses other work and its destruction, the send buffer may be read.
    float x = 0, y = 0;
    if (hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr) != hocclInvalidUsage)
      return fail(rank, "an all-reduce during a ring shift in flight was not refused");
    if (hocclCommDestroy(comm) != hocclInvalidUsage)
      return fail(rank, "hocclCommDestroy during a ring shift in flight was not refused");
    for (float v : buf[step % 2]) sum += v;
    int done = 0;
    MP_CHECK(rank, hocclTest(req, &done));
    MP_CHECK(rank, hocclWait(req));
    const int from = ((rank - step - 1) % n + n) % n;
    if (buf[(step + 1) % 2][7] != static_cast<float>(from * 100000 + 7))
      return fail(rank, "double-buffered ring shift step " + std::to_string(step) + ": wrong block");
  }
  if (buf[n % 2][123] != static_cast<float>(rank * 100000 + 123))
    return fail(rank, "after n shifts by 1 the block is not back home");
  double want = 0;
  for (int r = 0; r < n; ++r) want += static_cast<double>(r) * 100000 * count;
  for (size_t i = 0; i < count; ++i) want += static_cast<double>(i % 1000) * n;
  if (std::fabs(sum - want) > 1e-6 * want) return fail(rank, "the compute on the blocks in flight saw wrong data");
  return 0;
}

// ---- 4. misuse ----

hocclComm_t gComm = nullptr;
hocclResult_t gInner = hocclSuccess;

int producesOnes(void*, int, void* block, size_t count) {
  std::fill_n(static_cast<float*>(block), count, 1.f);
  return 0;
}

int callsHoccl(void*, int, const void*, size_t) {
  float x = 0, y = 0;
  gInner = hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, gComm, nullptr);
  return 0;
}

int misuse(hocclComm_t comm, int rank, int n) {
  std::vector<float> in(4, 1.f), out(4 * n);
  if (hocclAllGatherOverlap(in.data(), out.data(), 4, hocclFloat, comm, nullptr, nullptr, nullptr) !=
      hocclInvalidArgument)
    return fail(rank, "a NULL onBlock was not refused");
  if (hocclReduceScatterOverlap(out.data(), in.data(), 4, hocclFloat, hocclSum, comm, nullptr, nullptr, nullptr) !=
      hocclInvalidArgument)
    return fail(rank, "a NULL produce was not refused");
  if (hocclRingShiftStart(in.data(), out.data(), 4, hocclFloat, 1, comm, nullptr, nullptr) != hocclInvalidArgument)
    return fail(rank, "a NULL request was not refused");
  if (hocclRingShift(out.data(), out.data() + 1, 4, hocclFloat, 1, comm, nullptr) != hocclInvalidArgument)
    return fail(rank, "partly overlapping ring shift buffers were not refused");
  // Inside a group every overlap call is refused (hocclInvalidUsage, saying so), and the group's other calls still
  // run at hocclGroupEnd.
  {
    float gx = static_cast<float>(rank + 1), gy = 0;
    hocclRequest_t request = nullptr;
    MP_CHECK(rank, hocclGroupStart());
    MP_CHECK(rank, hocclAllReduce(&gx, &gy, 1, hocclFloat, hocclSum, comm, nullptr));
    const hocclResult_t grouped[4] = {hocclRingShift(in.data(), out.data(), 4, hocclFloat, 1, comm, nullptr),
                                      hocclRingShiftStart(in.data(), out.data(), 4, hocclFloat, 1, comm, nullptr,
                                                          &request),
                                      hocclAllGatherOverlap(in.data(), out.data(), 4, hocclFloat, comm, nullptr,
                                                            callsHoccl, nullptr),
                                      hocclReduceScatterOverlap(out.data(), in.data(), 4, hocclFloat, hocclSum, comm,
                                                                nullptr, producesOnes, nullptr)};
    const std::string message = hocclGetLastError(nullptr);
    MP_CHECK(rank, hocclGroupEnd());
    const char* names[4] = {"hocclRingShift", "hocclRingShiftStart", "hocclAllGatherOverlap",
                            "hocclReduceScatterOverlap"};
    for (int i = 0; i < 4; ++i)
      if (grouped[i] != hocclInvalidUsage) return fail(rank, std::string(names[i]) + " inside a group was not refused");
    if (request != nullptr) return fail(rank, "a refused hocclRingShiftStart left a request");
    if (message.find("cannot be part of a group") == std::string::npos)
      return fail(rank, "the refusal inside a group does not say why: " + message);
    if (gy != static_cast<float>(n * (n + 1) / 2))
      return fail(rank, "the all-reduce of the group with refused overlap calls did not run");
  }
  gComm = comm;
  MP_CHECK(rank, hocclAllGatherOverlap(in.data(), out.data(), 4, hocclFloat, comm, nullptr, callsHoccl, nullptr));
  if (gInner != hocclInvalidUsage ||
      std::string(hocclGetLastError(nullptr)).find("inside one of its") == std::string::npos)
    return fail(rank, "a hoccl call from inside a callback was not refused as it should: " +
                          std::string(hocclGetLastError(nullptr)));
  // The communicator still works.
  float x = 1, y = 0;
  MP_CHECK(rank, hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr));
  if (y != static_cast<float>(n)) return fail(rank, "the communicator is broken after refused calls");
  return 0;
}

// ---- 5. failing callbacks ----

int failsOnSecond(void* user, int, const void*, size_t) {
  int* calls = static_cast<int*>(user);
  return ++*calls == 2 ? 7 : 0;
}

int throwsOnFirst(void*, int, void*, size_t) { throw std::runtime_error("out of cheese"); }

int producesZeros(void*, int, void* block, size_t count) {
  std::memset(block, 0, count * sizeof(float));
  return 0;
}

// The culprit's callback fails; every rank's call must fail within `limit` seconds; the culprit's message says why.
int failing(hocclComm_t comm, int rank, int n, int culprit, bool reduceScatter) {
  const size_t count = 1 << 18;
  std::vector<float> in(count * n, 1.f), out(count * n);
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  hocclResult_t rc = reduceScatter
                         ? hocclReduceScatterOverlap(in.data(), out.data(), count, hocclFloat, hocclSum, comm, nullptr,
                                                     rank == culprit ? throwsOnFirst : producesZeros, nullptr)
                         : hocclAllGatherOverlap(
                               in.data(), out.data(), count, hocclFloat, comm, nullptr,
                               rank == culprit ? failsOnSecond : [](void*, int, const void*, size_t) { return 0; },
                               &calls);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string msg = hocclGetLastError(nullptr);
  const std::string what = reduceScatter ? "a throwing produce" : "an onBlock returning 7";
  if (rc == hocclSuccess && rank == culprit) return fail(rank, what + ": the culprit's call succeeded");
  if (secs > 10) return fail(rank, what + ": the failure took " + std::to_string(secs) + " s to arrive");
  if (rank == culprit) {
    const std::string want = reduceScatter ? "produce callback threw 'out of cheese'" : "onBlock callback returned 7";
    if (rc != hocclInvalidUsage || msg.find(want) == std::string::npos)
      return fail(rank, what + ": the culprit's error is not clear (" + std::to_string(rc) + "): " + msg);
  } else {
    // A peer may have finished its part before the culprit stopped (all its data had arrived): then its next call
    // must fail. Either way the error names the culprit, within seconds.
    std::string seen = msg;
    if (rc == hocclSuccess) {
      float x = 1, y = 0;
      const auto again = std::chrono::steady_clock::now();
      if (hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr) == hocclSuccess)
        return fail(rank, what + ": neither the call nor the next one failed");
      if (std::chrono::steady_clock::now() - again > std::chrono::seconds(10))
        return fail(rank, what + ": the next call took more than 10 s to fail");
      seen = hocclGetLastError(nullptr);
    }
    if (seen.find("rank " + std::to_string(culprit)) == std::string::npos)
      return fail(rank, what + ": the error does not name rank " + std::to_string(culprit) + ": " + seen);
  }
  hocclResult_t async = hocclSuccess;
  MP_CHECK(rank, hocclCommGetAsyncError(comm, &async));
  if (async == hocclSuccess) return fail(rank, what + ": the communicator does not report the failure");
  MP_CHECK(rank, hocclCommAbort(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 3;
  std::string transport = "shm";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) nranks = std::atoi(argv[++i]);
    else if (a == "--transport" && i + 1 < argc) transport = argv[++i];
  }
  if (transport == "tcp") setenv("HOCCL_SHM_DISABLE", "1", 1);
  else unsetenv("HOCCL_SHM_DISABLE");
  setenv("HOCCL_TIMEOUT", "20", 0);
  int rc = runRanks(
      nranks,
      [&](int rank, int n, const hocclUniqueId& id) {
    hocclComm_t comm, spareA = nullptr, spareB = nullptr;
    MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
    MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &spareA, nullptr));
    MP_CHECK(rank, hocclCommSplit(comm, 0, rank, &spareB, nullptr));
    if (int e = allGatherCases(comm, rank, n)) return e;
    if (int e = reduceScatterCases(comm, rank, n)) return e;
    if (int e = preMulSumCase(comm, rank, n)) return e;
    if (int e = ringShiftCases(comm, rank, n)) return e;
    if (int e = misuse(comm, rank, n)) return e;
    MP_CHECK(rank, hocclCommFinalize(comm));
    MP_CHECK(rank, hocclCommDestroy(comm));
    if (n > 1) {
      if (int e = failing(spareA, rank, n, n - 1, false)) return e;
      if (int e = failing(spareB, rank, n, 0, true)) return e;
    } else {
      MP_CHECK(rank, hocclCommDestroy(spareA));
      MP_CHECK(rank, hocclCommDestroy(spareB));
    }
    return 0;
      },
      300);
  std::printf("mp_overlap: %d ranks over %s: %s\n", nranks, transport.c_str(), rc == 0 ? "PASS" : "FAIL");
  return rc;
}
