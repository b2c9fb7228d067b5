/// @file test_perf_unit.cc
/// Unit tests of the perf driver's pieces that need no communicator: the nccl-tests row format, the per-rank count
/// rounding, data generation and the reference check (which must catch a wrong element), and option validation.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "data.h"
#include "kernels/types.h"
#include "options.h"
#include "report.h"

using namespace hoccl_perf;

TEST_CASE("rows are formatted exactly like nccl-tests") {
  Row r{33554432, 8388608, "float", "sum", -1, {372.40, 90.10, 157.68, 0, true}, {372.40, 90.10, 157.68, 0, true}};
  CHECK(formatRow(r) ==
        "    33554432       8388608     float     sum      -1   372.40   90.10  157.68       0   372.40   90.10  "
        "157.68       0");
  r.oop.checked = r.ip.checked = false;
  CHECK(formatRow(r).substr(formatRow(r).size() - 8) == "     N/A");
  CHECK(squeeze(1.5, 7) == "   1.50");
  CHECK(squeeze(12345.678, 7) == "12345.7");
  CHECK(squeeze(1234567.4, 7) == "1234567");
  CHECK(squeeze(999.999, 6) == "1000.0");
  CHECK(squeeze(123456.7, 6) == "123457");
}

TEST_CASE("per-rank counts are rounded down to 16 bytes") {
  CHECK(perRankCount(1000, 4, 3) == 332);  // 333 -> 332 (4 elements = 16 bytes)
  CHECK(perRankCount(1000, 1, 3) == 320);
  CHECK(perRankCount(1000, 8, 3) == 332);
  CHECK(perRankCount(7, 4, 4) == 0);
}

TEST_CASE("types and ops are found by their nccl-tests names") {
  REQUIRE(allTypes().size() == 12);
  for (const auto& t : allTypes()) CHECK(findType(t.name)->type == t.type);
  CHECK(findType("bf16")->type == hocclBfloat16);
  CHECK(findType("nope") == nullptr);
  OpKind k;
  CHECK(findOp("mulsum", &k));
  CHECK(k == OpKind::MulSum);
  CHECK_FALSE(findOp("xor", &k));
}

namespace {

/// Computes an all-reduce of `n` generated inputs the straightforward way in type T (rounding once per binary op,
/// as a library does), so the check can be exercised without a communicator.
template <typename T>
std::vector<T> naiveAllReduce(const DataSpec& s, size_t count, double (*toD)(T), T (*fromD)(double)) {
  std::vector<T> acc(count), in(count);
  for (int r = 0; r < s.nranks; ++r) {
    fillInput(in.data(), s, r, 0, count);
    for (size_t i = 0; i < count; ++i) {
      double a = toD(acc[i]), b = toD(in[i]);
      double v = b;
      if (r > 0) {
        switch (s.op) {
          case OpKind::Prod: v = a * b; break;
          case OpKind::Max: v = std::max(a, b); break;
          case OpKind::Min: v = std::min(a, b); break;
          default: v = a + b; break;
        }
      }
      acc[i] = fromD(v);
    }
  }
  return acc;
}

double halfToD(hoccl::half_t h) { return hoccl::toFloat(h); }
hoccl::half_t dToHalf(double d) { return hoccl::fromFloat<hoccl::half_t>(static_cast<float>(d)); }
double i32ToD(int32_t v) { return v; }
int32_t dToI32(double d) { return static_cast<int32_t>(d); }

}  // namespace

