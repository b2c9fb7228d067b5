/// @file data.h
/// Data types, reduction kinds, input generation and the reference check of the perf tools.
///
/// Every rank's input is a pure function of (seed, type, op, rank, element index): a counter-based hash picks a
/// small value that is exactly representable in the type, so any rank can regenerate every other rank's input and
/// compute the expected output in double precision without communicating. Values are chosen so that sums stay
/// exact for integers and small for floating types, and products involve at most two factors other than 1.
#pragma once

#include "perf.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hoccl_perf {

/// Description of one data type.
struct TypeInfo {
  hocclDataType_t type;  ///< the hoccl enum value
  const char* name;      ///< nccl-tests name (int8 ... f8e5m2)
  size_t size;           ///< bytes per element
  bool isInt;            ///< integer type (checked exactly)
  bool isSigned;         ///< signed integer or floating type
  double unitRoundoff;   ///< 2^-p for floating types (half an ulp at 1.0), 0 for integers
};

/// The reductions the tools can run (-o).
enum class OpKind { Sum, Prod, Max, Min, Avg, MulSum };

/// Every type in nccl-tests order (-d all).
const std::vector<TypeInfo>& allTypes();
/// The type called `name` (nccl-tests names, plus a few aliases such as fp16/bf16/float32), or nullptr.
const TypeInfo* findType(const std::string& name);
/// The table entry of `type`.
const TypeInfo& typeInfo(hocclDataType_t type);

/// Every op in nccl-tests order (-o all).
const std::vector<OpKind>& allOps();
/// The op called `name` (sum, prod, max, min, avg, mulsum), false if unknown.
bool findOp(const std::string& name, OpKind* op);
/// The nccl-tests name of an op.
const char* opName(OpKind op);
/// The built-in hocclRedOp_t of an op (MulSum has none: it is created with hocclRedOpCreatePreMulSum).
hocclRedOp_t builtinOp(OpKind op);

/// What determines the generated data of one test.
struct DataSpec {
  hocclDataType_t type;  ///< element type
  OpKind op;             ///< reduction (shapes the value range)
  uint64_t seed;         ///< per-test seed
  int nranks;            ///< ranks in the communicator
};

/// Writes `n` elements of rank `rank`'s input, elements [first, first+n), into dst (of the spec's type).
void fillInput(void* dst, const DataSpec& spec, int rank, size_t first, size_t n);
/// Writes the PreMulSum scalar used by -o mulsum (one element of `type`) into out.
void mulSumScalar(hocclDataType_t type, void* out);

/// Outcome of checking one rank's output.
struct CheckResult {
  size_t wrong = 0;          ///< wrong elements
  size_t firstBad = 0;       ///< index of the first wrong element (valid when wrong > 0)
  double got = 0, want = 0;  ///< the first wrong element and its expected value
};

/// Compares `out` (the receive buffer) with the expected blocks, element by element.
CheckResult checkOutput(const void* out, const std::vector<Block>& blocks, const DataSpec& spec);

/// Byte written into receive buffers and guard zones before a check, to catch missing and stray writes.
constexpr unsigned char kPattern = 0xA5;
/// Number of bytes in [p, p+bytes) that differ from kPattern.
size_t countChanged(const void* p, size_t bytes);

}  // namespace hoccl_perf
