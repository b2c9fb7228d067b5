/*
 * Single-copy collectives through cross-memory attach (see shm_single_copy.h).
 *
 * Every collective is two arena rounds (shm_session.h): in the first each rank publishes the addresses and sizes of
 * its send and receive buffers, stamped with its call; between them every rank does its copies; after the second no
 * peer touches this rank's buffers any more (so the call may return). A call started only for registered buffers
 * (startIfRegistered: the tuner found the path through the kernel slower than a schedule) ends after the first
 * round on every rank when any rank's buffers are not registered: nobody has touched a peer's memory, and the caller
 * runs the schedule instead. Before any copy, every rank has checked that
 * every peer made the same call (the stamp) and that every range it will read from or write into a peer lies inside
 * the buffer that peer published: no byte of a peer is touched without both sides agreeing on the sizes.
 * The copies, with p ranks:
 *   all-reduce      the count is cut into p blocks; rank r pulls block r of every peer's input, a piece at a time
 *                   into private cache-resident buffers (256 KiB per peer, 512 KiB in all at most), reduces it
 *                   with its own input straight into its output (own input first, then the peers' in rank order,
 *                   or in the order of the call's fold), and pushes the finished piece, still in cache, into every
 *                   peer's output (process_vm_writev). Per rank 2(p-1)/p of the message crosses, once each. (Zero copy
 *                   instead hands the pieces of the whole message to whichever rank asks first, from a counter in
 *                   the arena that every rank resets before it publishes its address round: shm_zero_copy.cc.)
 *   reduce-scatter  all-reduce without the push, on the peers' blocks r.
 *   all-gather      each rank copies its own block locally and pulls every other block from its owner's input
 *                   (zero copy pushes instead: each rank copies its block into every rank's output, shm_zero_copy.h).
 *   broadcast       receivers pull the message from the root's buffer; an in-place root (no local copy to make)
 *                   meanwhile pushes the last 1/p of it into every receiver (process_vm_writev), so both sides work.
 *   all-to-all      rank r pulls block r of every peer's input straight into block q of its output. A rank whose
 *                   output overlaps its input (in place) cannot write block q before peer q has read it, so it pulls
 *                   into a private staging buffer instead and copies that into its output after the closing round
 *                   (when no peer reads its input any more): one more local copy, on that rank only. The choice is
 *                   each rank's own: a peer reads only this rank's input, which an out-of-place rank never writes.
 * In-place calls are safe: block q of a rank's buffer is read and written only by rank q (all-reduce) or only by
 * the rank itself (all-to-all: see above), and a piece is pushed only after it was pulled. Each block is reduced by
 * one rank only, so every rank ends with the same bits.
 */
#include "transports/shm/shm_single_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"
#include "kernels/cpu/copy.h"
#include "kernels/fold_order.h"
#include "kernels/shared_mem.h"
#include "transports/shm/shm_price.h"
#include "transports/shm/shm_small.h"
#include "transports/shm/shm_zero_copy.h"

