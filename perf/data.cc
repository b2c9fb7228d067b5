/// @file data.cc
/// Input generation and the double-precision reference check (see data.h for the scheme).
#include "data.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/types.h"

namespace hoccl_perf {
namespace {

const std::vector<TypeInfo> kTypes = {
    {hocclInt8, "int8", 1, true, true, 0},
    {hocclUint8, "uint8", 1, true, false, 0},
    {hocclInt32, "int32", 4, true, true, 0},
    {hocclUint32, "uint32", 4, true, false, 0},
    {hocclInt64, "int64", 8, true, true, 0},
    {hocclUint64, "uint64", 8, true, false, 0},
    {hocclFloat16, "half", 2, false, true, 0x1p-11},
    {hocclFloat32, "float", 4, false, true, 0x1p-24},
    {hocclFloat64, "double", 8, false, true, 0x1p-53},
    {hocclBfloat16, "bfloat16", 2, false, true, 0x1p-8},
    {hocclFloat8e4m3, "f8e4m3", 1, false, true, 0x1p-4},
    {hocclFloat8e5m2, "f8e5m2", 1, false, true, 0x1p-3},
};

const std::vector<OpKind> kOps = {OpKind::Sum, OpKind::Prod, OpKind::Max, OpKind::Min, OpKind::Avg, OpKind::MulSum};

// ---- conversions between a storage type and double -------------------------------------------------------------

template <typename T>
constexpr bool kLowp = hoccl::IsLowPrecision<T>::value;

template <typename T>
inline double toD(T v) {
  if constexpr (kLowp<T>) {
    return hoccl::toFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

/// Rounds (floating) or wraps (integer) a double into T. Integer inputs here are always integral.
template <typename T>
inline T fromD(double d) {
  if constexpr (kLowp<T>) {
    return hoccl::fromFloat<T>(static_cast<float>(d));
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(d)));
  } else {
    return static_cast<T>(d);
  }
}

template <typename T>
inline bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Calls f(T{}) with the storage type of `type`.
template <typename F>
void dispatch(hocclDataType_t type, F&& f) {
  switch (type) {
    case hocclInt8: f(int8_t{}); break;
    case hocclUint8: f(uint8_t{}); break;
    case hocclInt32: f(int32_t{}); break;
    case hocclUint32: f(uint32_t{}); break;
    case hocclInt64: f(int64_t{}); break;
    case hocclUint64: f(uint64_t{}); break;
    case hocclFloat16: f(hoccl::half_t{}); break;
    case hocclFloat32: f(float{}); break;
    case hocclFloat64: f(double{}); break;
    case hocclBfloat16: f(hoccl::bf16_t{}); break;
    case hocclFloat8e4m3: f(hoccl::fp8e4m3_t{}); break;
    case hocclFloat8e5m2: f(hoccl::fp8e5m2_t{}); break;
    default: break;
  }
}

// ---- value generation ------------------------------------------------------------------------------------------

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t hashOf(uint64_t seed, uint64_t rank, uint64_t i) { return mix64(seed ^ mix64((rank << 48) ^ i)); }

/// The value (before rounding into the type) of element i of rank's input.
inline double rawValue(const DataSpec& s, const TypeInfo& ti, int rank, size_t i) {
  uint64_t h = hashOf(s.seed, static_cast<uint64_t>(rank), i);
  switch (s.op) {
    case OpKind::Max:
    case OpKind::Min:
      if (ti.isInt) return ti.isSigned ? static_cast<double>(h % 128) - 64 : static_cast<double>(h % 128);
      return (static_cast<double>(h % 129) - 64) / 4.0;
    case OpKind::Prod: {
      // At most two ranks per element hold a factor other than 1, so products stay small and exact enough.
      uint64_t g = hashOf(s.seed, 0xFFFFu, i);
      int n = s.nranks;
      int a = static_cast<int>(g % static_cast<uint64_t>(n));
      int b = n > 1 ? (a + 1 + static_cast<int>((g >> 20) % static_cast<uint64_t>(n - 1))) % n : a;
      if (rank != a && rank != b) return 1;
      static const double kSigned[4] = {2, 3, -2, -1}, kUnsigned[4] = {2, 3, 2, 1};
      static const double kFloat[6] = {2, 0.5, -1.5, 1.25, 3, -0.75};
      if (ti.isInt) return ti.isSigned ? kSigned[h % 4] : kUnsigned[h % 4];
      return kFloat[h % 6];
    }
    default:  // Sum, Avg, MulSum
      if (ti.isInt) return ti.isSigned ? static_cast<double>(h % 8) - 4 : static_cast<double>(h % 8);
      return (static_cast<double>(h % 17) - 8) / 4.0;
  }
}

template <typename T>
inline T inputElem(const DataSpec& s, const TypeInfo& ti, int rank, size_t i) {
  return fromD<T>(rawValue(s, ti, rank, i));
}

template <typename T>
double mulSumScalarValue() {
  return std::is_integral_v<T> ? 2.0 : 0.5;
}

/// Expected value of a reduction over every rank at input index i; tol receives the allowed absolute error.
template <typename T>
double reduceExpected(const DataSpec& s, const TypeInfo& ti, size_t i, double* tol) {
  const int n = s.nranks;
  double acc = 0, sumAbs = 0;
  for (int r = 0; r < n; ++r) {
    double v = toD(inputElem<T>(s, ti, r, i));
    switch (s.op) {
      case OpKind::Prod: acc = r == 0 ? v : acc * v; break;
      case OpKind::Max: acc = r == 0 ? v : std::max(acc, v); break;
      case OpKind::Min: acc = r == 0 ? v : std::min(acc, v); break;
      case OpKind::MulSum: v *= toD(fromD<T>(mulSumScalarValue<T>())); [[fallthrough]];
      default:
        acc += v;
        sumAbs += std::fabs(v);
        break;
    }
  }
  if (s.op == OpKind::Avg) {
    acc = ti.isInt ? std::trunc(acc / n) : acc / n;
    sumAbs /= n;
  }
  double u = ti.unitRoundoff;
  switch (s.op) {
    case OpKind::Max:
    case OpKind::Min: *tol = 0; break;
    case OpKind::Prod: *tol = 4 * u * std::fabs(acc); break;
    default: *tol = (n + 2) * u * std::max(sumAbs, std::fabs(acc)); break;
  }
  return acc;
}

template <typename T>
void checkBlock(const T* out, const Block& b, const DataSpec& s, const TypeInfo& ti, CheckResult* res) {
  for (size_t j = 0; j < b.length; ++j) {
    T got = out[b.outOffset + j];
    size_t in = b.inOffset + j;
    bool ok;
    double want, tol = 0;
    if (b.srcRank != kReduceAll) {
      T w = inputElem<T>(s, ti, b.srcRank, in);
      want = toD(w);
      ok = sameBits(got, w) || toD(got) == want;
    } else {
      want = reduceExpected<T>(s, ti, in, &tol);
      if (ti.isInt) {
        ok = sameBits(got, fromD<T>(want));
      } else {
        double g = toD(got);
        ok = !std::isnan(g) && std::fabs(g - want) <= tol;
      }
    }
    if (!ok) {
      if (res->wrong == 0) {
        res->firstBad = b.outOffset + j;
        res->got = toD(got);
        res->want = want;
      }
      ++res->wrong;
    }
  }
}

}  // namespace

const std::vector<TypeInfo>& allTypes() { return kTypes; }

const TypeInfo* findType(const std::string& name) {
  static const std::pair<const char*, const char*> kAliases[] = {
      {"char", "int8"},      {"int", "int32"},      {"fp16", "half"},   {"float16", "half"},  {"float32", "float"},
      {"fp32", "float"},     {"float64", "double"}, {"fp64", "double"}, {"bf16", "bfloat16"}, {"fp8e4m3", "f8e4m3"},
      {"fp8e5m2", "f8e5m2"}, {"e4m3", "f8e4m3"},    {"e5m2", "f8e5m2"},
  };
  std::string n = name;
  for (const auto& a : kAliases)
    if (n == a.first) n = a.second;
  for (const auto& t : kTypes)
    if (n == t.name) return &t;
  return nullptr;
}

const TypeInfo& typeInfo(hocclDataType_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];
}

