/// @file one_shot_phases.h
/// The one-kernel all-reduce for small messages on device buffers: every rank of one host runs one kernel on its
/// caller's stream that publishes its input in its own area, which every peer has mapped (CUDA IPC; the simulated
/// device's shared memfd), and then reduces all ranks' published inputs straight out of the peers' areas. No host
/// thread takes part, so a call costs one launch instead of the proxy's hand-offs (src/comm/one_shot.h drives it).
/// The phases are written once here, for the CUDA kernel (kernels/cuda/one_shot_kernel.cu) and for the simulated
/// device, which runs them thread by thread on its stream (kernels/device/sim_kernels.cc).
///
/// Algorithm, call number e (1, 2, ... on every rank; parity p = e % 2), one block of kThreads threads:
///   1. wait until every peer has finished reading this rank's parity-p slot of call e - 2 (its `done` >= e - 2);
///   2. copy the input into this rank's slot p;
///   3. publish: the slot's header gets the call's descriptor and byte count, then (after a system-wide fence) its
///      epoch e;
///   4. wait until every peer's header p says epoch e, and compare its descriptor and byte count with this rank's:
///      any difference is a mismatch (status kMismatch naming the peer) and nothing is read;
///   5. out[i] = in_0[i] op in_1[i] op ... op in_{n-1}[i], ranks in ascending order, so every rank gets the same bits;
///   6. publish done = e.
/// Two parities let a rank publish call e + 1 while slow peers still read call e. Every wait polls the abort word (the
/// communicator's health, mirrored into pinned host memory) and gives up after the timeout; a rank that fails writes
/// its `failed` word (with its reason), which stops the peers' waits for it at once. Memory safety: a peer's slot is read only after
/// its header shows the same byte count as this rank's, which never exceeds kSlotBytes; writes go to this rank's own
/// area and `out`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device/elementwise.h"
#include "kernels/types.h"

#ifndef __CUDA_ARCH__
#include <chrono>
#include <thread>
#endif