namespace hoccl::transport::shm {
namespace {

constexpr size_t kPiece = 256 << 10;  // bytes reduced per pull: stays in L2 between the pull and the reduction
constexpr size_t kCacheLine = 64;
constexpr size_t kKernelMinBytes = 4 << 20;  // the smallest call the tuner may send through the kernel
// From one page up, a misaligned copy goes through the bounce buffer: the crawl (0.67 against 4.2-5.5 GB/s for 64 MiB,
// tools/bench/cma_bw 16) costs more per byte than the extra memcpy of a piece in cache; below, either is negligible.
constexpr size_t kBounceMinBytes = 4096;

/// The first address at or after `buffer` that lies at the same offset within a cache line as `like`. The kernel
/// copies process_vm_readv/writev with `rep movsb`, which crawls when source and destination sit at different offsets
/// within a cache line (`tools/bench/cma_bw 16`: 0.67 GB/s, against 4.17 at offset 0); `buffer` needs 2 x kCacheLine
/// bytes of slack.
char* alignedLike(char* buffer, const void* like) {
  const auto base = (reinterpret_cast<uintptr_t>(buffer) + kCacheLine - 1) & ~(kCacheLine - 1);
  return reinterpret_cast<char*>(base + reinterpret_cast<uintptr_t>(like) % kCacheLine);
}

/// What each rank publishes in the address round. The shared descriptors travel only when the arena's payload
/// holds them (kFullBuffers); otherwise every rank publishes the first kBasicBuffers bytes and zero copy is off.
struct Buffers {
  uint64_t send;          ///< address of the input (0 when the rank has none)
  uint64_t recv;          ///< address of the output
  uint64_t sendBytes;     ///< its length
  uint64_t recvBytes;     ///< its length
  SharedDesc sendShared;  ///< where the input lies in shared memory, when it is registered (fd -1: not)
  SharedDesc recvShared;  ///< same for the output
};
constexpr size_t kBasicBuffers = 4 * sizeof(uint64_t);
constexpr size_t kFullBuffers = sizeof(Buffers);
static_assert(kBasicBuffers <= kArenaInlineBytes, "the basic address round fits in the line");

size_t elemSize(const CollCall& c) { return kernels::typeSize(c.dtype); }

size_t blockBegin(size_t count, int q, int p) { return count * static_cast<size_t>(q) / static_cast<size_t>(p); }

class SingleCopyOp final : public ShortcutOp {
 public:
  // The call's blocks and registrations are pinned by the caller (the C edge) until the op is over.
  // `onlyRegistered`: the call runs only if every rank's buffers are registered (else declined() after round 1).
  SingleCopyOp(ArenaSession& s, PeerMaps& maps, const CollCall& call, bool onlyRegistered)
      : s_(s), maps_(maps), call_(call), onlyRegistered_(onlyRegistered) {}
  bool poll() override;
  bool declined() const override { return declined_; }
  std::string missing() const override { return exchange_ ? exchange_->missing() : "nobody"; }

 private:
  size_t publishedBytes() const { return s_.arena().maxBytes() >= kFullBuffers ? kFullBuffers : kBasicBuffers; }
  void checkRanges(bool zeroCopy) const;
  void requireInside(int peer, bool recv, size_t offset, size_t bytes) const;
  void crossCopy(int peer, char* local, const char* remote, size_t bytes, bool push) const;
  void kernelCopy(int peer, pid_t pid, char* local, const char* remote, size_t bytes, bool push) const;
  [[noreturn]] void copyFailed(int peer, const char* how, int err) const;
  void copyPhase();
  void reducePhase();
  void reduceBlock(size_t srcOffset, size_t blockBytes, const char* mine, char* out, const kernels::FoldOrder& fold);
  bool allRegistered() const;
  bool mayClaim() const;
  void zeroCopyPhase();
  void allToAllPhase(const MappedBuffers* mapped);
  void finishStaged();

