/*
 * Host copies that stay fast whatever the pointers' alignment.
 *
 * Why not memcpy alone: from 2 KiB up to its non-temporal threshold (about 512 KiB on the build machines) glibc's
 * memcpy copies with `rep movsb` on CPUs that advertise fast string moves (ERMS/FSRM). On AMD EPYC (the build machines;
 * glibc 2.36) that instruction runs at about 2 GB/s instead of 30-50 GB/s when the destination lies 1 to 31 bytes past
 * the source modulo 64 (`tools/bench/copy_skew`, 64 KiB: destination +8/+16/+24 against a page-aligned source 2.0 GB/s,
 * +0/+32 41; every other pair of offsets is fast). That is the common case for hoccl: the shared-memory slots are
 * page-aligned, and a buffer from malloc (numpy's arrays, most C programs) starts 16 bytes into its page, so every
 * piece received into such a buffer crawled (2-rank all-gather of 512 KiB on buffers offset by 16 bytes: 4-5x slower
 * than on aligned ones).
 *
 * The loop for that case: copy the head up to the destination's next cache line with memcpy (under 64 bytes: vector
 * moves), then 64 bytes per iteration with unaligned 16-byte loads and aligned stores (SSE2: every x86-64 CPU), then
 * the tail. It runs at 30-38 GB/s in the caches on the same machine; past glibc's threshold (at 1 MiB) it is 10-20%
 * slower than memcpy, a cost kept because that threshold depends on the machine's caches. Every other pair of pointers,
 * and every copy of at most 2 KiB, goes to memcpy unchanged.
 */
#include "kernels/cpu/copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace hoccl::kernels {
namespace {

constexpr size_t kLine = 64;

#if defined(__x86_64__)
// Bytes until p's next cache-line boundary (0 when p is on one).
size_t toLine(const char* p) { return (kLine - reinterpret_cast<uintptr_t>(p) % kLine) % kLine; }

// Copies bytes (> kLine) as: the head up to d's next cache line with memcpy (under 64 bytes: vector moves), whole
// destination lines with unaligned 16-byte loads and `store` (an aligned 16-byte store of some kind), the tail.
template <typename Store>
void copyByLines(char* d, const char* s, size_t bytes, Store store) {
  const size_t head = toLine(d);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= kLine; bytes -= kLine, d += kLine, s += kLine) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    store(reinterpret_cast<__m128i*>(d), x0);
    store(reinterpret_cast<__m128i*>(d + 16), x1);
    store(reinterpret_cast<__m128i*>(d + 32), x2);
    store(reinterpret_cast<__m128i*>(d + 48), x3);
  }
  std::memcpy(d, s, bytes);
}
#endif

}  // namespace

bool skewedForMemcpy(const void* dst, const void* src, size_t bytes) {
  const uintptr_t skew = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % kLine;
  return bytes > kSkewedCopyMinBytes && skew >= 1 && skew <= 31;
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
#if defined(__x86_64__)
  if (skewedForMemcpy(dst, src, bytes)) {
    copyByLines(static_cast<char*>(dst), static_cast<const char*>(src), bytes,
                [](__m128i* p, __m128i x) { _mm_store_si128(p, x); });
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (bytes < 4 * kLine) {
    copy(d, s, bytes);
    return;
  }
  // Whole destination lines only: a partly streamed line would be merged with memory by the CPU, which is slow.
  copyByLines(d, s, bytes, [](__m128i* p, __m128i x) { _mm_stream_si128(p, x); });
  _mm_sfence();  // streamed stores are weakly ordered: order them before whatever the caller publishes next
#else
  copy(dst, src, bytes);
#endif
}

}  // namespace hoccl::kernels