namespace hoccl::kernels::one_shot {

/// The most ranks one kernel reduces over.
constexpr int kMaxRanks = 8;
/// Bytes of one slot: the largest message the one-kernel path takes.
constexpr size_t kSlotBytes = size_t{64} << 10;
/// Threads of the kernel's one block.
constexpr unsigned kThreads = 512;
/// Bytes of one line of an area's control part (a peer polls it).
constexpr size_t kLineBytes = 128;
/// Offsets in a rank's area: the `done` line, the `failed` line, one header line per parity, then the two slots.
constexpr size_t kDoneOffset = 0;
constexpr size_t kFailedOffset = kLineBytes;
constexpr size_t kHeaderOffset = 2 * kLineBytes;
constexpr size_t kSlotOffset = 4 * kLineBytes;
/// Bytes of one rank's area.
constexpr size_t kAreaBytes = kSlotOffset + 2 * kSlotBytes;

/// A slot's header: written by its owner before the epoch (the epoch last).
struct Header {
  uint64_t epoch;  ///< the call whose input the slot holds
  uint64_t call;   ///< that call's descriptor (collective number, type, op, count: src/comm/one_shot.cc)
  uint64_t bytes;  ///< its byte count
};

/// How a launch ended, in Args::status[0].
enum Status : uint32_t {
  kRunning = 0,     ///< not finished (the host reads it after the kernel: never seen then)
  kDone = 1,        ///< success
  kTimeout = 2,     ///< a wait outlived the timeout; status[1] is the peer waited for
  kAborted = 3,     ///< the communicator was aborted or failed (the abort word)
  kMismatch = 4,    ///< status[1]'s header differs: status[2..3] its descriptor (low, high), status[4] its bytes (low)
  kPeerFailed = 5,  ///< status[1] wrote its `failed` word (its own launch failed): status[2] is its code
};

/// Words of Args::status.
constexpr int kStatusWords = 8;

/// One launch.
struct Args {
  const void* in = nullptr;                  ///< this rank's input (device memory), count elements
  void* out = nullptr;                       ///< the result (device memory; may equal in)
  size_t count = 0;                          ///< elements
  int nranks = 0;                            ///< ranks (2..kMaxRanks)
  int rank = 0;                              ///< this rank
  uint64_t epoch = 0;                        ///< this call's number on the path (1, 2, ...)
  uint64_t call = 0;                         ///< this call's descriptor
  char* areas[kMaxRanks] = {};               ///< every rank's area (this rank's own, the peers' mapped here)
  const volatile uint32_t* abort = nullptr;  ///< pinned host word: non-zero stops every wait
  uint32_t* status = nullptr;                ///< pinned host words (kStatusWords): how the launch ended
  uint64_t timeoutNs = 0;                    ///< longest wait
};

/// Nanoseconds of a monotonic clock (the GPU's global timer; steady_clock on the host).
HOCCL_HD uint64_t nowNs() {
#ifdef __CUDA_ARCH__
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
#endif
}

/// Reads a word another rank writes, with acquire order at system scope.
HOCCL_HD uint64_t loadAcquire(const uint64_t* p) {
#ifdef __CUDA_ARCH__
  const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(p);
  __threadfence_system();
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/// Writes a word other ranks read, with release order at system scope.
HOCCL_HD void storeRelease(uint64_t* p, uint64_t v) {
#ifdef __CUDA_ARCH__
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/// Between two polls of a wait.
HOCCL_HD void pause() {
#ifdef __CUDA_ARCH__
  __nanosleep(200);
#else
  std::this_thread::yield();
#endif
}

HOCCL_HD uint64_t* wordAt(char* area, size_t offset) { return reinterpret_cast<uint64_t*>(area + offset); }
HOCCL_HD Header* headerOf(char* area, uint64_t epoch) {
  return reinterpret_cast<Header*>(area + kHeaderOffset + (epoch % 2) * kLineBytes);
}
HOCCL_HD char* slotOf(char* area, uint64_t epoch) { return area + kSlotOffset + (epoch % 2) * kSlotBytes; }

/// Ends the launch with `code` (one thread): the status words, and this rank's `failed` word (the code in its top
/// byte, the epoch below: never 0) so that peers stop waiting for it and can say why.
HOCCL_HD void fail(const Args& a, uint32_t code, int peer, uint64_t detail = 0, uint64_t bytes = 0) {
  a.status[1] = static_cast<uint32_t>(peer);
  a.status[2] = static_cast<uint32_t>(detail);
  a.status[3] = static_cast<uint32_t>(detail >> 32);
  a.status[4] = static_cast<uint32_t>(bytes);
  storeRelease(wordAt(a.areas[a.rank], kFailedOffset), uint64_t{code} << 56 | (a.epoch & ((uint64_t{1} << 56) - 1)));
#ifdef __CUDA_ARCH__
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(&a.status[0]) = code;
#else
  __atomic_store_n(&a.status[0], code, __ATOMIC_RELEASE);
#endif
}

/// Waits (one thread) until `ready(peer)` holds for every peer; false after fail(): a peer that has not answered yet
/// wrote its `failed` word, the abort word is up, or the timeout passed (naming the lowest peer still waited for).
template <class Ready>
HOCCL_HD bool waitPeers(const Args& a, Ready ready) {
  const uint64_t start = nowNs();
  unsigned pending = 0;
  for (int j = 0; j < a.nranks; ++j)
    if (j != a.rank) pending |= 1u << j;
  for (uint64_t polls = 0;; ++polls) {
    for (int j = 0; j < a.nranks; ++j) {
      if (!(pending & (1u << j))) continue;
      const uint64_t failed = loadAcquire(wordAt(a.areas[j], kFailedOffset));
      if (failed != 0) {
        fail(a, kPeerFailed, j, failed >> 56);
        return false;
      }
      if (ready(j)) pending &= ~(1u << j);
    }
    if (pending == 0) return true;
    if ((polls & 63) == 63) {
      int first = 0;
      while (!(pending & (1u << first))) ++first;
      if (*a.abort != 0) {
        fail(a, kAborted, first);
        return false;
      }
      if (nowNs() - start > a.timeoutNs) {
        fail(a, kTimeout, first);
        return false;
      }
    }
    pause();
  }
}

/// Phase 1 (one thread): every peer is done reading this rank's slot of call epoch - 2.
HOCCL_HD bool waitSlotFree(const Args& a) {
  if (a.epoch <= 2) return true;
  return waitPeers(a, [&](int j) { return loadAcquire(wordAt(a.areas[j], kDoneOffset)) + 2 >= a.epoch; });
}

/// Phase 2 (thread t of T): the input into this rank's slot.
HOCCL_HD void copyIn(const Args& a, size_t bytes, size_t t, size_t T) {
  char* slot = slotOf(a.areas[a.rank], a.epoch);
  const elementwise::Split s = elementwise::split(slot, a.in, nullptr, bytes, 1);
  elementwise::unaryThread(reinterpret_cast<uint8_t*>(slot), static_cast<const uint8_t*>(a.in), s,
                           elementwise::Identity<uint8_t>(), t, T);
}

/// Phase 3 (one thread, after every thread's copy is visible): the header, the epoch last.
HOCCL_HD void publish(const Args& a, size_t bytes) {
  Header* h = headerOf(a.areas[a.rank], a.epoch);
  h->call = a.call;
  h->bytes = bytes;
  storeRelease(&h->epoch, a.epoch);
}

/// Phase 4 (one thread): every peer published this call, with this rank's descriptor and bytes.
HOCCL_HD bool waitPublished(const Args& a, size_t bytes) {
  if (!waitPeers(a, [&](int j) { return loadAcquire(&headerOf(a.areas[j], a.epoch)->epoch) >= a.epoch; })) return false;
  for (int j = 0; j < a.nranks; ++j) {
    if (j == a.rank) continue;
    Header* h = headerOf(a.areas[j], a.epoch);  // read like the epoch: past any cache, after it
    const uint64_t call = loadAcquire(&h->call), got = loadAcquire(&h->bytes), epoch = loadAcquire(&h->epoch);
    if (call != a.call || got != bytes || epoch != a.epoch) {
      fail(a, kMismatch, j, call, got);
      return false;
    }
  }
  return true;
}

/// Reads an element of a rank's slot. On a GPU past the L1 cache (ld.global.cg), which is not coherent with what
/// other GPUs write; on the host a plain load (the epoch's acquire ordered it).
template <typename T>
HOCCL_HD T loadSlot(const T* p) {
#ifdef __CUDA_ARCH__
  T r;
  if constexpr (sizeof(T) == 1) {
    const unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&r, &v, 1);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&r, &v, 2);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int v = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&r, &v, 4);
  } else {
    static_assert(sizeof(T) == 8, "element types are 1, 2, 4 or 8 bytes");
    const unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&r, &v, 8);
  }
  return r;
