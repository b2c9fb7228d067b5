/// @file elementwise.h
/// The index, vector and tail logic of the device's element-wise kernels, written once for the CUDA kernels
/// (kernels/cuda/reduce_kernels.cu, compiled by nvcc) and for their CPU emulation in the simulated device
/// (kernels/device/sim_kernels.cc), so the simulation runs the same decomposition the GPU does.
///
/// A launch of n elements is split into a scalar head (elements before the first 16-byte boundary of dst), a body of
/// 16-byte packs, and a scalar tail. Packs are used only when every operand has the same misalignment, so that one
/// head aligns them all; otherwise everything is scalar. Thread t of T (T = blocks x threads of the launch) handles
/// head elements t, t+T, ...; packs t, t+T, ...; tail elements t, t+T, ... Each pack is read whole before it is
/// written, so dst may equal an input exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/types.h"

namespace hoccl::kernels::elementwise {

/// Threads per block of every element-wise launch.
constexpr unsigned kThreads = 512;
/// Most blocks of a launch (the loops stride over the rest).
constexpr size_t kMaxBlocks = 65535;
/// Bytes per vector load and store.
constexpr size_t kPackBytes = 16;

/// How a launch splits its n elements.
struct Split {
  size_t head = 0;   ///< scalar elements before the packs
  size_t packs = 0;  ///< 16-byte packs after the head
  size_t n = 0;      ///< all elements; the tail is [head + packs * perPack, n)
};

/// The split for n elements of elemSize bytes over the given operands (b may be null for one-input kernels).
HOCCL_HD Split split(const void* dst, const void* a, const void* b, size_t n, size_t elemSize) {
  Split s;
  s.n = n;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(dst) % kPackBytes;
  const bool same = mis == reinterpret_cast<uintptr_t>(a) % kPackBytes &&
                    (b == nullptr || mis == reinterpret_cast<uintptr_t>(b) % kPackBytes) && mis % elemSize == 0;
  if (!same) {
    s.head = n;
    return s;
  }
  size_t head = mis == 0 ? 0 : (kPackBytes - mis) / elemSize;
  if (head > n) head = n;
  s.head = head;
  s.packs = (n - head) * elemSize / kPackBytes;
  return s;
}

/// Blocks of a launch over n elements (at least 1).
HOCCL_HD unsigned blocksFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks == 0 ? 1 : blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/// Blocks of a launch over n elements on a device of `multiprocessors` multiprocessors that each hold
/// `threadsPerMultiprocessor` threads: blocksFor(n), but no more than fill the device once (the grid-stride loops
/// take the rest; more blocks would only queue), and at least 1. An unknown device (multiprocessors < 1) gets
/// blocksFor(n).
HOCCL_HD unsigned blocksForDevice(size_t n, int multiprocessors, int threadsPerMultiprocessor) {
  const unsigned want = blocksFor(n);
  if (multiprocessors < 1) return want;
  const unsigned perMultiprocessor = threadsPerMultiprocessor >= int(kThreads)
                                         ? unsigned(threadsPerMultiprocessor) / kThreads
                                         : 1u;
  const unsigned full = unsigned(multiprocessors) * perMultiprocessor;
  return want < full ? want : full;
}

/// 16 bytes of elements of T.
template <typename T>
struct alignas(kPackBytes) Pack {
  T e[kPackBytes / sizeof(T)];  ///< the elements
};

template <typename T>
HOCCL_HD Pack<T> loadPack(const T* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const Pack<T>*>(p);
#else
  Pack<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

template <typename T>
HOCCL_HD void storePack(T* p, const Pack<T>& v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<Pack<T>*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

/// Thread t of T: dst[i] = op(a[i], b[i]) for its share of s.
template <typename T, typename Op>
HOCCL_HD void binaryThread(T* dst, const T* a, const T* b, const Split& s, Op op, size_t t, size_t T_) {
  constexpr size_t per = kPackBytes / sizeof(T);
  for (size_t i = t; i < s.head; i += T_) dst[i] = op(a[i], b[i]);
  for (size_t p = t; p < s.packs; p += T_) {
    const size_t i = s.head + p * per;
    const Pack<T> x = loadPack(a + i), y = loadPack(b + i);
    Pack<T> r;
    for (size_t k = 0; k < per; ++k) r.e[k] = op(x.e[k], y.e[k]);
    storePack(dst + i, r);
  }
  for (size_t i = s.head + s.packs * per + t; i < s.n; i += T_) dst[i] = op(a[i], b[i]);
}

/// Thread t of T: dst[i] = f(src[i]) for its share of s.
template <typename T, typename F>
HOCCL_HD void unaryThread(T* dst, const T* src, const Split& s, F f, size_t t, size_t T_) {
  constexpr size_t per = kPackBytes / sizeof(T);
  for (size_t i = t; i < s.head; i += T_) dst[i] = f(src[i]);
  for (size_t p = t; p < s.packs; p += T_) {
    const size_t i = s.head + p * per;
    const Pack<T> x = loadPack(src + i);
    Pack<T> r;
    for (size_t k = 0; k < per; ++k) r.e[k] = f(x.e[k]);
    storePack(dst + i, r);
  }
  for (size_t i = s.head + s.packs * per + t; i < s.n; i += T_) dst[i] = f(src[i]);
}

/// The identity, for copy kernels.
template <typename T>
struct Identity {
  /// Returns x.
  HOCCL_HD T operator()(T x) const { return x; }
};

/// Multiplication by a captured scalar (PreMulSum), with the Prod functor's rounding.
template <typename T, typename Prod>
struct ScaleBy {
  T scalar;  ///< the factor
  /// x * scalar.
  HOCCL_HD T operator()(T x) const { return Prod()(x, scalar); }
};

}  // namespace hoccl::kernels::elementwise
