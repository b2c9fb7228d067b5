/// @file abi_collectives.cc
/// Four processes, compiled against NVIDIA's nccl.h and linked only against hoccl's libnccl.so.2, run every
/// collective on host memory with a null stream and compare with a reference computed in double precision:
/// all-reduce for every type and op (out-of-place and in-place), broadcast/Bcast, reduce, all-gather,
/// reduce-scatter, all-to-all, gather and scatter for every root, grouped send/recv, PreMulSum, split, buffer
/// registration, bad arguments (error, buffer untouched) and ncclGroupSimulateEnd (nothing runs).
#include <algorithm>

#include "abi_util.h"

using abi::check;
using abi::expectResult;
using abi::getElem;
using abi::setElem;
using abi::typeName;
using abi::typeSize;

namespace {

constexpr int kRanks = 4;
const size_t kCounts[] = {0, 1, 7, 1023, 12347};
const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

// Small integers chosen so that every partial result is exact in every type, even fp8 (see each case), which makes
// the comparison exact whatever order the library reduces in.
double inputValue(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i) {
  const bool u = abi::isUnsigned(t);
  const size_t h = i * 7919u + static_cast<size_t>(rank) * 104729u + 13u;
  switch (op) {
    case ncclSum: return u ? double(h % 3) : double(h % 5) - 2;                             // |partial sums| <= 8
    case ncclProd: return u ? double(1 + h % 2) : (h % 3 == 0 ? -1.0 : double(1 + h % 2));  // +-powers of two
    case ncclAvg: {  // +-1 per rank cancels over an even number of ranks: the average is the i term
      const double base = u ? double(1 + i % 3) : double(i % 5) - 2;
      return base + (rank % 2 ? 1 : -1);
    }
    default: return u ? double(h % 7) : double(h % 7) - 3;  // max, min
  }
}

double reduceRef(ncclDataType_t t, ncclRedOp_t op, size_t i) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < kRanks; ++r) {
    const double v = inputValue(t, op, r, i);
    switch (op) {
      case ncclSum:
      case ncclAvg: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      default: acc = std::min(acc, v); break;
    }
  }
  return op == ncclAvg ? acc / kRanks : acc;
}

// Data for the collectives that move rather than reduce: distinct per rank and element, exact in half and int8.
double moveValue(int rank, size_t i) { return double((rank * 1000 + i * 7) % 97) - 48; }

std::vector<char> buffer(ncclDataType_t t, size_t count) { return std::vector<char>(count * typeSize(t) + 1); }

void allReduceAllTypes(ncclComm_t comm, int rank) {
  for (ncclDataType_t t : kAllTypes) {
    for (int o = 0; o < ncclNumOps; ++o) {
      const ncclRedOp_t op = static_cast<ncclRedOp_t>(o);
      for (size_t count : kCounts) {
        auto send = buffer(t, count), recv = buffer(t, count);
        for (size_t i = 0; i < count; ++i) setElem(send.data(), t, i, inputValue(t, op, rank, i));
        std::vector<char> inplace = send;
        expectResult(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, nullptr), ncclSuccess,
                     "ncclAllReduce");
        expectResult(ncclAllReduce(inplace.data(), inplace.data(), count, t, op, comm, nullptr), ncclSuccess,
                     "ncclAllReduce in place");
        int bad = 0;
        for (size_t i = 0; i < count && bad < 3; ++i) {
          const double want = reduceRef(t, op, i);
          const double got = getElem(recv.data(), t, i), gotIn = getElem(inplace.data(), t, i);
          bad += !check(got == want && gotIn == want, "allreduce %s %s count %zu [%zu]: got %g / in place %g, want %g",
                        typeName(t), kOpNames[o], count, i, got, gotIn, want);
        }
      }
    }
  }
}

// Fills buf (count elements) with rank's move data starting at element offset `first` of its logical block.
void fillMove(std::vector<char>& buf, ncclDataType_t t, int rank, size_t count, size_t first = 0) {
  for (size_t i = 0; i < count; ++i) setElem(buf.data(), t, i, moveValue(rank, first + i));
}

int checkBlock(const void* buf, ncclDataType_t t, size_t at, int rank, size_t count, size_t first, const char* what) {
  for (size_t i = 0; i < count; ++i) {
    const double got = getElem(buf, t, at + i), want = moveValue(rank, first + i);
    if (!check(got == want, "%s %s count %zu: element %zu is %g, want %g", what, typeName(t), count, at + i, got, want))
      return 1;
  }
  return 0;
}

