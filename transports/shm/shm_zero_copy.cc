/*
 * The zero-copy loops of the single-copy collectives over mapped registered buffers (see shm_zero_copy.h).
 *
 * All-reduce: pieces claimed from shared counters. The message is cut into pieces of 128 KiB (a multiple of the
 * element size; the last one shorter), and the pieces into p blocks (block r: pieces [P*r/p, P*(r+1)/p), the share
 * rank r had when the shares were fixed). Rank r takes the pieces of its own block from the front, one at a time,
 * then the pieces left in the other blocks from the back (blocks r+1, r+2, ... in turn); it reduces each piece from
 * every rank's input, in rank order whoever claimed it (or in the order of the call's fold, CollCall::fold), and
 * writes it into every rank's output. A rank that copies faster (the two ranks' copies differ
 * by up to 30% here: docs/performance.md) takes pieces of the slower one's block instead of waiting for it in the
 * closing round, and each rank keeps touching the same part of the buffers from call to call while the ranks keep
 * pace (a single shared counter that dealt out the pieces in turn was slower than fixed shares in this session's
 * quiet run, 2891 against 1967 us at 16 MiB: the pieces a rank touched changed every call; docs/performance.md).
 * Block r's counter is one 64-bit word in rank r's arena region (Arena::claimWord(r)): the call's epoch (the low 16
 * bits of the arena round number of the call's address round, the same on every rank), the block's front and back
 * (24 bits each: the pieces [front, back) are left). Per call (shm_single_copy.cc runs the rounds):
 *   1. reset: before it publishes its address round (arena round e), every rank whose buffers are registered stores
 *      (e, 0, its block's size) into its own word.
 *   2. claim: after the address round (every rank has published e, so every reset of this call happened before any
 *      claim of it: each rank stores before its release, each claimer reads after its acquire), a rank loads a
 *      word and, while its epoch is e and front < back, swaps it with a compare-and-swap for (e, front+1, back)
 *      (own block: takes piece front) or (e, front, back-1) (another block: takes piece back-1). Front and back move
 *      in one word, so they never cross: every piece of a block is taken exactly once. A block found empty stays
 *      empty during the call, and a rank stops once every block was empty, so when every rank has stopped, every
 *      piece has been reduced, once.
 *   3. closing round: a rank publishes it after its last piece (streamed stores end with a store fence), and no rank
 *      returns before every rank has published it: all outputs are written, and nobody claims any more.
 * Why a late rank never takes a piece of the next call: a rank claims in call k+1 only after every rank published
 * k+1's address round, and a rank publishes it only after it left call k, so claims of two calls never overlap
 * while the ranks keep in step. If a rank leaves call k on an error (its range check failed; the peers' checks
 * passed) and resets its word for k+1 while a peer still claims in k, the peer's next swap on that word fails or
 * finds the epoch of k+1, and it takes nothing more from that block (its call then fails at the closing round,
 * which the other rank never publishes). The owner's reset makes the word belong to the new call whatever an
 * earlier call left in it, so the 16-bit epoch's wrap does not matter (a false match would need a rank 65536 arena
 * rounds behind its peers, who cannot pass a round without it). Memory safety does not rest on the counters: every
 * rank checked every peer's whole input and output against what that peer published before the first claim, and a
 * piece is never past the call's count.
 * In place: piece x of a rank's output is its input's piece x; only the rank that took x reads or writes piece x of
 * any buffer, and it reads every input's piece x before it writes any output's.
 */
#include "transports/shm/shm_zero_copy.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/fold_order.h"
#include "kernels/memory.h"

