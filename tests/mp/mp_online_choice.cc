// The online choice (src/comm/online_choice.h) on real processes over shared memory, one host:
//   1. all-gather, 2 and 3 ranks, out of place and in place (HOCCL_TUNE_ONLINE unset: the default): the shape is
//      chosen online between the tuner's pick and the single copy; kCalls calls with fresh random data each, every
//      result checked against the inputs; both variants ran (the exploration block); every rank ran the same variant
//      on every call and holds the same agreed estimates, bit for bit;
//   2. all-reduce of floats, 2 ranks, sum: chosen online (a + b has one result whichever variant runs), and every
//      result equals, bit for bit, the float sum of the two inputs, on calls of both variants;
//   3. 3 ranks: all-reduce (out of place, in place, and on registered buffers, which the single copy reaches through
//      mappings) and reduce-scatter of float sums, float averages and int32 sums are chosen online by default (the
//      single copy adds in the order of the schedule it stands in for, kernels/fold_order.h); with
//      HOCCL_TUNE_ONLINE=2 (every shape) too;
//   4. 4 ranks, all-reduce of 4 MiB: the pair is the single copy and HO-Ring in chunks, whose fold has a segment per
//      part of every chunk (the test fails if the model ever pairs another schedule there: choose another size);
//   every reduction's inputs repeat every kPeriod calls, and every result equals the first result of the same inputs
//   bit for bit, whichever variant ran, and matches a double-precision reference within float rounding (2-rank float
//   sums and int32 sums: exactly); where the single copy follows a fold, every element equals its inputs added in
//   that order (on every call of the 400 KB shapes, on the first call of each run of one variant at 4 MiB);
//   5. shapes whose every variant gives the same bits are chosen among three (the third: the best schedule of
//      another algorithm, algo::otherSchedule): the 2-rank float sums of run 1, and with a model file of small caches
//      (HOCCL_MODEL_FILE) a 2-rank 4 MiB float sum whose schedule the cache term decides (HO-Ring in 256 KiB chunks);
//      every variant ran, every result exact;
//   6. HOCCL_TUNE_ONLINE=0 and HOCCL_ALGO=ring: nothing is chosen online.
// A machine where the single copy cannot run (cross-memory attach refused) has no runner-up: the test says so and
// exits 77 (skipped).
//
// Usage: mp_online_choice
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "comm/communicator.h"
#include "data.h"
#include "harness.h"

using namespace hoccl::test;

namespace {

constexpr int kSkip = 77;
// Calls per shape: past the exploration (kStartAfter + kBlock) and a confirmation (a winner's block and another of
// the runner-up) if the runner-up wins the first agreement. Re-checks come later; the unit tests drive them.
constexpr int kCalls = static_cast<int>(hoccl::OnlineChoice::kStartAfter) + 3 * hoccl::OnlineChoice::kBlock + 8;

// The same random floats on every rank for (call, rank, i): any rank can compute any other's input.
std::vector<float> inputOf(int call, int rank, size_t count, bool integral) {
  std::mt19937 rng(static_cast<unsigned>(call * 7919 + rank * 104729 + 17));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> whole(-1000, 1000);
  std::vector<float> v(count);
  for (float& x : v) x = integral ? static_cast<float>(whole(rng)) : value(rng);
  return v;
}

// Every rank's copy of `bytes` bytes through an all-gather of chars (a small call: never chosen online).
std::vector<std::string> gatherBytes(hocclComm_t comm, int nranks, const void* data, size_t bytes) {
  std::vector<char> all(bytes * nranks);
  if (hocclAllGather(data, all.data(), bytes, hocclChar, comm, nullptr) != hocclSuccess) return {};
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r) out.emplace_back(all.data() + r * bytes, bytes);
  return out;
}