  ArenaSession& s_;
  PeerMaps& maps_;
  CollCall call_;
  bool onlyRegistered_;
  bool declined_ = false;  // onlyRegistered_ and some rank's buffers are not registered: nothing was touched
  Buffers mine_{};         // published from here (it may not fit in the line)
  bool copied_ = false;    // this rank's copies are done (the closing round runs)
  std::unique_ptr<Exchange> exchange_;
  std::vector<Buffers> peer_;       // every rank's buffers, from the address round
  std::unique_ptr<char[]> staged_;  // in-place all-to-all: the peers' blocks, in rank order without this rank's own
  uint64_t addressSeq_ = 0;         // the arena round of the address round: the epoch of the all-reduce's claims
};

// True when the call's input and output overlap on this rank (an in-place all-to-all stages its pulls).
bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a && b && aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

bool SingleCopyOp::poll() {
  const int n = s_.nranks();
  if (!exchange_) {  // round 1: swap addresses and sizes (and where registered buffers lie in shared memory)
    const size_t in = call_.sendbuf ? inputBytes(call_, n) : 0, out = outputBytes(call_, n);
    mine_ = Buffers{reinterpret_cast<uint64_t>(call_.sendbuf),
                    reinterpret_cast<uint64_t>(call_.recvbuf),
                    in,
                    out,
                    describeShared(s_.ctx().registrations, call_.sendbuf, in),
                    describeShared(s_.ctx().registrations, call_.recvbuf, out)};
    exchange_ = std::make_unique<Exchange>(s_, call_, Protocol::CopyAddresses, &mine_, publishedBytes(), true);
    addressSeq_ = exchange_->seq();
    // Before publishing (the exchange publishes in poll): the zero-copy all-reduce's counter starts over for this
    // call (protocol in shm_zero_copy.cc).
    if (mayClaim())
      PieceClaims::reset(s_.arena().claimWord(s_.rank()), s_.rank(), n, addressSeq_, allReducePieces(call_));
  }
  if (!exchange_->poll()) return false;
  if (copied_) {  // round 2 is over: nobody touches this rank's buffers any more
    finishStaged();
    return true;
  }
  peer_.assign(n, Buffers{});
  for (int r = 0; r < n; ++r) std::memcpy(&peer_[r], exchange_->payloadOf(r), publishedBytes());
  // Every rank sees the same published descriptors, so every rank takes the same path.
  const bool zeroCopy = allRegistered();
  if (onlyRegistered_ && !zeroCopy) {  // every rank declines: no peer's memory was touched, so no closing round
    declined_ = true;
    return true;
  }
  checkRanges(zeroCopy);
  if (zeroCopy) zeroCopyPhase();
  else if (call_.coll == Coll::AllReduce || call_.coll == Coll::ReduceScatter) reducePhase();
  else if (call_.coll == Coll::AlltoAll) allToAllPhase(nullptr);
  else copyPhase();
  copied_ = true;
  exchange_ = std::make_unique<Exchange>(s_, call_, Protocol::CopyDone, nullptr, 0, true);  // round 2
  if (!exchange_->poll()) return false;
  finishStaged();
  return true;
}

void SingleCopyOp::requireInside(int peer, bool recv, size_t offset, size_t bytes) const {
  const Buffers& b = peer_[peer];
  const uint64_t have = recv ? b.recvBytes : b.sendBytes;
  if ((recv ? b.recv : b.send) != 0 && offset <= have && bytes <= have - offset) return;
  throw Error(hocclInvalidUsage,
              fmt::format("{}: {} [single copy] would {} bytes [{}, {}) of the {} buffer of {}, which published {} "
                          "bytes at {:#x}. Nothing was copied. Do all ranks pass buffers of the documented size?",
                          s_.ctx().who, describeCall(call_), recv ? "write" : "read", offset, offset + bytes,
                          recv ? "receive" : "send", s_.describeRank(peer), have, recv ? b.recv : b.send));
}

// Every range this rank will touch in a peer, checked against what that peer published, before the first copy.
// `zeroCopy`: the copies run over the peers' mappings (zeroCopyPhase), where all-gather writes this rank's block into
// the peers' outputs instead of reading their inputs.
void SingleCopyOp::checkRanges(bool zeroCopy) const {
  const int me = s_.rank(), p = s_.nranks();
  const size_t elem = elemSize(call_), bytes = call_.count * elem;
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    switch (call_.coll) {
      case Coll::AllReduce: {
        if (zeroCopy) {  // any rank may take any piece: every peer's whole input and output
          requireInside(q, false, 0, bytes);
          requireInside(q, true, 0, bytes);
          break;
        }
        const size_t off = blockBegin(call_.count, me, p) * elem;
        const size_t len = blockBegin(call_.count, me + 1, p) * elem - off;
        requireInside(q, false, off, len);
        requireInside(q, true, off, len);
        break;
      }
      case Coll::ReduceScatter: requireInside(q, false, static_cast<size_t>(me) * bytes, bytes); break;
      case Coll::AllGather:
        if (zeroCopy) requireInside(q, true, static_cast<size_t>(me) * bytes, bytes);
        else requireInside(q, false, 0, bytes);
        break;
      case Coll::AlltoAll: requireInside(q, false, static_cast<size_t>(me) * bytes, bytes); break;
      case Coll::Broadcast:
        if (me != call_.root) {
          if (q == call_.root) requireInside(q, false, 0, bytes);
        } else {
          requireInside(q, true, 0, bytes);
        }
        break;
      default: throwInternalError("single copy given a collective it does not implement");
    }
  }
}

// This rank's buffers are registered and published in full, so the call may run zero copy: an all-reduce then
// claims pieces.
bool SingleCopyOp::mayClaim() const {
  return call_.coll == Coll::AllReduce && publishedBytes() >= kFullBuffers && mine_.recvShared.fd >= 0 &&
         (!mine_.send || mine_.sendShared.fd >= 0);
}

bool SingleCopyOp::allRegistered() const {
  if (publishedBytes() < kFullBuffers) return false;
  for (const Buffers& b : peer_)
    if ((b.send && b.sendShared.fd < 0) || b.recvShared.fd < 0) return false;
  return true;
}

void SingleCopyOp::zeroCopyPhase() {
  const int me = s_.rank(), p = s_.nranks();
  MappedBuffers mb;
  mb.send.resize(p);
  mb.recv.resize(p);
  const std::string& who = s_.ctx().who;
  for (int q = 0; q < p; ++q) {
    const Buffers& b = peer_[q];
    if (q == me) {
      mb.send[q] = static_cast<const char*>(call_.sendbuf);
      mb.recv[q] = static_cast<char*>(call_.recvbuf);
      continue;
    }
    // Only what this rank will touch (the ranges were checked against the published sizes).
    const bool readsInput = call_.coll == Coll::Broadcast ? q == call_.root : call_.coll != Coll::AllGather;
    const bool writesOutput = call_.coll == Coll::AllReduce || call_.coll == Coll::AllGather;
    if (readsInput && b.send) mb.send[q] = maps_.map(q, b.sendShared, b.send, b.sendBytes, who);
    if (writesOutput) mb.recv[q] = maps_.map(q, b.recvShared, b.recv, b.recvBytes, who);
  }
  if (call_.coll == Coll::AlltoAll) return allToAllPhase(&mb);
  size_t claimed = 0;
  if (call_.coll == Coll::AllReduce) {
    std::vector<std::atomic<uint64_t>*> words(p);
    for (int r = 0; r < p; ++r) words[r] = &s_.arena().claimWord(r);
    PieceClaims claims(std::move(words), me, addressSeq_, allReducePieces(call_));
    claimed = zeroCopyAllReduce(call_, me, p, mb, claims);
  } else {
    zeroCopyRun(call_, me, p, mb);
  }
  const size_t elem = elemSize(call_), bytes = call_.count * elem;
  for (int q = 0; q < p; ++q) {  // the bytes each pair moved, as the cross-memory paths count them
    if (q == me) continue;
    switch (call_.coll) {
      // All-reduce: what this rank read from q's input and wrote into q's output, its claimed pieces (which piece
      // went to which rank is known only here; the counters of all ranks together still balance).
      case Coll::AllReduce: s_.count(q, claimed, claimed); break;
      case Coll::ReduceScatter:
      case Coll::AllGather: s_.count(q, bytes, bytes); break;
      default:
        if (me == call_.root) s_.count(q, bytes, 0);
        else if (q == call_.root) s_.count(q, 0, bytes);
        break;
    }
  }
}

[[noreturn]] void SingleCopyOp::copyFailed(int peer, const char* how, int err) const {
  throwRemoteError(
      fmt::format("{}: {} [single copy] could not {} the memory of {}: {}. The peer may have died; if "
                  "it is alive, set HOCCL_CMA_MIN_BYTES=0 to copy through shared memory instead",
                  s_.ctx().who, describeCall(call_), how, s_.describeRank(peer), std::strerror(err)));
}

// Copies `bytes` from `remote` in peer's address space to `local` (or the other way round when push). When the two
// sit at different offsets within a cache line, the kernel's copy crawls (alignedLike); from kBounceMinBytes up the
// bytes then go through a buffer of this thread's laid out like `remote`, a piece at a time, and kernels::copy (which
// copies misaligned data at full speed, kernels/cpu/copy.cc) does the rest.
void SingleCopyOp::crossCopy(int peer, char* local, const char* remote, size_t bytes, bool push) const {
  const pid_t pid = s_.ctx().connect->peers[peer].pid;
  if (pid == getpid()) {  // a thread of this process (hocclCommInitAll): same address space
    if (push) kernels::copy(const_cast<char*>(remote), local, bytes);
    else kernels::copy(local, remote, bytes);
    return;
  }
  const bool misaligned = (reinterpret_cast<uintptr_t>(local) - reinterpret_cast<uintptr_t>(remote)) % kCacheLine != 0;
  if (misaligned && bytes >= kBounceMinBytes) {
    thread_local std::vector<char> bounceBuffer;
    bounceBuffer.resize(kPiece + 2 * kCacheLine);
    for (size_t x = 0; x < bytes; x += kPiece) {
      const size_t m = std::min(kPiece, bytes - x);
      char* bounce = alignedLike(bounceBuffer.data(), remote + x);
      if (push) kernels::copy(bounce, local + x, m);
      kernelCopy(peer, pid, bounce, remote + x, m, push);
      if (!push) kernels::copy(local + x, bounce, m);
    }
    return;
  }
  kernelCopy(peer, pid, local, remote, bytes, push);
}

void SingleCopyOp::kernelCopy(int peer, pid_t pid, char* local, const char* remote, size_t bytes, bool push) const {
  while (bytes) {
    iovec l{local, bytes};
    iovec r{const_cast<char*>(remote), bytes};
    ssize_t done = push ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (done <= 0) copyFailed(peer, push ? "write" : "read", done < 0 ? errno : EIO);
    local += done;
    remote += done;
    bytes -= static_cast<size_t>(done);
  }
}

void SingleCopyOp::reducePhase() {
  const int me = s_.rank(), p = s_.nranks();
  const size_t elem = elemSize(call_);
  // This rank's block: where it lies in every rank's input, and where the result goes.
  size_t srcOffset, blockBytes;
  char* out;
  if (call_.coll == Coll::AllReduce) {
    srcOffset = blockBegin(call_.count, me, p) * elem;
    blockBytes = blockBegin(call_.count, me + 1, p) * elem - srcOffset;
    out = static_cast<char*>(call_.recvbuf) + srcOffset;
  } else {
    srcOffset = static_cast<size_t>(me) * call_.count * elem;
    blockBytes = call_.count * elem;
    out = static_cast<char*>(call_.recvbuf);
  }
  const char* mine = static_cast<const char*>(call_.sendbuf) + srcOffset;
  if (call_.fold) {
    reduceBlock(srcOffset, blockBytes, mine, out, *call_.fold);
  } else {  // the single copy's own order: this rank's input first (read before an in-place output is written), then
            // every peer's in rank order
    kernels::FoldOrder own;
    own.orders.push_back({me});
    for (int q = 0; q < p; ++q)
      if (q != me) own.orders[0].push_back(q);
    own.segments.push_back({0, 0});
    reduceBlock(srcOffset, blockBytes, mine, out, own);
  }
  // Between this rank and peer q cross: q's input block r (in) and q's input block q (out, read by q); for
  // all-reduce also the result block r (out, pushed) and the result block q (in, pushed by q).
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    size_t theirs = blockBytes;
    if (call_.coll == Coll::AllReduce)
      theirs = (blockBegin(call_.count, q + 1, p) - blockBegin(call_.count, q, p)) * elem;
    const size_t both = call_.coll == Coll::AllReduce ? blockBytes + theirs : blockBytes;
    s_.count(q, both, both);
  }
}

