/// @file shm_zero_copy.h
/// The copies of the single-copy collectives (shm_single_copy.h) when every rank's buffers are registered memory of
/// hocclMemAlloc (kernels/shared_mem.h, kernels/registrations.h): every rank maps its peers' buffers
/// (shm_peer_maps.h) and reads and writes them with plain loads and stores, no system call and no bounce buffer.
///   all-reduce      rank r takes the pieces of block r of the message one at a time, then those left in the other
///                   blocks (the faster rank takes more: PieceClaims); each piece is reduced from every rank's input
///                   (its own first) and written, still in cache, into every rank's output (its own included);
///   reduce-scatter  rank r reduces its output block from every rank's input;
///   all-gather      rank r copies its own input, a piece at a time, into block r of every rank's output (read once,
///                   written p times; pulling every block would read p);
///   broadcast       every receiver copies the root's input into its output;
///   all-to-all      rank r copies block r of every rank's input into its output (shm_single_copy.cc runs it: an
///                   in-place rank stages the peers' blocks until the closing round).
/// Every byte is read from its source once and written to its destination once. From 4 MiB of a rank's share
/// (all-reduce: the message over p) the writes into the outputs are streamed past the caches (kernels::copyStreaming):
/// no read for ownership of the destination, which nobody reads during the call. The caller has checked the ranges
/// against what every peer published (all-reduce: every peer's whole buffers) and runs the closing round afterwards.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// Every rank's buffers as addresses in this process (this rank's own, and the peers' mappings).
struct MappedBuffers {
  std::vector<const char*> send;  ///< input of rank q
  std::vector<char*> recv;        ///< output of rank q
};

/// The pieces of one registered all-reduce: block r of them (the static share of rank r) is counted by a word in rank
/// r's arena region (Arena::claimWord); each rank takes its own block's pieces from the front, then the other
/// blocks' from the back, so the faster rank takes more. Protocol in shm_zero_copy.cc. A word holds the call's
/// epoch (the arena round number of its address round, low 16 bits), the block's front and back (24 bits each).
class PieceClaims {
 public:
  /// Rank `me`'s claims in the call whose address round is arena round `epoch`, among `pieces` pieces (< 2^24);
  /// words[r] is rank r's claim word.
  PieceClaims(std::vector<std::atomic<uint64_t>*> words, int me, uint64_t epoch, uint64_t pieces);
  /// Before rank `me` of `p` publishes the address round `epoch` of an all-reduce of `pieces` pieces that may run
  /// zero copy: its own word `own` starts over with its whole block.
  static void reset(std::atomic<uint64_t>& own, int me, int p, uint64_t epoch, uint64_t pieces);
  /// The next piece this rank takes, in `piece`; false once every block is empty, or belongs to another call (its
  /// owner left this call on an error and started the next: nothing more is taken from it).
  bool next(uint64_t& piece);

 private:
  std::vector<std::atomic<uint64_t>*> words_;
  int me_, p_;
  uint64_t tag_, pieces_;
  int k_ = 0;  // blocks me_, me_+1, ... before this one are empty
};

/// Runs this rank's part of a registered all-reduce over the mapped buffers (every rank's whole input and output):
/// claims pieces from `claims` (made for allReducePieces(call) pieces) until none is left, reducing each from every
/// input into every output. Returns the bytes of the pieces this rank reduced.
size_t zeroCopyAllReduce(const CollCall& call, int me, int p, const MappedBuffers& b, PieceClaims& claims);

/// The number of pieces zeroCopyAllReduce cuts `call`'s message into.
uint64_t allReducePieces(const CollCall& call);

/// Reduces bytes [srcOffset, +bytes) of every rank's input (this rank's own first, so an in-place output may alias
/// it) into this rank's output at dstOffset, a cache-sized piece at a time; with `pushToAll` each finished piece is
/// also copied into every peer's output at dstOffset. Divides by p for hocclAvg.
void zeroCopyReduce(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                    size_t bytes, bool pushToAll);

/// Runs this rank's share of `call` (not an all-reduce: zeroCopyAllReduce) on rank `me` of `p` over the mapped
/// buffers.
void zeroCopyRun(const CollCall& call, int me, int p, const MappedBuffers& b);

}  // namespace hoccl::transport::shm