// Checks that every variant ran and that every rank ran the same ones and agreed on the same estimates.
int checkAgreement(int rank, int nranks, hocclComm_t comm, const std::string& variants,
                   const hoccl::OnlineChoice& choice, const char* what) {
  for (int v = 0; v < choice.variants(); ++v)
    if (variants.find(static_cast<char>('0' + v)) == std::string::npos)
      return fail(rank, std::string(what) + ": variant " + std::to_string(v) + " never ran: " + variants);
  const std::vector<std::string> all = gatherBytes(comm, nranks, variants.data(), variants.size());
  double est[hoccl::OnlineChoice::kMaxVariants] = {};
  for (int v = 0; v < choice.variants(); ++v) est[v] = choice.estimates()[v];
  const std::vector<std::string> estimates = gatherBytes(comm, nranks, est, sizeof(est));
  if (all.size() != static_cast<size_t>(nranks) || estimates.size() != all.size())
    return fail(rank, std::string(what) + ": gathering the variants failed");
  for (int r = 1; r < nranks; ++r) {
    if (all[r] != all[0])
      return fail(rank, std::string(what) + ": rank " + std::to_string(r) + " ran other variants than rank 0:\n" +
                            all[r] + "\n" + all[0]);
    if (estimates[r] != estimates[0])
      return fail(rank, std::string(what) + ": rank " + std::to_string(r) + " agreed on other estimates");
  }
  if (choice.agreements() < 1) return fail(rank, std::string(what) + ": no agreement after the exploration");
  return 0;
}

int allGatherPart(int rank, int nranks, hocclComm_t comm, bool inPlace) {
  hoccl::Communicator& c = *comm->impl;
  const size_t count = 40009;  // 160 KB per rank: the single copy's all-gather range (from 32 KiB)
  std::vector<float> recv(count * nranks), send(count);
  std::string variants;
  hoccl::OnlineChoice* choice = nullptr;
  for (int call = 0; call < kCalls; ++call) {
    const std::vector<float> mine = inputOf(call, rank, count, false);
    float* sendbuf = inPlace ? recv.data() + rank * count : send.data();
    std::memcpy(sendbuf, mine.data(), count * sizeof(float));
    MP_CHECK(rank, hocclAllGather(sendbuf, recv.data(), count, hocclFloat, comm, nullptr));
    choice = c.lastOnlineChoice();
    if (!choice) {
      for (const auto& s : c.shortcuts())
        if (std::string(s->name()) == "single_copy") return fail(rank, "the all-gather is not chosen online");
      if (rank == 0) std::printf("skipped: the single copy cannot run here (cross-memory attach refused?)\n");
      return kSkip;
    }
    variants += static_cast<char>('0' + choice->variant());
    for (int r = 0; r < nranks; ++r) {
      const std::vector<float> want = inputOf(call, r, count, false);
      if (std::memcmp(recv.data() + r * count, want.data(), count * sizeof(float)) != 0)
        return fail(rank, "all-gather call " + std::to_string(call) + " (variant " +
                              std::to_string(choice->variant()) + "): rank " + std::to_string(r) + "'s block differs");
    }
  }
  return checkAgreement(rank, nranks, comm, variants, *choice, inPlace ? "all-gather in place" : "all-gather");
}

// Reductions of kCalls calls (all-reduce, or reduce-scatter of `count` per rank), sums or averages. Inputs repeat
// every kPeriod calls, and a call's result must equal, bit for bit, the first result of the same inputs: whichever
// variant ran, on every call. `exact`: bit for bit the float sum in rank order (2 ranks) or the integer sum;
// otherwise within float rounding of the double sum (or average). Every shape must be chosen online.
struct Reduction {
  hocclDataType_t dtype = hocclFloat;
  hocclRedOp_t op = hocclSum;
  bool reduceScatter = false;
  bool inPlace = false;
  bool exact = false;
  const char* what = "all-reduce";
  bool registered = false;  ///< buffers of hocclMemAlloc registered with the communicator: the single copy's zero copy
  bool everyShape = false;  ///< HOCCL_TUNE_ONLINE=2
  size_t count = 100003;    ///< elements per rank's result (400 KB: the single copy's all-reduce range, from 256 KiB)
  bool chunkedFold = false;  ///< the schedule of the pair must be HO-Ring in chunks (more fold segments than ranks)
  int variants = 0;          ///< the variants the shape must be chosen among (0: any)
  int calls = kCalls;        ///< calls of the shape
};

