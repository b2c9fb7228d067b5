/// @file shm_zero_copy.h
/// The copies of the single-copy collectives (shm_single_copy.h) when every rank's buffers are registered memory of
/// hocclMemAlloc (kernels/shared_mem.h, kernels/registrations.h): every rank maps its peers' buffers
/// (shm_peer_maps.h) and reads and writes them with plain loads and stores, no system call and no bounce buffer.
///   all-reduce      rank r reduces block r of every rank's input (its own first), a piece at a time, and writes the
///                   finished piece, still in cache, into every rank's output (its own included);
///   reduce-scatter  rank r reduces its output block from every rank's input;
///   all-gather      rank r copies its own input, a piece at a time, into block r of every rank's output (read once,
///                   written p times; pulling every block would read p);
///   broadcast       every receiver copies the root's input into its output;
///   all-to-all      rank r copies block r of every rank's input into its output (shm_single_copy.cc runs it: an
///                   in-place rank stages the peers' blocks until the closing round).
/// Every byte is read from its source once and written to its destination once. From 4 MiB of a rank's share the
/// writes into the outputs are streamed past the caches (kernels::copyStreaming): no read for ownership of the
/// destination, which nobody reads during the call. The caller has checked the ranges against what every peer
/// published and runs the closing round afterwards.
#pragma once

#include <vector>

#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// Every rank's buffers as addresses in this process (this rank's own, and the peers' mappings).
struct MappedBuffers {
  std::vector<const char*> send;  ///< input of rank q
  std::vector<char*> recv;        ///< output of rank q
};

/// Reduces bytes [srcOffset, +bytes) of every rank's input (this rank's own first, so an in-place output may alias
/// it) into this rank's output at dstOffset, a cache-sized piece at a time; with `pushToAll` each finished piece is
/// also copied into every peer's output at dstOffset. Divides by p for hocclAvg.
void zeroCopyReduce(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                    size_t bytes, bool pushToAll);

/// Runs this rank's share of `call` on rank `me` of `p` over the mapped buffers.
void zeroCopyRun(const CollCall& call, int me, int p, const MappedBuffers& b);

}  // namespace hoccl::transport::shm
