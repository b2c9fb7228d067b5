/*
 * Single-copy collectives through cross-memory attach (see cma_coll.h).
 *
 * Every collective is two arena rounds: in the first each rank publishes the addresses of its send and receive
 * buffers; between them every rank does its copies; after the second no peer touches this rank's buffers any more
 * (so the call may return). The copies, with p ranks:
 *   all-reduce      the count is cut into p blocks; rank r pulls block r of every peer's input, a piece of 256 KiB
 *                   at a time into a private cache-resident buffer, reduces it with its own input straight into
 *                   its output, and pushes the finished piece, still in cache, into every peer's output
 *                   (process_vm_writev). Per rank 2(p-1)/p of the message crosses, once each, and no byte is read
 *                   back from memory to be forwarded (measured against pulling the results in a second phase:
 *                   as fast or faster, 1 MiB 160-250 -> 110-180 us).
 *   reduce-scatter  all-reduce without the push, on the peers' blocks r.
 *   all-gather      each rank copies its own block locally and pulls every other block from its owner's input.
 *   broadcast       receivers pull the message from the root's buffer; an in-place root (no local copy to make)
 *                   meanwhile pushes the last 1/p of it into every receiver (process_vm_writev), so both sides work.
 * In-place calls are safe: block q of a rank's buffer is read and written only by rank q (all-reduce) or only by
 * the rank itself, and a piece is pushed only after it was pulled. Each block is reduced by one rank only, so every
 * rank ends with the same bits.
 */
#include "comm/cma_coll.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "comm/plan.h"
#include "comm/redop.h"
#include "base/error.h"
#include "base/params.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/shm_arena.h"
#include "transports/transport_util.h"

namespace hoccl::cma {
namespace {

using sched::Coll;

constexpr const char* kPath = "single copy";  // names this path in messages
constexpr size_t kPiece = 256 << 10;  // bytes reduced per pull: stays in L2 between the pull and the reduction

struct Addresses {
  uint64_t send;
  uint64_t recv;
};

size_t elemSize(const Op& op) { return kernels::typeSize(op.dtype); }

// nccl-tests' "size": the larger of the two buffers.
size_t messageBytes(const Op& op) {
  const size_t bytes = op.count * elemSize(op);
  return (op.coll == Coll::AllGather || op.coll == Coll::ReduceScatter) ? bytes * op.comm->nranks() : bytes;
}

size_t blockBegin(size_t count, int q, int p) { return count * static_cast<size_t>(q) / static_cast<size_t>(p); }

[[noreturn]] void copyFailed(const Op& op, int peer, const char* how, int err) {
  Communicator& c = *op.comm;
  throwRemoteError(fmt::format("{}: {} [single copy] could not {} the memory of {}: {}. The peer may have died; if "
                               "it is alive, set HOCCL_CMA_MIN_BYTES=0 to copy through shared memory instead",
                               c.describe(), describeOp(op), how, transport::describePeer(c.rankInfo()[peer]),
                               std::strerror(err)));
}

// Copies `bytes` from `remote` in peer's address space to `local` (or the other way round when push).
void crossCopy(const Op& op, int peer, char* local, const char* remote, size_t bytes, bool push) {
  const pid_t pid = op.comm->rankInfo()[peer].pid;
  if (pid == getpid()) {  // a thread of this process (hocclCommInitAll): same address space
    if (push) std::memcpy(const_cast<char*>(remote), local, bytes);
    else std::memcpy(local, remote, bytes);
    return;
  }
  while (bytes) {
    iovec l{local, bytes};
    iovec r{const_cast<char*>(remote), bytes};
    ssize_t done = push ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (done <= 0) copyFailed(op, peer, push ? "write" : "read", done < 0 ? errno : EIO);
    local += done;
    remote += done;
    bytes -= static_cast<size_t>(done);
  }
}

void count(Communicator& c, int peer, size_t sent, size_t received) {
  const hocclLinkClass_t cls = c.topology().linkClass(c.rank(), peer);
  c.counters().sent[cls] += sent;
  c.counters().received[cls] += received;
}

}  // namespace

bool eligible(const Op& op) {
  const transport::shm::Arena* arena = op.comm->arena();
  if (!arena || !arena->crossMemory() || op.kind != Op::Kind::Collective) return false;
  switch (op.coll) {
    case Coll::AllReduce: case Coll::Broadcast: case Coll::AllGather: case Coll::ReduceScatter: break;
    default: return false;
  }
  if (op.op >= hocclNumOps) return false;  // PreMulSum: the general path scales the input first
  static const bool forced = !params::getString("ALGO").empty();
  static const bool chosen = params::get("CMA_MIN_BYTES").has_value();
  static const int64_t minBytes = params::getInt("CMA_MIN_BYTES");
  if (forced || minBytes <= 0) return false;
  // Measured crossovers against the slot path, 2 ranks (docs/performance.md): all-gather 32 KiB, broadcast 128 KiB,
  // all-reduce and reduce-scatter 256 KiB (the registered default). HOCCL_CMA_MIN_BYTES, when set, applies to all.
  size_t threshold = static_cast<size_t>(minBytes);
  if (!chosen && op.coll == Coll::AllGather) threshold = 32 << 10;
  if (!chosen && op.coll == Coll::Broadcast) threshold = 128 << 10;
  return messageBytes(op) >= threshold;
}

Collective::Collective(const Op& op) : op_(op) {}
Collective::~Collective() = default;

bool Collective::poll() {
  Communicator& c = *op_.comm;
  if (!exchange_) {  // round 1: swap addresses
    Addresses mine{reinterpret_cast<uint64_t>(op_.sendbuf), reinterpret_cast<uint64_t>(op_.recvbuf)};
    exchange_ = std::make_unique<small::Exchange>(op_, &mine, sizeof(mine), kPath);
  }
  if (!exchange_->poll()) return false;
  if (copied_) return true;  // round 2 is over: nobody touches this rank's buffers any more
  peerSend_.resize(c.nranks());
  peerRecv_.resize(c.nranks());
  for (int r = 0; r < c.nranks(); ++r) {
    Addresses a;
    std::memcpy(&a, exchange_->payloadOf(r), sizeof(a));
    peerSend_[r] = reinterpret_cast<const char*>(a.send);
    peerRecv_[r] = reinterpret_cast<const char*>(a.recv);
  }
  if (op_.coll == Coll::AllReduce || op_.coll == Coll::ReduceScatter) reducePhase();
  else copyPhase();
  copied_ = true;
  exchange_ = std::make_unique<small::Exchange>(op_, nullptr, 0, kPath);  // round 2: the copies are over
  return exchange_->poll();
}

std::string Collective::missing() const { return exchange_ ? exchange_->missing() : "nobody"; }

void Collective::reducePhase() {
  Communicator& c = *op_.comm;
  const int me = c.rank(), p = c.nranks();
  const size_t elem = elemSize(op_);
  // This rank's block: where it lies in every rank's input, and where the result goes.
  size_t srcOffset, blockBytes;
  char* out;
  if (op_.coll == Coll::AllReduce) {
    srcOffset = blockBegin(op_.count, me, p) * elem;
    blockBytes = blockBegin(op_.count, me + 1, p) * elem - srcOffset;
    out = static_cast<char*>(op_.recvbuf) + srcOffset;
  } else {
    srcOffset = static_cast<size_t>(me) * op_.count * elem;
    blockBytes = op_.count * elem;
    out = static_cast<char*>(op_.recvbuf);
  }
  const char* mine = static_cast<const char*>(op_.sendbuf) + srcOffset;
  thread_local std::vector<char> piece;
  piece.resize(kPiece);
  const kernels::BinOp bin = binOpOf(op_.op);
  for (size_t x = 0; x < blockBytes; x += kPiece) {
    const size_t m = std::min(kPiece, blockBytes - x);
    bool first = true;
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      crossCopy(op_, q, piece.data(), peerSend_[q] + srcOffset + x, m, false);
      kernels::reduce(out + x, first ? mine + x : out + x, piece.data(), m / elem, op_.dtype, bin);
      first = false;
    }
    if (op_.op == hocclAvg) kernels::divide(out + x, m / elem, op_.dtype, p);
    if (op_.coll == Coll::AllReduce)  // hand the finished piece, still in cache, to every peer's output
      for (int q = 0; q < p; ++q)
        if (q != me) crossCopy(op_, q, out + x, peerRecv_[q] + srcOffset + x, m, true);
  }
  // Between this rank and peer q cross: q's input block r (in) and q's input block q (out, read by q); for
  // all-reduce also the result block r (out, pushed) and the result block q (in, pushed by q).
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    size_t theirs = blockBytes;
    if (op_.coll == Coll::AllReduce) theirs = (blockBegin(op_.count, q + 1, p) - blockBegin(op_.count, q, p)) * elem;
    const size_t both = op_.coll == Coll::AllReduce ? blockBytes + theirs : blockBytes;
    count(c, q, both, both);
  }
}