namespace hoccl::transport::shm {
namespace {

constexpr size_t kZeroCopyPiece = 128 << 10;  // bytes per piece: the reduced piece stays in L2 for its copies out

// From this many bytes of a rank's share the copies into the outputs stream past the caches (kernels::copyStreaming):
// the outputs then take no read for ownership and push nothing useful out of the caches (measured from 4 MiB shares:
// docs/performance.md, "Zero copy: streamed stores and a pushed all-gather"). Smaller shares keep regular stores, as
// before: their outputs may still be in cache when the caller reads them (not measured).
constexpr size_t kStreamMinBytes = size_t{4} << 20;

// Bytes per piece of `bytes` in elements of `elem`: kZeroCopyPiece (whole elements), larger when the message has more
// than 2^24 - 1 such pieces (a claim word's 24 bits per side).
size_t pieceBytes(size_t bytes, size_t elem) {
  size_t piece = std::max(elem, kZeroCopyPiece / elem * elem);
  constexpr size_t kMaxPieces = 0xffffff;
  if (bytes / piece >= kMaxPieces) piece = (bytes / kMaxPieces + elem) / elem * elem;
  return piece;
}

// Reduces bytes [x, x+m) of every rank's input at srcOffset into this rank's output at dstOffset (and, with
// pushToAll, every peer's): through `scratch` (a piece long) when streaming, else straight into this rank's output.
void reducePiece(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                 size_t x, size_t m, bool pushToAll, char* scratch) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t elem = kernels::typeSize(call.dtype), n = m / elem;
  const kernels::BinOp bin = kernels::binOpOf(call.op);
  char* out = b.recv[me] + dstOffset;
  char* acc = scratch ? scratch : out + x;
  // The ranks' inputs in rank order, whoever claimed the piece (so a float sum has the same bits on every call), or
  // in a schedule's order (CollCall::fold). foldInto keeps an in-place input intact until it is read.
  std::vector<const void*> sources(static_cast<size_t>(p));
  const size_t begin = (srcOffset + x) / elem;
  auto fold = [&](size_t from, size_t to, const std::vector<int>& order) {
    const size_t skip = (from - begin) * elem;
    for (int q = 0; q < p; ++q) sources[q] = b.send[q] + srcOffset + x + skip;
    kernels::foldInto(mem, acc + skip, sources, order, to - from, call.dtype, bin);
  };
  if (call.fold) {
    call.fold->forEach(begin, begin + n, fold);
  } else {
    thread_local std::vector<int> rankOrder;
    rankOrder.resize(static_cast<size_t>(p));
    std::iota(rankOrder.begin(), rankOrder.end(), 0);
    fold(begin, begin + n, rankOrder);
  }
  if (call.op == hocclAvg) mem.divide(acc, n, call.dtype, p);
  if (scratch) kernels::copyStreaming(out + x, acc, m);
  if (pushToAll)
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      if (scratch) kernels::copyStreaming(b.recv[q] + dstOffset + x, acc, m);
      else mem.copy(b.recv[q] + dstOffset + x, acc, m);
    }
}

// The private buffer a streamed piece is reduced into (it stays in L2 for the copies out).
char* scratchOf(size_t piece) {
  thread_local std::vector<char> scratch;
  if (scratch.size() < piece) scratch.resize(piece);
  return scratch.data();
}

constexpr uint64_t kSide = 0xffffff;  // front and back of a block in a claim word: 24 bits each

// First piece of block r of `pieces` among p.
uint64_t blockBegin(uint64_t pieces, int r, int p) {
  return pieces * static_cast<uint64_t>(r) / static_cast<uint64_t>(p);
}

}  // namespace

PieceClaims::PieceClaims(std::vector<std::atomic<uint64_t>*> words, int me, uint64_t epoch, uint64_t pieces)
    : words_(std::move(words)), me_(me), p_(static_cast<int>(words_.size())), tag_(epoch & 0xffff), pieces_(pieces) {}

void PieceClaims::reset(std::atomic<uint64_t>& own, int me, int p, uint64_t epoch, uint64_t pieces) {
  // Relaxed: the rank's release of its address round orders it before every claim of the call (see the top).
  const uint64_t size = blockBegin(pieces, me + 1, p) - blockBegin(pieces, me, p);
  own.store((epoch & 0xffff) << 48 | size, std::memory_order_relaxed);
}