void SingleCopyOp::reduceBlock(size_t srcOffset, size_t blockBytes, const char* mine, char* out,
                               const kernels::FoldOrder& fold) {
  const int me = s_.rank(), p = s_.nranks();
  const size_t elem = elemSize(call_);
  const kernels::MemoryOps& mem = kernels::memoryOps(call_.recvKind);
  constexpr size_t kPage = 4096;  // a multiple of every element size
  const size_t budget = std::min(kPiece, 2 * kPiece / static_cast<size_t>(std::max(1, p - 1)));
  const size_t piece = std::max(kPage, budget / kPage * kPage);
  const size_t slot = piece + 2 * kCacheLine;
  thread_local std::vector<char> pulled;
  pulled.resize(slot * static_cast<size_t>(p));
  const kernels::BinOp bin = kernels::binOpOf(call_.op);
  std::vector<const char*> at(static_cast<size_t>(p));
  std::vector<const void*> sources(static_cast<size_t>(p));
  for (size_t x = 0; x < blockBytes; x += piece) {
    const size_t m = std::min(piece, blockBytes - x);
    for (int q = 0; q < p; ++q) {
      if (q == me) {
        at[q] = mine + x;
        continue;
      }
      const char* remote = reinterpret_cast<const char*>(peer_[q].send) + srcOffset + x;
      char* buffer = alignedLike(pulled.data() + slot * static_cast<size_t>(q), remote);
      crossCopy(q, buffer, remote, m, false);
      at[q] = buffer;
    }
    const size_t first = (srcOffset + x) / elem;
    fold.forEach(first, first + m / elem, [&](size_t b, size_t e, const std::vector<int>& order) {
      const size_t skip = (b - first) * elem;
      for (int q = 0; q < p; ++q) sources[q] = at[q] + skip;
      kernels::foldInto(mem, out + x + skip, sources, order, e - b, call_.dtype, bin);
    });
    if (call_.op == hocclAvg) mem.divide(out + x, m / elem, call_.dtype, p);
    if (call_.coll == Coll::AllReduce)  // hand the finished piece, still in cache, to every peer's output
      for (int q = 0; q < p; ++q)
        if (q != me) crossCopy(q, out + x, reinterpret_cast<const char*>(peer_[q].recv) + srcOffset + x, m, true);
  }
}