void rootedAndGathering(ncclComm_t comm, int rank, ncclDataType_t t, size_t count) {
  const size_t n = kRanks;
  for (int root = 0; root < kRanks; ++root) {
    auto send = buffer(t, count), recv = buffer(t, count);
    fillMove(send, t, rank, count);
    expectResult(ncclBroadcast(send.data(), recv.data(), count, t, root, comm, nullptr), ncclSuccess, "ncclBroadcast");
    checkBlock(recv.data(), t, 0, root, count, 0, "broadcast");
    fillMove(send, t, rank, count);
    expectResult(ncclBcast(send.data(), count, t, root, comm, nullptr), ncclSuccess, "ncclBcast");
    checkBlock(send.data(), t, 0, root, count, 0, "bcast");

    // reduce (sum of move data)
    fillMove(send, t, rank, count);
    std::fill(recv.begin(), recv.end(), 0);
    expectResult(ncclReduce(send.data(), recv.data(), count, t, ncclMax, root, comm, nullptr), ncclSuccess,
                 "ncclReduce");
    if (rank == root) {
      for (size_t i = 0; i < count; ++i) {
        double want = moveValue(0, i);
        for (int r = 1; r < kRanks; ++r) want = std::max(want, moveValue(r, i));
        if (!check(getElem(recv.data(), t, i) == want, "reduce max %s root %d [%zu]", typeName(t), root, i)) break;
      }
    }

    // gather (out of place, then in place: sendbuff = recvbuff + root * count on the root)
    auto all = buffer(t, n * count);
    fillMove(send, t, rank, count);
    expectResult(ncclGather(send.data(), all.data(), count, t, root, comm, nullptr), ncclSuccess, "ncclGather");
    if (rank == root)
      for (int r = 0; r < kRanks; ++r) checkBlock(all.data(), t, r * count, r, count, 0, "gather");
    auto allIn = buffer(t, n * count);
    std::vector<char> mine = buffer(t, count);
    fillMove(mine, t, rank, count);
    const void* gsend = rank == root ? static_cast<const void*>(allIn.data() + root * count * typeSize(t))
                                     : mine.data();
    if (rank == root) std::memcpy(allIn.data() + root * count * typeSize(t), mine.data(), count * typeSize(t));
    expectResult(ncclGather(gsend, allIn.data(), count, t, root, comm, nullptr), ncclSuccess, "ncclGather in place");
    if (rank == root)
      for (int r = 0; r < kRanks; ++r) checkBlock(allIn.data(), t, r * count, r, count, 0, "gather in place");

    // scatter: root's block r goes to rank r
    auto src = buffer(t, n * count);
    for (size_t i = 0; i < n * count; ++i) setElem(src.data(), t, i, moveValue(root, i));
    expectResult(ncclScatter(src.data(), recv.data(), count, t, root, comm, nullptr), ncclSuccess, "ncclScatter");
    checkBlock(recv.data(), t, 0, root, count, rank * count, "scatter");
    void* srecv = rank == root ? static_cast<void*>(src.data() + root * count * typeSize(t)) : recv.data();
    expectResult(ncclScatter(src.data(), srecv, count, t, root, comm, nullptr), ncclSuccess, "ncclScatter in place");
    checkBlock(srecv, t, 0, root, count, rank * count, "scatter in place");
  }
}

void gatheringAll(ncclComm_t comm, int rank, ncclDataType_t t, size_t count) {
  const size_t n = kRanks, es = typeSize(t);
  auto send = buffer(t, count), all = buffer(t, n * count);
  fillMove(send, t, rank, count);
  expectResult(ncclAllGather(send.data(), all.data(), count, t, comm, nullptr), ncclSuccess, "ncclAllGather");
  for (int r = 0; r < kRanks; ++r) checkBlock(all.data(), t, r * count, r, count, 0, "allgather");
  auto allIn = buffer(t, n * count);
  std::memcpy(allIn.data() + rank * count * es, send.data(), count * es);
  expectResult(ncclAllGather(allIn.data() + rank * count * es, allIn.data(), count, t, comm, nullptr), ncclSuccess,
               "ncclAllGather in place");
  for (int r = 0; r < kRanks; ++r) checkBlock(allIn.data(), t, r * count, r, count, 0, "allgather in place");

  // reduce-scatter (sum): rank r gets block r of the element-wise sum
  auto big = buffer(t, n * count), out = buffer(t, count);
  for (size_t i = 0; i < n * count; ++i) setElem(big.data(), t, i, inputValue(t, ncclSum, rank, i));
  std::vector<char> bigIn = big;
  expectResult(ncclReduceScatter(big.data(), out.data(), count, t, ncclSum, comm, nullptr), ncclSuccess,
               "ncclReduceScatter");
  expectResult(ncclReduceScatter(bigIn.data(), bigIn.data() + rank * count * es, count, t, ncclSum, comm, nullptr),
               ncclSuccess, "ncclReduceScatter in place");
  for (size_t i = 0; i < count; ++i) {
    const double want = reduceRef(t, ncclSum, rank * count + i);
    if (!check(getElem(out.data(), t, i) == want && getElem(bigIn.data(), t, rank * count + i) == want,
               "reducescatter %s count %zu [%zu]: got %g / %g, want %g", typeName(t), count, i,
               getElem(out.data(), t, i), getElem(bigIn.data(), t, rank * count + i), want))
      break;
  }

  // all-to-all: block j of rank r goes to block r of rank j
  auto a2aSend = buffer(t, n * count), a2aRecv = buffer(t, n * count);
  for (size_t i = 0; i < n * count; ++i) setElem(a2aSend.data(), t, i, moveValue(rank, i));
  expectResult(ncclAlltoAll(a2aSend.data(), a2aRecv.data(), count, t, comm, nullptr), ncclSuccess, "ncclAlltoAll");
  for (int r = 0; r < kRanks; ++r) checkBlock(a2aRecv.data(), t, r * count, r, count, rank * count, "alltoall");
}