// A buffer for reductionPart: ordinary, or registered memory of hocclMemAlloc.
class TestBuffer {
 public:
  TestBuffer(hocclComm_t comm, size_t bytes, bool registered) : comm_(comm), plain_(registered ? 0 : bytes) {
    data_ = plain_.data();
    if (!registered) return;
    if (hocclMemAlloc(&data_, bytes) != hocclSuccess || hocclCommRegister(comm, data_, bytes, &handle_) != hocclSuccess)
      ok_ = false;
  }
  ~TestBuffer() {
    if (handle_) hocclCommDeregister(comm_, handle_);
    if (plain_.empty() && data_) hocclMemFree(data_);
  }
  char* data() const { return static_cast<char*>(data_); }
  bool ok() const { return ok_; }

 private:
  hocclComm_t comm_;
  std::vector<char> plain_;
  void* data_ = nullptr;
  void* handle_ = nullptr;
  bool ok_ = true;
};

Reduction reduction(hocclDataType_t dtype, hocclRedOp_t op, const char* what) {
  Reduction r;
  r.dtype = dtype;
  r.op = op;
  r.what = what;
  return r;
}

constexpr int kPeriod = 5;

int reductionPart(int rank, int nranks, hocclComm_t comm, const Reduction& how) {
  hoccl::Communicator& c = *comm->impl;
  const size_t count = how.count;
  const size_t total = how.reduceScatter ? count * nranks : count;
  const bool integral = how.dtype == hocclInt32;
  const size_t elem = integral ? sizeof(int32_t) : sizeof(float);
  TestBuffer sendBuffer(comm, total * elem, how.registered), recvBuffer(comm, count * elem, how.registered);
  if (!sendBuffer.ok() || !recvBuffer.ok())
    return fail(rank, std::string(how.what) + ": allocating or registering failed");
  std::vector<std::vector<char>> firstResult(kPeriod);
  std::vector<std::vector<std::vector<char>>> typedOf(kPeriod);  // per data class, every rank's input as bytes
  std::string variants;
  size_t folded = 0;
  for (int call = 0; call < how.calls; ++call) {
    const int data = call % kPeriod;
    if (typedOf[data].empty()) {
      typedOf[data].assign(nranks, std::vector<char>(total * elem));
      for (int r = 0; r < nranks; ++r) {
        const std::vector<float> values = inputOf(data, r, total, integral);
        for (size_t i = 0; i < total; ++i) {
          const int32_t whole = static_cast<int32_t>(values[i]);
          std::memcpy(typedOf[data][r].data() + i * elem, integral ? static_cast<const void*>(&whole) : &values[i],
                      elem);
        }
      }
    }
    const std::vector<std::vector<char>>& typed = typedOf[data];
    char* sendbuf = sendBuffer.data();
    char* recvbuf = how.inPlace ? sendbuf + (how.reduceScatter ? rank * count * elem : 0) : recvBuffer.data();
    std::memcpy(sendbuf, typed[rank].data(), total * elem);
    if (how.reduceScatter)
      MP_CHECK(rank, hocclReduceScatter(sendbuf, recvbuf, count, how.dtype, how.op, comm, nullptr));
    else
      MP_CHECK(rank, hocclAllReduce(sendbuf, recvbuf, count, how.dtype, how.op, comm, nullptr));
    hoccl::OnlineChoice* choice = c.lastOnlineChoice();
    if (!choice) return fail(rank, std::string(how.what) + ": not chosen online");
    if (how.variants && choice->variants() != how.variants)
      return fail(rank, std::string(how.what) + ": chosen among " + std::to_string(choice->variants()) +
                            " variants, expected " + std::to_string(how.variants));
    variants += static_cast<char>('0' + choice->variant());
    const char* result = recvbuf;
    if (firstResult[data].empty()) {
      firstResult[data].assign(result, result + count * elem);
    } else if (std::memcmp(firstResult[data].data(), result, count * elem) != 0) {
      return fail(rank, std::string(how.what) + " call " + std::to_string(call) + " (variant " +
                            std::to_string(choice->variant()) + ", variants so far " + variants +
                            "): the same inputs as call " + std::to_string(data) + " gave other bits");
    }
    const size_t first = how.reduceScatter ? rank * count : 0;
    // Where the single copy follows the schedule's fold, every element is the fold of its inputs, bit for bit: on
    // every call of small shapes, on the first call of each run of one variant of large ones.
    const auto fold = c.lastFold();
    if (fold && how.chunkedFold && fold->segments.size() <= static_cast<size_t>(nranks))
      return fail(rank, std::string(how.what) + ": the pair's schedule is not HO-Ring in chunks (" +
                            std::to_string(fold->segments.size()) + " fold segments); choose another size");
    const bool runStarts = variants.size() < 2 || variants[variants.size() - 2] != variants.back();
    if (fold && (count <= 100003 || runStarts)) {
      ++folded;
      for (size_t i = 0; i < count; ++i)
        if (std::memcmp(foldedElement(*fold, typed, first + i, how.dtype, how.op, nranks).data(), result + i * elem,
                        elem) != 0)
          return fail(rank, std::string(how.what) + " call " + std::to_string(call) + " (variant " +
                                std::to_string(choice->variant()) + "): element " + std::to_string(i) +
                                " is not its inputs added in the schedule's order");
    }
    auto input = [&](int r, size_t e) {  // rank r's input element e as a double
      int32_t whole = 0;
      float real = 0;
      std::memcpy(integral ? static_cast<void*>(&whole) : &real, typed[r].data() + e * elem, elem);
      return integral ? static_cast<double>(whole) : static_cast<double>(real);
    };
    for (size_t i = 0; i < count; ++i) {
      double sum = 0;
      float twoWay = 0;
      for (int r = 0; r < nranks; ++r) sum += input(r, first + i);
      if (how.op == hocclAvg) sum /= nranks;
      if (nranks == 2) twoWay = static_cast<float>(input(0, first + i)) + static_cast<float>(input(1, first + i));
      int32_t whole = 0;
      float real = 0;
      std::memcpy(integral ? static_cast<void*>(&whole) : &real, result + i * elem, elem);
      const double got = integral ? whole : real;
      const bool ok = integral     ? got == sum
                      : how.exact ? std::memcmp(&real, &twoWay, sizeof(float)) == 0
                                  : std::abs(got - sum) <= 4e-7 * nranks * (1 + std::abs(sum));
      if (!ok)
        return fail(rank, std::string(how.what) + " call " + std::to_string(call) + " (variant " +
                              std::to_string(choice->variant()) + "): element " + std::to_string(i) + " is " +
                              std::to_string(got) + ", want " + std::to_string(sum));
    }
  }
  // A float sum or average of 3 or more ranks is chosen online only with a fold (HOCCL_TUNE_ONLINE=1).
  if (!integral && nranks > 2 && folded == 0 && !how.everyShape)
    return fail(rank, std::string(how.what) + ": chosen online without the schedule's fold");
  return checkAgreement(rank, nranks, comm, variants, *c.lastOnlineChoice(), how.what);
}

