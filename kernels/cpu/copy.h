/// @file copy.h
/// Host-memory copies for the data path: every byte hoccl moves between buffers on the CPU (the executor's copy
/// steps, the shared-memory slots, single copy's bounce buffer, the one-host shortcuts) goes through copy() or
/// copyStreaming(), never through a bare memcpy, because glibc's memcpy crawls for one alignment case on some CPUs
/// (see copy.cc).
#pragma once

#include <cstddef>

namespace hoccl::kernels {

/// memcpy semantics (no overlap), at full speed whatever the two pointers' offsets within a cache line.
void copy(void* dst, const void* src, size_t bytes);

/// memcpy semantics (no overlap) with stores that bypass the caches (non-temporal) on x86-64: the destination's lines
/// are written without being read first, and are not left in the cache. For large destinations that nobody reads
/// soon (the peers' outputs of a zero-copy collective); slower than copy() when the destination is read right away.
/// Ends with a store fence, so the bytes are ordered before any later store (a release that hands them on). Other
/// machines: copy().
void copyStreaming(void* dst, const void* src, size_t bytes);

/// True when glibc's memcpy is slow for this pair on the CPUs the copy guards against: more than
/// kSkewedCopyMinBytes, with the destination 1 to 31 bytes past the source modulo a cache line. copy() then runs its
/// own loop. Exposed for the tests.
bool skewedForMemcpy(const void* dst, const void* src, size_t bytes);

/// Below this many bytes glibc copies with vector moves whatever the alignment (its `rep movsb` threshold).
constexpr size_t kSkewedCopyMinBytes = 2048;

}  // namespace hoccl::kernels