TEST_CASE("the reference check accepts a correct reduction and catches a wrong element") {
  const size_t count = 1001;
  for (OpKind op : {OpKind::Sum, OpKind::Prod, OpKind::Max, OpKind::Min}) {
    DataSpec s{hocclInt32, op, 1234, 7};
    auto out = naiveAllReduce<int32_t>(s, count, i32ToD, dToI32);
    std::vector<Block> blocks{{0, count, kReduceAll, 0}};
    CHECK(checkOutput(out.data(), blocks, s).wrong == 0);
    out[517] += 1;
    CheckResult res = checkOutput(out.data(), blocks, s);
    CHECK(res.wrong == 1);
    CHECK(res.firstBad == 517);
  }
  for (OpKind op : {OpKind::Sum, OpKind::Prod, OpKind::Max}) {
    DataSpec s{hocclFloat16, op, 99, 16};
    auto out = naiveAllReduce<hoccl::half_t>(s, count, halfToD, dToHalf);
    std::vector<Block> blocks{{0, count, kReduceAll, 0}};
    CHECK(checkOutput(out.data(), blocks, s).wrong == 0);
    out[3] = dToHalf(halfToD(out[3]) + 1.0);
    CHECK(checkOutput(out.data(), blocks, s).wrong == 1);
  }
}

TEST_CASE("copy blocks compare with the source rank's input") {
  DataSpec s{hocclFloat8e4m3, OpKind::Sum, 5, 4};
  std::vector<uint8_t> out(300);
  fillInput(out.data(), s, 2, 50, 100);  // block 0 = rank 2's elements 50..149
  fillInput(out.data() + 100, s, 3, 0, 200);
  std::vector<Block> blocks{{0, 100, 2, 50}, {100, 200, 3, 0}};
  CHECK(checkOutput(out.data(), blocks, s).wrong == 0);
  std::memset(out.data() + 250, kPattern, 10);
  CHECK(checkOutput(out.data(), blocks, s).wrong >= 1);
  CHECK(countChanged(out.data() + 250, 10) == 0);
}

TEST_CASE("options: defaults, lists and clear errors") {
  auto parse = [](std::vector<const char*> args, Options* o) {
    args.insert(args.begin(), "all_reduce_perf");
    return parseOptions(static_cast<int>(args.size()), const_cast<char**>(args.data()), "all_reduce_perf", o);
  };
  Options o;
  CHECK(parse({"-b", "8", "-e", "64M", "-f", "4", "-d", "all", "-o", "all", "-r", "-1"}, &o) == -1);
  CHECK(o.minBytes == 8);
  CHECK(o.maxBytes == 64u << 20);
  CHECK(o.types.size() == 12);
  CHECK(o.ops.size() == 6);
  CHECK(o.root == -1);
  Options o2;
  CHECK(parse({"-d", "int8,half", "-o", "max"}, &o2) == -1);
  CHECK(o2.types == std::vector<hocclDataType_t>{hocclInt8, hocclFloat16});
  for (auto args : std::vector<std::vector<const char*>>{{"-d", "complex"},
                                                         {"-g", "2"},
                                                         {"-R", "3"},
                                                         {"-G", "-5"},
                                                         {"-b", "2M", "-e", "1M"},
                                                         {"-a", "7"},
                                                         {"-o", "xor"},
                                                         {"-n", "0"},
                                                         {"--no-such-flag"}}) {
    Options bad;  // a fresh one each time, so each case fails for its own reason
    CHECK(parse(args, &bad) == 2);
  }
}

TEST_CASE("-G: parsed, then refused for every device with the reason") {
  std::vector<const char*> args{"all_reduce_perf", "-G", "3"};
  Options o;
  CHECK(parseOptions(static_cast<int>(args.size()), const_cast<char**>(args.data()), "all_reduce_perf", &o) == -1);
  CHECK(o.graphLaunches == 3);
  CHECK(graphRefusal(Options{}, "simulated device 0 (CPU)").empty());  // not asked for
  const std::string sim = graphRefusal(o, "simulated device 0 (CPU)");
  CHECK(sim.find("graph capture needs a CUDA device; the simulated device does not capture graphs") !=
        std::string::npos);
  CHECK(graphRefusal(o, nullptr).find("needs a CUDA device") != std::string::npos);
  const std::string gpu = graphRefusal(o, "CUDA device 0 (NVIDIA H100)");
  CHECK(gpu.find("cannot be captured") != std::string::npos);
  CHECK(gpu.find("CUDA device 0") != std::string::npos);
}