#else
  return *p;
#endif
}

/// Phase 5 (thread t of T): out[i] = the reduction of every rank's input, in rank order.
template <typename T, typename Op>
HOCCL_HD void reduce(const Args& a, Op op, size_t t, size_t T_) {
  const T* in[kMaxRanks];
  for (int j = 0; j < a.nranks; ++j) in[j] = reinterpret_cast<const T*>(slotOf(a.areas[j], a.epoch));
  T* out = static_cast<T*>(a.out);
  for (size_t i = t; i < a.count; i += T_) {
    T acc = loadSlot(in[0] + i);
    for (int j = 1; j < a.nranks; ++j) acc = op(acc, loadSlot(in[j] + i));
    out[i] = acc;
  }
}

/// Phase 6 (one thread, after every thread's reads): this rank is done with call epoch; the launch succeeded.
HOCCL_HD void finish(const Args& a) {
  storeRelease(wordAt(a.areas[a.rank], kDoneOffset), a.epoch);
#ifdef __CUDA_ARCH__
  *reinterpret_cast<volatile uint32_t*>(&a.status[0]) = kDone;
#else
  __atomic_store_n(&a.status[0], static_cast<uint32_t>(kDone), __ATOMIC_RELEASE);
#endif
}

}  // namespace hoccl::kernels::one_shot
