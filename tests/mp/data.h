/// @file data.h
/// Test data for multi-process tests: deterministic per (seed, rank) inputs of every type, chosen so that results
/// are exactly representable (differences are then real bugs, not rounding), and the double-precision reference.
#pragma once

#include <cstdint>
#include <vector>

#include "hoccl/hoccl.h"
#include "kernels/fold_order.h"

namespace hoccl::test {

/// Values of one rank's input for (type, op), as doubles exactly representable in the type.
std::vector<double> makeInput(uint64_t seed, int rank, size_t count, hocclDataType_t dt, hocclRedOp_t op);
/// Writes values into a typed buffer.
void store(const std::vector<double>& values, void* buffer, hocclDataType_t dt);
/// Reads n typed elements.
std::vector<double> load(const void* buffer, size_t n, hocclDataType_t dt);
/// Combines two values as the op does (premulsum: both already scaled; avg: sum).
double combine(double a, double b, hocclRedOp_t op);
/// The final value of a reduction of `sum` over n ranks for op (avg divides, integer types truncate).
double finish(double value, int nranks, hocclRedOp_t op, hocclDataType_t dt);
/// Whether got equals expected within what the type allows (exact except avg of floating types).
bool close(double got, double expected, hocclDataType_t dt, hocclRedOp_t op);

/// Element e of a reduction of the ranks' typed inputs (one buffer per rank) added pairwise in `fold`'s order by the
/// CPU kernel, one element at a time, then divided for avg: the bytes a shortcut that follows the fold must give.
std::vector<char> foldedElement(const kernels::FoldOrder& fold, const std::vector<std::vector<char>>& typed, size_t e,
                                hocclDataType_t dt, hocclRedOp_t op, int nranks);

}  // namespace hoccl::test
