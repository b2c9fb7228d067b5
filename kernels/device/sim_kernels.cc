// The simulated device's kernels (sim_kernels.h): each launch walks every thread of the CUDA grid in order.
#include "kernels/device/sim_kernels.h"

#include <cstring>

#include "base/error.h"
#include "kernels/device/elementwise.h"
#include "kernels/reduce_ops.h"
#include "kernels/type_dispatch.h"

namespace hoccl::kernels::sim {
namespace {

namespace ew = elementwise;

// Runs body(t, T) for every thread t of the launch over n elements.
template <class Body>
void grid(size_t n, Body&& body) {
  const size_t threads = size_t(ew::blocksFor(n)) * ew::kThreads;
  for (size_t t = 0; t < threads; ++t) body(t, threads);
}

// Runs fn(T()) for the storage type of dt; a value that is no hocclDataType_t is an error.
template <class Fn>
void withType(hocclDataType_t dt, Fn&& fn) {
  withStorageType(dt, fn, [&] {
    throwInvalidArgument("simulated device kernel: datatype " + std::to_string(int(dt)) + " is not a hocclDataType_t");
  });
}

template <typename T, typename Op>
void binary(void* dst, const void* a, const void* b, size_t n) {
  const ew::Split s = ew::split(dst, a, b, n, sizeof(T));
  grid(n, [&](size_t t, size_t T_) {
    ew::binaryThread(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), s, Op(), t, T_);
  });
}

template <typename T, typename F>
void unary(void* dst, const void* src, size_t n, const F& f) {
  const ew::Split s = ew::split(dst, src, nullptr, n, sizeof(T));
  grid(n, [&](size_t t, size_t T_) { ew::unaryThread(static_cast<T*>(dst), static_cast<const T*>(src), s, f, t, T_); });
}

}  // namespace

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes) unary<uint8_t>(dst, src, bytes, ew::Identity<uint8_t>());
}

void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) {
  withType(dt, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    switch (op) {
      case BinOp::Sum: return binary<T, FuncSum<T>>(dst, a, b, n);
      case BinOp::Prod: return binary<T, FuncProd<T>>(dst, a, b, n);
      case BinOp::Max: return binary<T, FuncMax<T>>(dst, a, b, n);
      case BinOp::Min: return binary<T, FuncMin<T>>(dst, a, b, n);
    }
  });
}

void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) {
  withType(dt, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    ew::ScaleBy<T, FuncProd<T>> f;
    std::memcpy(&f.scalar, scalar, sizeof(T));
    unary<T>(dst, src, n, f);
  });
}

void divide(void* data, size_t n, hocclDataType_t dt, int divisor) {
  if (divisor < 1) throwInvalidArgument("simulated device kernel: divisor " + std::to_string(divisor) + " < 1");
  withType(dt, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    unary<T>(data, data, n, FuncDivide<T>(divisor));
  });
}

void oneShotAllReduce(const one_shot::Args& args, hocclDataType_t dt, BinOp op) {
  withType(dt, [&](auto tag) {
    using T = decltype(tag);
    if (args.count == 0) return;
    const size_t bytes = args.count * sizeof(T), threads = one_shot::kThreads;
    if (!one_shot::waitSlotFree(args)) return;
    for (size_t t = 0; t < threads; ++t) one_shot::copyIn(args, bytes, t, threads);
    one_shot::publish(args, bytes);
    if (!one_shot::waitPublished(args, bytes)) return;
    auto run = [&](auto f) {
      for (size_t t = 0; t < threads; ++t) one_shot::reduce<T>(args, f, t, threads);
    };
    switch (op) {
      case BinOp::Sum: run(FuncSum<T>()); break;
      case BinOp::Prod: run(FuncProd<T>()); break;
      case BinOp::Max: run(FuncMax<T>()); break;
      case BinOp::Min: run(FuncMin<T>()); break;
    }
    one_shot::finish(args);
  });
}

}  // namespace hoccl::kernels::sim