int body(int rank, int nranks, const hocclUniqueId& id, const char* online, const char* algo, const char* model) {
  if (online) setenv("HOCCL_TUNE_ONLINE", online, 1);
  else unsetenv("HOCCL_TUNE_ONLINE");
  if (algo) setenv("HOCCL_ALGO", algo, 1);
  else unsetenv("HOCCL_ALGO");
  if (model) setenv("HOCCL_MODEL_FILE", model, 1);
  else unsetenv("HOCCL_MODEL_FILE");
  hocclComm_t comm = nullptr;
  MP_CHECK(rank, hocclCommInitRank(&comm, nranks, id, rank));
  int rc = 0;
  const bool off = (online && std::string(online) == "0") || algo;
  if (off) {
    std::vector<float> send(40009), recv(40009 * nranks);
    for (int call = 0; call < 3 && rc == 0; ++call) {
      MP_CHECK(rank, hocclAllGather(send.data(), recv.data(), send.size(), hocclFloat, comm, nullptr));
      if (comm->impl->lastOnlineChoice()) rc = fail(rank, "a shape is chosen online with the online choice off");
    }
  } else if (online && std::string(online) == "2") {
    Reduction every = reduction(hocclFloat, hocclSum, "all-reduce, every shape online");
    every.everyShape = true;
    rc = reductionPart(rank, nranks, comm, every);
  } else if (model) {
    // A model whose caches make the cache term decide a 2-rank 4 MiB all-reduce's schedule (HO-Ring in 256 KiB
    // chunks), which the single copy and the ring are timed against; a + b has one result whichever runs. Calls
    // enough for the exploration's two blocks and a confirmation.
    Reduction three = reduction(hocclFloat, hocclSum, "all-reduce 4 MiB, three variants");
    three.count = size_t{1} << 20;
    three.exact = true;
    three.variants = 3;
    three.calls = kCalls + 2 * hoccl::OnlineChoice::kBlock;
    rc = reductionPart(rank, nranks, comm, three);
  } else if (nranks == 4) {
    // 4 MiB on 4 ranks: the pair is the single copy and HO-Ring in chunks (the model's pick and its runner-up, in
    // either order), whose fold has a segment per part of every chunk: the single copy must follow it across its
    // pieces.
    Reduction chunked = reduction(hocclFloat, hocclSum, "all-reduce 4 MiB");
    chunked.count = size_t{1} << 20;
    chunked.chunkedFold = true;
    rc = reductionPart(rank, nranks, comm, chunked);
  } else {
    rc = allGatherPart(rank, nranks, comm, false);
    if (rc == 0) rc = allGatherPart(rank, nranks, comm, true);
    // Float sums: chosen online on any rank count, the single copy adding in the schedule's order.
    Reduction sum = reduction(hocclFloat, hocclSum, "all-reduce");
    sum.exact = nranks == 2;
    if (nranks == 2) sum.variants = 3;  // a + b: every variant the same bits, so the third is timed too
    if (rc == 0) rc = reductionPart(rank, nranks, comm, sum);
    if (nranks > 2) {
      Reduction inPlace = reduction(hocclFloat, hocclSum, "all-reduce in place");
      inPlace.inPlace = true;
      Reduction scatter = reduction(hocclFloat, hocclSum, "reduce-scatter");
      scatter.reduceScatter = true;
      Reduction integers = reduction(hocclInt32, hocclSum, "all-reduce int32");
      integers.exact = true;
      // An average: the schedule's sum divided at the end, the single copy's the same way.
      Reduction average = reduction(hocclFloat, hocclAvg, "all-reduce avg");
      // Registered buffers: the single copy runs over mappings (zero copy), in the schedule's order too.
      Reduction registered = reduction(hocclFloat, hocclSum, "all-reduce registered");
      registered.registered = true;
      for (const Reduction& how : {inPlace, scatter, integers, average, registered})
        if (rc == 0) rc = reductionPart(rank, nranks, comm, how);
    }
  }
  MP_CHECK(rank, hocclCommDestroy(comm));
  return rc;
}

}  // namespace