// All-to-all: block me of every rank's input into block q of this rank's output, through the peers' mappings when
// `mapped` is given (zero copy), else by process_vm_readv. In place, the peers' blocks go to staged_ first.
void SingleCopyOp::allToAllPhase(const MappedBuffers* mapped) {
  const int me = s_.rank(), p = s_.nranks();
  const size_t bytes = call_.count * elemSize(call_), total = bytes * static_cast<size_t>(p);
  const kernels::MemoryOps& mem = kernels::memoryOps(call_.recvKind);
  char* out = static_cast<char*>(call_.recvbuf);
  const char* in = static_cast<const char*>(call_.sendbuf);
  const bool inPlace = overlaps(in, total, out, total);
  if (inPlace) staged_.reset(new char[bytes * static_cast<size_t>(p - 1)]);  // not zeroed: every byte is pulled
  // Own block: in place it is already where it belongs (a rank reads and writes only its own block me).
  if (out + static_cast<size_t>(me) * bytes != in + static_cast<size_t>(me) * bytes)
    mem.copy(out + static_cast<size_t>(me) * bytes, in + static_cast<size_t>(me) * bytes, bytes);
  for (int k = 1; k < p; ++k) {  // peers in a rotated order, so the ranks do not all read one rank at once
    const int q = (me + k) % p;
    char* dst = inPlace ? staged_.get() + static_cast<size_t>(q < me ? q : q - 1) * bytes
                        : out + static_cast<size_t>(q) * bytes;
    if (mapped) mem.copy(dst, mapped->send[q] + static_cast<size_t>(me) * bytes, bytes);
    else
      crossCopy(q, dst, reinterpret_cast<const char*>(peer_[q].send) + static_cast<size_t>(me) * bytes, bytes, false);
    s_.count(q, bytes, bytes);
  }
}