bool PieceClaims::next(uint64_t& piece) {
  for (; k_ < p_; ++k_) {
    const int b = (me_ + k_) % p_;
    std::atomic<uint64_t>& word = *words_[b];
    uint64_t w = word.load(std::memory_order_relaxed);
    while ((w >> 48) == tag_) {
      const uint64_t front = (w >> 24) & kSide, back = w & kSide;
      if (front >= back) break;
      // Own block from the front, the others' from the back. Relaxed: a claim orders no data (the arena rounds
      // do); the word's own modification order keeps each piece taken once.
      const bool own = k_ == 0;
      if (word.compare_exchange_weak(w, own ? w + (uint64_t{1} << 24) : w - 1, std::memory_order_relaxed)) {
        piece = blockBegin(pieces_, b, p_) + (own ? front : back - 1);
        return true;
      }
    }
  }
  return false;
}

uint64_t allReducePieces(const CollCall& call) {
  const size_t elem = kernels::typeSize(call.dtype), bytes = call.count * elem;
  const size_t piece = pieceBytes(bytes, elem);
  return (bytes + piece - 1) / piece;
}

size_t zeroCopyAllReduce(const CollCall& call, int me, int p, const MappedBuffers& b, PieceClaims& claims) {
  const size_t elem = kernels::typeSize(call.dtype), bytes = call.count * elem;
  const size_t piece = pieceBytes(bytes, elem);
  // Streamed from the same share per rank as before the claims (bytes / p): the sizes measured stay where they were.
  char* scratch = p > 1 && bytes / static_cast<size_t>(p) >= kStreamMinBytes ? scratchOf(piece) : nullptr;
  size_t done = 0;
  for (uint64_t k; claims.next(k);) {
    const size_t x = static_cast<size_t>(k) * piece, m = std::min(piece, bytes - x);
    reducePiece(call, me, p, b, 0, 0, x, m, true, scratch);
    done += m;
  }
  return done;
}

void zeroCopyReduce(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                    size_t bytes, bool pushToAll) {
  const size_t elem = kernels::typeSize(call.dtype);
  const size_t piece = std::max(elem, kZeroCopyPiece / elem * elem);
  // Streaming: each piece is reduced into a private buffer that stays in L2, then streamed into every output, this
  // rank's own included; otherwise it is reduced straight into this rank's output and copied from there.
  const bool stream = pushToAll && p > 1 && bytes >= kStreamMinBytes;
  char* scratch = stream ? scratchOf(piece) : nullptr;
  for (size_t x = 0; x < bytes; x += piece)
    reducePiece(call, me, p, b, srcOffset, dstOffset, x, std::min(piece, bytes - x), pushToAll, scratch);
}

void zeroCopyRun(const CollCall& call, int me, int p, const MappedBuffers& b) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t elem = kernels::typeSize(call.dtype), bytes = call.count * elem;
  switch (call.coll) {
    case Coll::ReduceScatter: zeroCopyReduce(call, me, p, b, static_cast<size_t>(me) * bytes, 0, bytes, false); return;
    case Coll::AllGather: {
      // This rank's block into every output, a piece at a time: the piece is read from memory once and copied from
      // cache into the outputs, starting with this rank's own (in place it is already there) and going round the
      // peers from the next rank, so the ranks do not all write one output at once.
      const char* src = b.send[me];
      const size_t at = static_cast<size_t>(me) * bytes;
      const bool stream = bytes >= kStreamMinBytes;
      for (size_t x = 0; x < bytes; x += kZeroCopyPiece) {
        const size_t m = std::min(kZeroCopyPiece, bytes - x);
        for (int k = 0; k < p; ++k) {
          char* dst = b.recv[(me + k) % p] + at + x;
          if (dst == src + x) continue;
          if (stream) kernels::copyStreaming(dst, src + x, m);
          else mem.copy(dst, src + x, m);
        }
      }
      return;
    }
    case Coll::Broadcast:
      if (b.recv[me] != b.send[call.root]) mem.copy(b.recv[me], b.send[call.root], bytes);
      return;
    default: throwInternalError("zero copy given a collective it does not implement");
  }
}

}  // namespace hoccl::transport::shm