void Collective::copyPhase() {
  Communicator& c = *op_.comm;
  const int me = c.rank(), p = c.nranks();
  const size_t bytes = op_.count * elemSize(op_);
  char* out = static_cast<char*>(op_.recvbuf);
  if (op_.coll == Coll::AllGather) {
    if (out + static_cast<size_t>(me) * bytes != op_.sendbuf) std::memcpy(out + me * bytes, op_.sendbuf, bytes);
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      crossCopy(op_, q, out + static_cast<size_t>(q) * bytes, peerSend_[q], bytes, false);
      count(c, q, bytes, bytes);
    }
    return;
  }
  // Broadcast. An in-place root has no local copy to make, so it pushes the tail share of every receiver.
  const int root = op_.root;
  const bool rootInPlace = peerSend_[root] == peerRecv_[root];
  const size_t share = rootInPlace ? bytes / static_cast<size_t>(p) / 64 * 64 : 0;
  if (me != root) {
    crossCopy(op_, root, out, peerSend_[root], bytes - share, false);
    count(c, root, 0, bytes);
    return;
  }
  if (!rootInPlace) std::memcpy(out, op_.sendbuf, bytes);
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    if (share) {
      crossCopy(op_, q, const_cast<char*>(static_cast<const char*>(op_.sendbuf)) + bytes - share,
                peerRecv_[q] + bytes - share, share, true);
    }
    count(c, q, bytes, 0);
  }
}

void run(const Op& op) {
  Communicator& comm = *op.comm;
  InFlightGuard inFlight(comm);
  Collective coll(op);
  const bool oversubscribed = comm.oversubscribed();
  for (unsigned idle = 0; !coll.poll(); ++idle) small::backoff(idle, oversubscribed);
}

}  // namespace hoccl::cma