// After the closing round of an in-place all-to-all: the staged peers' blocks into the output.
void SingleCopyOp::finishStaged() {
  if (!staged_) return;
  const int me = s_.rank(), p = s_.nranks();
  const size_t bytes = call_.count * elemSize(call_);
  const kernels::MemoryOps& mem = kernels::memoryOps(call_.recvKind);
  char* out = static_cast<char*>(call_.recvbuf);
  for (int q = 0; q < p; ++q)
    if (q != me)
      mem.copy(out + static_cast<size_t>(q) * bytes, staged_.get() + static_cast<size_t>(q < me ? q : q - 1) * bytes,
               bytes);
  staged_.reset();
}

void SingleCopyOp::copyPhase() {
  const int me = s_.rank(), p = s_.nranks();
  const size_t bytes = call_.count * elemSize(call_);
  const kernels::MemoryOps& mem = kernels::memoryOps(call_.recvKind);
  char* out = static_cast<char*>(call_.recvbuf);
  if (call_.coll == Coll::AllGather) {
    char* own = out + static_cast<size_t>(me) * bytes;
    if (own != call_.sendbuf) mem.copy(own, call_.sendbuf, bytes);
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      crossCopy(q, out + static_cast<size_t>(q) * bytes, reinterpret_cast<const char*>(peer_[q].send), bytes, false);
      s_.count(q, bytes, bytes);
    }
    return;
  }
  // Broadcast. An in-place root has no local copy to make, so it pushes the tail share of every receiver.
  const int root = call_.root;
  const bool rootInPlace = peer_[root].send == peer_[root].recv;
  const size_t share = rootInPlace ? bytes / static_cast<size_t>(p) / 64 * 64 : 0;
  if (me != root) {
    crossCopy(root, out, reinterpret_cast<const char*>(peer_[root].send), bytes - share, false);
    s_.count(root, 0, bytes);
    return;
  }
  if (!rootInPlace) mem.copy(out, call_.sendbuf, bytes);
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    if (share)
      crossCopy(q, const_cast<char*>(static_cast<const char*>(call_.sendbuf)) + bytes - share,
                reinterpret_cast<const char*>(peer_[q].recv) + bytes - share, share, true);
    s_.count(q, bytes, 0);
  }
}

}  // namespace