void sendRecvRing(ncclComm_t comm, int rank, ncclDataType_t t, size_t count) {
  auto send = buffer(t, count), recv = buffer(t, count);
  fillMove(send, t, rank, count);
  const int next = (rank + 1) % kRanks, prev = (rank + kRanks - 1) % kRanks;
  expectResult(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
  expectResult(ncclRecv(recv.data(), count, t, prev, comm, nullptr), ncclSuccess, "ncclRecv");  // recv first: any
  expectResult(ncclSend(send.data(), count, t, next, comm, nullptr), ncclSuccess, "ncclSend");  // order works
  expectResult(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd");
  checkBlock(recv.data(), t, 0, prev, count, 0, "send/recv ring");
}

void preMulSum(ncclComm_t comm, int rank) {
  double scalar = 3.0;
  ncclRedOp_t op;
  if (!expectResult(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess,
                    "ncclRedOpCreatePreMulSum"))
    return;
  check(op >= ncclNumOps, "PreMulSum op %d is not a dynamic op", static_cast<int>(op));
  const size_t count = 1001;
  std::vector<double> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) send[i] = inputValue(ncclFloat64, ncclSum, rank, i);
  expectResult(ncclAllReduce(send.data(), recv.data(), count, ncclFloat64, op, comm, nullptr), ncclSuccess,
               "ncclAllReduce PreMulSum");
  for (size_t i = 0; i < count; ++i)
    if (!check(recv[i] == 3.0 * reduceRef(ncclFloat64, ncclSum, i), "premulsum [%zu]: %g", i, recv[i])) break;
  expectResult(ncclRedOpDestroy(op, comm), ncclSuccess, "ncclRedOpDestroy");
}

void splitAndQueries(ncclComm_t comm, int rank) {
  int n = -1, r = -1, dev = 0;
  expectResult(ncclCommCount(comm, &n), ncclSuccess, "ncclCommCount");
  expectResult(ncclCommUserRank(comm, &r), ncclSuccess, "ncclCommUserRank");
  expectResult(ncclCommCuDevice(comm, &dev), ncclSuccess, "ncclCommCuDevice");
  check(n == kRanks && r == rank, "count %d rank %d", n, r);

  // even and odd ranks, in reverse order (key = -rank)
  ncclComm_t sub = nullptr;
  if (!expectResult(ncclCommSplit(comm, rank % 2, -rank, &sub, nullptr), ncclSuccess, "ncclCommSplit")) return;
  expectResult(ncclCommCount(sub, &n), ncclSuccess, "ncclCommCount(sub)");
  expectResult(ncclCommUserRank(sub, &r), ncclSuccess, "ncclCommUserRank(sub)");
  check(n == 2 && r == (rank < 2 ? 1 : 0), "split: count %d rank %d", n, r);
  int32_t v = rank, sum = -1;
  expectResult(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, sub, nullptr), ncclSuccess, "ncclAllReduce(sub)");
  check(sum == (rank % 2 ? 1 + 3 : 0 + 2), "split allreduce: %d", sum);
  expectResult(ncclCommDestroy(sub), ncclSuccess, "ncclCommDestroy(sub)");

  // NOCOLOR leaves a rank out (null communicator)
  ncclComm_t part = reinterpret_cast<ncclComm_t>(&part);
  expectResult(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, rank, &part, nullptr), ncclSuccess,
               "ncclCommSplit NOCOLOR");
  if (rank == 0) check(part == nullptr, "NOCOLOR rank got a communicator");
  else if (part) ncclCommDestroy(part);
}

