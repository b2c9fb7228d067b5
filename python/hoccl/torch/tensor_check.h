/// @file tensor_check.h
/// What the "hoccl" c10d backend accepts, checked on the caller's thread before anything is queued: dense,
/// contiguous CPU tensors of a dtype hoccl has, and the reduction ops it can run. Every refusal is a c10::Error whose
/// Python type is ValueError (bad argument) or TypeError (dtype), naming the collective and what to do instead.
/// Also the send/recv tag rule (tags other than 0 are refused).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "hoccl/hoccl.h"

namespace hoccl_torch {

/// The hoccl data type of a torch dtype (bool travels as uint8); a TypeError for dtypes hoccl lacks.
hocclDataType_t hocclType(at::ScalarType type, const char* collective);
/// Refuses undefined, sparse, non-CPU or non-contiguous tensors and dtypes hoccl lacks.
void checkTensor(const at::Tensor& t, const char* collective);
/// Refuses a device other than the CPU; for a CUDA device the message says that hoccl's device path (docs/cuda.md)
/// is not wired into this backend and what to use instead. (Separate so that tests without a GPU can reach it.)
void checkDevice(const at::Device& device, const char* collective);
/// Refuses a send/recv tag other than 0: hoccl matches the messages between two ranks in call order and has no
/// tags, so a tag could only be ignored, and an ignored tag can pair the wrong messages silently.
void checkTag(int tag, const char* what, int rank, int peer);
/// checkTensor on each, and every tensor of the same dtype as `like` (and numel, when numel >= 0).
void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& like, int64_t numel, const char* collective);
/// Exactly one tensor in the list (this backend serves one device per process).
void checkSingle(const std::vector<at::Tensor>& ts, const char* collective);

/// How a torch ReduceOp runs: a hoccl op (built-in, or a PreMulSum made per call), or through an all-gather and a
/// local reduction (the bitwise ops, which hoccl does not have).
struct ReduceSpec {
  c10d::ReduceOp::RedOpType kind;  ///< the torch op
  bool viaGather = false;          ///< BAND/BOR/BXOR: gather every rank's data, reduce locally
  bool preMul = false;             ///< PREMUL_SUM: factor below
  double factor = 1.0;             ///< PREMUL_SUM's factor
  hocclRedOp_t op = hocclSum;      ///< the built-in op (when !preMul and !viaGather)
};
/// Checks op against dtype (bitwise ops need an integral or bool dtype) and says how to run it.
ReduceSpec reduceSpec(const c10d::ReduceOp& op, at::ScalarType type, const char* collective);

/// A hoccl op for one call: the built-in one, or a PreMulSum made on comm and destroyed with this object.
class ScopedOp {
 public:
  /// Makes the op of spec for tensors of type on comm (call on the worker thread).
  ScopedOp(const ReduceSpec& spec, at::ScalarType type, hocclComm_t comm);
  ~ScopedOp();
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;
  /// The op to pass to hoccl.
  hocclRedOp_t get() const { return op_; }

 private:
  hocclRedOp_t op_ = hocclSum;
  hocclComm_t comm_ = nullptr;
  bool owned_ = false;
};

/// Reduces the rows of `stacked` ([nranks, ...]) with a bitwise op into a tensor of one row's shape.
at::Tensor reduceRows(const at::Tensor& stacked, c10d::ReduceOp::RedOpType kind);

}  // namespace hoccl_torch
