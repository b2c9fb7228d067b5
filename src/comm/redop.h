/// @file redop.h
/// Reduction operations as the executor sees them: built-in ops map to a binary op (kernels::binOpOf); Avg adds a division of the
/// result; PreMulSum ops (created by hocclRedOpCreatePreMulSum) add a scaling of the input.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"

namespace hoccl {

/// A PreMulSum op: the scalar (one element of dtype), read now (host immediate) or at each call (pointer).
struct PreMulSumOp {
  hocclDataType_t dtype;             ///< type the scalar and the data have
  hocclScalarResidence_t residence;  ///< immediate or pointer
  std::vector<char> value;           ///< the scalar, for host-immediate ops
  const void* pointer = nullptr;     ///< the scalar's address, for pointer ops
  const void* comm = nullptr;        ///< the communicator it belongs to
};

/// Registers a PreMulSum op and returns its handle (>= hocclNumOps).
hocclRedOp_t createPreMulSum(const PreMulSumOp& op);
/// Removes it; throws InvalidArgument if op is not a live PreMulSum op of comm.
void destroyPreMulSum(hocclRedOp_t op, const void* comm);
/// The PreMulSum op behind a handle, if it is one.
std::optional<PreMulSumOp> findPreMulSum(hocclRedOp_t op);
/// Whether op is valid for comm and dtype (built-in, or a live PreMulSum of comm with the same dtype).
bool validOp(hocclRedOp_t op, hocclDataType_t dtype, const void* comm);

}  // namespace hoccl
