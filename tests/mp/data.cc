#include "data.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"

namespace hoccl::test {
namespace {

bool isUnsigned(hocclDataType_t dt) { return dt == hocclUint8 || dt == hocclUint32 || dt == hocclUint64; }
bool isInt(hocclDataType_t dt) { return !kernels::isFloatType(dt); }

}  // namespace

std::vector<double> makeInput(uint64_t seed, int rank, size_t count, hocclDataType_t dt, hocclRedOp_t op) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + 17u);
  std::vector<double> v(count);
  const bool narrow8 = dt == hocclInt8 || dt == hocclUint8;
  for (double& x : v) {
    uint64_t r = rng();
    if (op == hocclProd) {
      if (isInt(dt)) {
        if (narrow8) x = isUnsigned(dt) ? 1.0 : ((r & 1) ? 1.0 : -1.0);
        else x = isUnsigned(dt) ? 1.0 + static_cast<double>(r % 3) : static_cast<double>(static_cast<int>(r % 7) - 3);
      } else {
        static const double pick[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
        x = pick[r % 6];
      }
    } else if (op == hocclMax || op == hocclMin) {
      int k = static_cast<int>(r % 201) - 100;
      if (isUnsigned(dt)) k = static_cast<int>(r % 201);
      if (dt == hocclFloat8e4m3 || dt == hocclFloat8e5m2) x = static_cast<double>(static_cast<int>(r % 33) - 16);
      else x = isInt(dt) ? k : k / 4.0;
    } else {  // sum, avg, premulsum: small values whose sums stay exact in the type
      switch (dt) {
        case hocclFloat8e5m2: x = static_cast<double>(static_cast<int>(r % 3) - 1); break;
        case hocclFloat8e4m3: x = static_cast<double>(static_cast<int>(r % 5) - 2); break;
        case hocclBfloat16: x = static_cast<double>(static_cast<int>(r % 17) - 8); break;
        case hocclFloat16:
        case hocclFloat:
        case hocclDouble: x = (static_cast<int>(r % 33) - 16) / 4.0; break;
        default: x = isUnsigned(dt) ? static_cast<double>(r % 5) : static_cast<double>(static_cast<int>(r % 9) - 4);
      }
    }
  }
  // The reference must use the values as the type stores them.
  char elem[8];
  for (double& x : v) {
    kernels::fromDouble(x, elem, dt);
    x = kernels::toDouble(elem, dt);
  }
  return v;
}

void store(const std::vector<double>& values, void* buffer, hocclDataType_t dt) {
  const size_t elem = kernels::typeSize(dt);
  for (size_t i = 0; i < values.size(); ++i) kernels::fromDouble(values[i], static_cast<char*>(buffer) + i * elem, dt);
}

std::vector<double> load(const void* buffer, size_t n, hocclDataType_t dt) {
  const size_t elem = kernels::typeSize(dt);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = kernels::toDouble(static_cast<const char*>(buffer) + i * elem, dt);
  return out;
}

double combine(double a, double b, hocclRedOp_t op) {
  switch (op) {
    case hocclProd: return a * b;
    case hocclMax: return std::max(a, b);
    case hocclMin: return std::min(a, b);
    default: return a + b;
  }
}

double finish(double value, int nranks, hocclRedOp_t op, hocclDataType_t dt) {
  if (op != hocclAvg) return value;
  double q = value / nranks;
  return isInt(dt) ? std::trunc(q) : q;
}

bool close(double got, double expected, hocclDataType_t dt, hocclRedOp_t op) {
  if (op != hocclAvg || isInt(dt)) return got == expected;
  double eps = 0;
  switch (dt) {
    case hocclFloat8e4m3: eps = 1.0 / 8; break;
    case hocclFloat8e5m2: eps = 1.0 / 4; break;
    case hocclBfloat16: eps = 1.0 / 128; break;
    case hocclFloat16: eps = 1.0 / 1024; break;
    case hocclFloat: eps = 1e-6; break;
    default: eps = 1e-13;
  }
  return std::fabs(got - expected) <= eps * std::max(1.0, std::fabs(expected));
}

std::vector<char> foldedElement(const kernels::FoldOrder& fold, const std::vector<std::vector<char>>& typed, size_t e,
                                hocclDataType_t dt, hocclRedOp_t op, int nranks) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const kernels::BinOp bin = kernels::binOpOf(op);
  const size_t elem = kernels::typeSize(dt);
  std::vector<char> v(elem);
  fold.forEach(e, e + 1, [&](size_t, size_t, const std::vector<int>& order) {
    if (order.size() == 1) std::copy_n(typed[order[0]].data() + e * elem, elem, v.data());
    else mem.reduce(v.data(), typed[order[0]].data() + e * elem, typed[order[1]].data() + e * elem, 1, dt, bin);
    for (size_t k = 2; k < order.size(); ++k)
      mem.reduce(v.data(), v.data(), typed[order[k]].data() + e * elem, 1, dt, bin);
  });
  if (op == hocclAvg) mem.divide(v.data(), 1, dt, nranks);
  return v;
}

}  // namespace hoccl::test