SingleCopyShortcut::SingleCopyShortcut(std::shared_ptr<ArenaSession> session)
    : session_(std::move(session)), maps_(std::make_unique<PeerMaps>(*session_->ctx().connect)),
      userThreshold_(params::CMA_MIN_BYTES.isSet()), minBytes_(static_cast<size_t>(params::CMA_MIN_BYTES.get())) {}

bool SingleCopyShortcut::canRun(const CollCall& call) const {
  switch (call.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll: break;
    default: return false;
  }
  if (minBytes_ == 0 || call.op >= hocclNumOps || !kernels::isHostKind(call.sendKind) ||
      !kernels::isHostKind(call.recvKind))
    return false;
  // Measured crossovers against the slot schedules, 2 ranks (docs/performance.md): all-gather 32 KiB, broadcast
  // 128 KiB, all-reduce and reduce-scatter 256 KiB (the registered default). HOCCL_CMA_MIN_BYTES, when set, applies
  // to all.
  size_t threshold = minBytes_;
  if (!userThreshold_ && call.coll == Coll::AllGather) threshold = 32 << 10;
  if (!userThreshold_ && call.coll == Coll::Broadcast) threshold = 128 << 10;
  // All-to-all: from 16 MiB. At 4 MiB single copy was 20-25% slower than the slots with 4 and 8 ranks on 2 cores, at
  // 16-64 MiB 1.15-1.8x faster with 2, 4 and 8 ranks (docs/performance.md, zero copy, second session).
  if (!userThreshold_ && call.coll == Coll::AlltoAll) threshold = 16 << 20;
  const int n = session_->nranks();
  return std::max(inputBytes(call, n), outputBytes(call, n)) >= threshold;  // nccl-tests' "size": the larger buffer
}

bool SingleCopyShortcut::choosableOnOrdinaryBuffers(const CollCall& call) const {
  // Through the kernel, all-reduce, reduce-scatter and all-gather only from kKernelMinBytes. Below, what every rank
  // reads and writes stays in the last-level cache and the slot schedules' copies run at about twice the rates the
  // model gives them, which it cannot see (2 and 4 ranks, 2026-11-27: at 1 MiB the ring took 0.65-0.73x single copy's
  // time, at 4 MiB 1.1-1.3x; docs/performance.md). Registered buffers keep canRun's threshold.
  const bool bulk = call.coll == Coll::AllReduce || call.coll == Coll::ReduceScatter || call.coll == Coll::AllGather;
  const int n = session_->nranks();
  return !bulk || userThreshold_ || std::max(inputBytes(call, n), outputBytes(call, n)) >= kKernelMinBytes;
}

double SingleCopyShortcut::predictSeconds(const CollCall& call, const topo::LinkModel& model) const {
  return singleCopySeconds(call, session_->nranks(), model, false);  // shm_price.h
}

std::optional<double> SingleCopyShortcut::predictRegisteredSeconds(const CollCall& call,
                                                                   const topo::LinkModel& model) const {
  if (session_->arena().maxBytes() < kFullBuffers) return std::nullopt;  // the shared descriptors cannot travel
  return singleCopySeconds(call, session_->nranks(), model, true);
}

std::unique_ptr<ShortcutOp> SingleCopyShortcut::start(const CollCall& call) {
  return std::make_unique<SingleCopyOp>(*session_, *maps_, call, false);
}

std::unique_ptr<ShortcutOp> SingleCopyShortcut::startIfRegistered(const CollCall& call) {
  return std::make_unique<SingleCopyOp>(*session_, *maps_, call, true);
}

}  // namespace hoccl::transport::shm