int main() {
  // 1 MiB of L2 per core and 4 MiB of last-level cache: a 2-rank 4 MiB all-reduce (16 MiB of buffers) overflows it.
  char model[] = "/tmp/hoccl-mp-online-model-XXXXXX";
  const int fd = mkstemp(model);
  const std::string text = R"({"cache": {"l2_bytes": 1048576, "llc_bytes": 4194304}, "cores_per_host": 2})";
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::printf("mp_online_choice: cannot write a model file in /tmp\n");
    return 1;
  }
  close(fd);
  struct Run {
    int nranks;
    const char* online;
    const char* algo;
    const char* model;
    const char* what;
  };
  const Run runs[] = {{2, nullptr, nullptr, nullptr, "2 ranks, default"},
                      {3, nullptr, nullptr, nullptr, "3 ranks, default"},
                      {3, "2", nullptr, nullptr, "3 ranks, HOCCL_TUNE_ONLINE=2"},
                      {4, nullptr, nullptr, nullptr, "4 ranks, default (HO-Ring and the single copy)"},
                      {2, nullptr, nullptr, model, "2 ranks, small caches (three variants)"},
                      {2, "0", nullptr, nullptr, "2 ranks, HOCCL_TUNE_ONLINE=0"},
                      {2, nullptr, "ring", nullptr, "2 ranks, HOCCL_ALGO=ring"}};
  int status = 0;
  for (const Run& run : runs) {
    const int rc = runRanks(
        run.nranks,
        [&](int rank, int nranks, const hocclUniqueId& id) {
          return body(rank, nranks, id, run.online, run.algo, run.model);
        },
        120);
    if (rc == kSkip || rc != 0) {
      if (rc != kSkip) std::printf("mp_online_choice: %s failed\n", run.what);
      status = rc;
      break;
    }
    std::printf("mp_online_choice: %s ok\n", run.what);
  }
  unlink(model);
  return status;
}
