/// @file tensor_check.cc
/// The checks of tensor_check.h and the op mapping: torch's SUM/PRODUCT/MIN/MAX/AVG are hoccl's built-in ops,
/// PREMUL_SUM is hocclRedOpCreatePreMulSum with the factor in the tensors' dtype (read at creation), the bitwise ops
/// gather every rank's data and reduce it locally. A bool SUM is a MAX (logical or), PRODUCT a MIN.
#include "python/hoccl/torch/tensor_check.h"

namespace hoccl_torch {

hocclDataType_t hocclType(at::ScalarType type, const char* collective) {
  switch (type) {
    case at::kChar: return hocclInt8;
    case at::kByte: return hocclUint8;
    case at::kBool: return hocclUint8;
    case at::kInt: return hocclInt32;
    case at::kUInt32: return hocclUint32;
    case at::kLong: return hocclInt64;
    case at::kUInt64: return hocclUint64;
    case at::kHalf: return hocclFloat16;
    case at::kFloat: return hocclFloat32;
    case at::kDouble: return hocclFloat64;
    case at::kBFloat16: return hocclBfloat16;
    case at::kFloat8_e4m3fn: return hocclFloat8e4m3;
    case at::kFloat8_e5m2: return hocclFloat8e5m2;
    default: break;
  }
  TORCH_CHECK_TYPE(
      false, "hoccl ", collective, ": dtype ", type,
      " is not one hoccl has (int8, uint8, bool, int32, uint32, int64, uint64, float16, bfloat16, float32, "
      "float64, float8_e4m3fn, float8_e5m2); convert the tensor or use the gloo backend for it");
}

void checkTensor(const at::Tensor& t, const char* collective) {
  TORCH_CHECK_VALUE(t.defined(), "hoccl ", collective, ": got an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "hoccl ", collective, ": sparse tensors are not supported (layout ",
                    t.layout(), ")");
  checkDevice(t.device(), collective);
  TORCH_CHECK_VALUE(t.is_contiguous(), "hoccl ", collective, ": the tensor of shape ", t.sizes(), " and strides ",
                    t.strides(), " is not contiguous; pass t.contiguous() (and copy the result back)");
  hocclType(t.scalar_type(), collective);
}

void checkDevice(const at::Device& device, const char* collective) {
  if (device.is_cpu()) return;
  if (device.is_cuda()) {
    TORCH_CHECK_VALUE(false, "hoccl ", collective, ": the hoccl backend serves CPU tensors, got one on ", device,
                      "; hoccl's device path (stream-ordered GPU buffers, docs/cuda.md) is not wired into this "
                      "torch backend yet. Move the tensor with .cpu(), or give CUDA its own backend: "
                      "init_process_group(\"cpu:hoccl,cuda:nccl\")");
  }
  TORCH_CHECK_VALUE(false, "hoccl ", collective, ": the hoccl backend serves CPU tensors, got one on ", device,
                    "; move it with .cpu() or give that device its own backend (backend=\"cpu:hoccl,",
                    c10::DeviceTypeName(device.type(), /*lower_case=*/true), ":...\")");
}

void checkTag(int tag, const char* what, int rank, int peer) {
  TORCH_CHECK_VALUE(tag == 0, "hoccl ", what, " on rank ", rank, " (peer ", peer, "): tag ", tag,
                    " cannot be honoured: hoccl matches the messages between two ranks in call order and has no tags, "
                    "so only tag 0 (the default) is accepted. Use tag 0 and post the receives in the order of the "
                    "sends, or use the gloo backend for tagged messages");
}

void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& like, int64_t numel, const char* collective) {
  for (size_t i = 0; i < ts.size(); ++i) {
    checkTensor(ts[i], collective);
    TORCH_CHECK_TYPE(ts[i].scalar_type() == like.scalar_type(), "hoccl ", collective, ": tensor ", i, " has dtype ",
                     ts[i].scalar_type(), " but the input has ", like.scalar_type());
    TORCH_CHECK_VALUE(numel < 0 || ts[i].numel() == numel, "hoccl ", collective, ": tensor ", i, " has ", ts[i].numel(),
                      " elements, expected ", numel);
  }
}

void checkSingle(const std::vector<at::Tensor>& ts, const char* collective) {
  TORCH_CHECK_VALUE(ts.size() == 1, "hoccl ", collective, ": expected one tensor per call, got ", ts.size(),
                    " (one device per process)");
}

ReduceSpec reduceSpec(const c10d::ReduceOp& op, at::ScalarType type, const char* collective) {
  ReduceSpec spec;
  spec.kind = op.op_;
  const bool isBool = type == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: spec.op = isBool ? hocclMax : hocclSum; break;
    case c10d::ReduceOp::PRODUCT: spec.op = isBool ? hocclMin : hocclProd; break;
    case c10d::ReduceOp::MIN: spec.op = hocclMin; break;
    case c10d::ReduceOp::MAX: spec.op = hocclMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(!isBool, "hoccl ", collective, ": ReduceOp.AVG on a bool tensor has no meaning");
      spec.op = hocclAvg;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK_VALUE(at::isIntegralType(type, /*includeBool=*/true), "hoccl ", collective,
                        ": bitwise ReduceOps need an integer or bool tensor, got ", type);
      spec.viaGather = true;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_VALUE(!isBool, "hoccl ", collective, ": PREMUL_SUM on a bool tensor has no meaning");
      auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(sup != nullptr, "hoccl ", collective, ": PREMUL_SUM without its factor");
      spec.preMul = true;
      spec.factor = sup->tensor_factor.defined() ? sup->tensor_factor.to(at::kCPU).item<double>() : sup->double_factor;
      break;
    }
    default: TORCH_CHECK_VALUE(false, "hoccl ", collective, ": unknown ReduceOp ", static_cast<int>(op.op_));
  }
  return spec;
}

ScopedOp::ScopedOp(const ReduceSpec& spec, at::ScalarType type, hocclComm_t comm) : op_(spec.op), comm_(comm) {
  if (!spec.preMul) return;
  at::Tensor scalar = at::scalar_tensor(spec.factor, at::TensorOptions().dtype(type));
  hocclResult_t r = hocclRedOpCreatePreMulSum(&op_, scalar.data_ptr(), hocclType(type, "PREMUL_SUM"),
                                              hocclScalarHostImmediate, comm);
  TORCH_CHECK(r == hocclSuccess, "hoccl PREMUL_SUM: hocclRedOpCreatePreMulSum failed: ", hocclGetErrorString(r), ": ",
              hocclGetLastError(comm));
  owned_ = true;
}

ScopedOp::~ScopedOp() {
  if (owned_) hocclRedOpDestroy(op_, comm_);
}

at::Tensor reduceRows(const at::Tensor& stacked, c10d::ReduceOp::RedOpType kind) {
  at::Tensor acc = stacked[0].clone();
  for (int64_t r = 1; r < stacked.size(0); ++r) {
    if (kind == c10d::ReduceOp::BAND) acc.bitwise_and_(stacked[r]);
    else if (kind == c10d::ReduceOp::BOR) acc.bitwise_or_(stacked[r]);
    else acc.bitwise_xor_(stacked[r]);
  }
  return acc;
}

}  // namespace hoccl_torch