const std::vector<OpKind>& allOps() { return kOps; }

bool findOp(const std::string& name, OpKind* op) {
  for (OpKind k : kOps) {
    if (name == opName(k)) {
      *op = k;
      return true;
    }
  }
  return false;
}

const char* opName(OpKind op) {
  switch (op) {
    case OpKind::Sum: return "sum";
    case OpKind::Prod: return "prod";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
    case OpKind::Avg: return "avg";
    case OpKind::MulSum: return "mulsum";
  }
  return "?";
}

hocclRedOp_t builtinOp(OpKind op) {
  switch (op) {
    case OpKind::Prod: return hocclProd;
    case OpKind::Max: return hocclMax;
    case OpKind::Min: return hocclMin;
    case OpKind::Avg: return hocclAvg;
    default: return hocclSum;
  }
}

void fillInput(void* dst, const DataSpec& spec, int rank, size_t first, size_t n) {
  const TypeInfo& ti = typeInfo(spec.type);
  dispatch(spec.type, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(dst);
    for (size_t j = 0; j < n; ++j) p[j] = inputElem<T>(spec, ti, rank, first + j);
  });
}

void mulSumScalar(hocclDataType_t type, void* out) {
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    T v = fromD<T>(mulSumScalarValue<T>());
    std::memcpy(out, &v, sizeof(T));
  });
}

CheckResult checkOutput(const void* out, const std::vector<Block>& blocks, const DataSpec& spec) {
  CheckResult res;
  const TypeInfo& ti = typeInfo(spec.type);
  dispatch(spec.type, [&](auto tag) {
    using T = decltype(tag);
    for (const Block& b : blocks) checkBlock(static_cast<const T*>(out), b, spec, ti, &res);
  });
  return res;
}

size_t countChanged(const void* p, size_t bytes) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  size_t n = 0;
  for (size_t i = 0; i < bytes; ++i) n += c[i] != kPattern;
  return n;
}

}  // namespace hoccl_perf