void registrationAndErrors(ncclComm_t comm, int rank) {
  std::vector<float> buf(256, 1.0f), out(256, -7.0f);
  void* handle = nullptr;
  expectResult(ncclCommRegister(comm, buf.data(), buf.size() * 4, &handle), ncclSuccess, "ncclCommRegister");
  expectResult(ncclAllReduce(buf.data(), out.data(), 256, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess,
               "ncclAllReduce on a registered buffer");
  check(out[255] == 4.0f, "registered allreduce gave %g", out[255]);
  expectResult(ncclCommDeregister(comm, handle), ncclSuccess, "ncclCommDeregister");
  expectResult(ncclCommDeregister(comm, handle), ncclInvalidArgument, "second ncclCommDeregister");
  check(std::strstr(ncclGetLastError(comm), "not registered") != nullptr, "deregister text: %s",
        ncclGetLastError(comm));

  // bad arguments: an error, a text, and the output untouched (every rank fails locally, nobody waits)
  std::fill(out.begin(), out.end(), -7.0f);
  expectResult(ncclAllReduce(buf.data(), out.data(), 256, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr),
               ncclInvalidArgument, "ncclAllReduce with datatype 99");
  check(std::strlen(ncclGetLastError(comm)) > 10, "no last-error text for a bad datatype");
  expectResult(ncclBroadcast(buf.data(), out.data(), 256, ncclFloat32, kRanks, comm, nullptr), ncclInvalidArgument,
               "ncclBroadcast with root = nranks");
  check(out[0] == -7.0f && out[255] == -7.0f, "a failed call changed the output");
  expectResult(ncclCommShrink(comm, &rank, 1, nullptr, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
               "ncclCommShrink with newcomm NULL");
  ncclComm_t shrunk = nullptr;
  int drop = kRanks - 1;
  expectResult(ncclCommShrink(comm, &drop, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidUsage,
               "ncclCommShrink excluding a rank");
  check(std::strstr(ncclGetLastError(comm), "ncclCommSplit") != nullptr, "shrink text: %s", ncclGetLastError(comm));

  // ncclGroupSimulateEnd estimates and runs nothing
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  std::fill(out.begin(), out.end(), -7.0f);
  expectResult(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
  expectResult(ncclAllReduce(buf.data(), out.data(), 256, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess,
               "ncclAllReduce in a simulated group");
  expectResult(ncclGroupSimulateEnd(&sim), ncclSuccess, "ncclGroupSimulateEnd");
  // NCCL reports microseconds: a 1 KiB all-reduce is priced above zero and well below a second.
  check(sim.estimatedTime > 0.0f && sim.estimatedTime < 1e6f, "estimatedTime %g us for 1 KiB", sim.estimatedTime);
  check(out[0] == -7.0f, "ncclGroupSimulateEnd ran the group");
  // A 16 MiB all-reduce (another path on one host) must be predicted to take longer than the 1 KiB one.
  std::vector<float> big(4 << 20, 1.0f), bigOut(4 << 20, -7.0f);
  ncclSimInfo_t simBig = NCCL_SIM_INFO_INITIALIZER;
  expectResult(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
  expectResult(ncclAllReduce(big.data(), bigOut.data(), big.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess,
               "ncclAllReduce of 16 MiB in a simulated group");
  expectResult(ncclGroupSimulateEnd(&simBig), ncclSuccess, "ncclGroupSimulateEnd");
  check(simBig.estimatedTime > sim.estimatedTime, "16 MiB predicted %g us, 1 KiB %g us", simBig.estimatedTime,
        sim.estimatedTime);
  check(bigOut[0] == -7.0f, "ncclGroupSimulateEnd ran the 16 MiB group");
}

void runRank(int r, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, kRanks, id, r), ncclSuccess, "ncclCommInitRank")) return;
  allReduceAllTypes(comm, r);
  for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclFloat16, ncclFloat64, ncclInt64}) {
    for (size_t count : kCounts) {
      rootedAndGathering(comm, r, t, count);
      gatheringAll(comm, r, t, count);
      sendRecvRing(comm, r, t, count);
    }
  }
  preMulSum(comm, r);
  splitAndQueries(comm, r);
  registrationAndErrors(comm, r);
  expectResult(ncclCommFinalize(comm), ncclSuccess, "ncclCommFinalize");
  expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
}

}  // namespace

int main() {
  const int bad = abi::runRanks(kRanks, 240, runRank);
  std::printf("%d passed, %d failed\n", kRanks - bad, bad);
  return bad == 0 ? 0 : 1;
}
