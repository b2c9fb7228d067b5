/*
 * One-shot collectives for small messages (see small_coll.h).
 *
 * Protocol for the k-th small operation of a communicator (k = 1, 2, ...; every rank counts the same operations):
 *   1. publish: once every peer has started operation k-S+1, where S = kArenaSlots (so none still reads this
 *      rank's slot k%S, last used by operation k-S), the rank copies its payload (all-reduce/reduce/all-gather:
 *      its input; reduce-scatter: its whole input; broadcast: the root's input, the others publish nothing) into
 *      its own slot k%S, inside the slot's sequence line when it fits, and stores k into that line (release);
 *   2. wait: until every peer whose payload it needs has published k (acquire): everyone for all-reduce, all-gather
 *      and reduce-scatter and for the root of a reduce; only the root for a broadcast receiver; nobody for a
 *      broadcast root or a reduce contributor, which return at once and may run up to S-1 operations ahead;
 *   3. compute: the output is read straight from the peers' slots. Reductions combine the payloads in rank
 *      order (((p0 op p1) op p2) ...), so every rank gets the same bits.
 * No acknowledgements, no locks: the sequence numbers are the whole protocol.
 * Cost for p ranks and b bytes: one copy of b in, p-1 cache-line round trips (plus b/64 lines per peer beyond the
 * inline size) and the reduction; versus the slot channels: planning, a schedule walk and a descriptor per peer.
 */
#include "comm/small_coll.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "comm/plan.h"
#include "comm/redop.h"
#include "base/error.h"
#include "base/params.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/shm_arena.h"
#include "transports/shm/shm_channel.h"
#include "transports/transport_util.h"

namespace hoccl::small {
namespace {

using Clock = std::chrono::steady_clock;
using sched::Coll;

constexpr auto kLivenessInterval = std::chrono::milliseconds(100);
constexpr size_t kBytesPerRank = 2048;  // payload limit per rank of the communicator (see eligible())

// Bytes each publishing rank puts in the arena for op.
size_t payloadBytes(const Op& op) {
  const size_t bytes = op.count * kernels::typeSize(op.dtype);
  return op.coll == Coll::ReduceScatter ? bytes * static_cast<size_t>(op.comm->nranks()) : bytes;
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool publishes(const Op& op, int rank) { return op.coll != Coll::Broadcast || rank == op.root; }

}  // namespace

bool eligible(const Op& op) {
  const transport::shm::Arena* arena = op.comm->arena();
  if (!arena || op.kind != Op::Kind::Collective) return false;
  switch (op.coll) {
    case Coll::AllReduce: case Coll::Reduce: case Coll::Broadcast: case Coll::AllGather: case Coll::ReduceScatter:
      break;
    default: return false;
  }
  if (op.op >= hocclNumOps) return false;  // PreMulSum: the general path scales the input first
  static const bool forced = !params::getString("ALGO").empty();
  // The one-shot exchange makes every rank read (and reduce) every payload; the ring splits the work but pays
  // 2(p-1) hand-offs. Measured crossovers (all-reduce, docs/performance.md): 4-8 KiB with 2 ranks, 32 KiB with 4
  // and 8 ranks on 2 cores. So: up to 2 KiB per rank of the communicator, within the arena.
  const size_t limit = std::min(arena->maxBytes(), kBytesPerRank * static_cast<size_t>(op.comm->nranks()));
  return !forced && payloadBytes(op) <= limit;
}

Exchange::Exchange(const Op& op)
    : op_(op), comm_(*op.comm), arena_(*op.comm->arena()), seq_(op.comm->nextSmallSeq()), bytes_(payloadBytes(op)) {}

Exchange::Exchange(const Op& op, const void* payload, size_t bytes, const char* path)
    : op_(op), comm_(*op.comm), arena_(*op.comm->arena()), seq_(op.comm->nextSmallSeq()), bytes_(bytes),
      isControl_(true), path_(path) {
  if (bytes > sizeof(control_)) throwInternalError("arena control round larger than a line");
  if (bytes) std::memcpy(control_, payload, bytes);  // published later, when the region is free
}

const char* Exchange::payloadOf(int r) const { return arena_.payload(r, seq_, bytes_); }

bool Exchange::needs(int r) const {
  if (r == comm_.rank()) return false;
  if (isControl_) return true;
  switch (op_.coll) {
    case Coll::Broadcast: return r == op_.root;  // the root waits for nobody
    case Coll::Reduce: return comm_.rank() == op_.root;  // the others wait for nobody
    default: return true;
  }
}

// A peer "reached" operation s when its line of slot s holds s or more.
bool Exchange::reached(int r, uint64_t s) const {
  return arena_.line(r, s).seq.load(std::memory_order_acquire) >= s;
}

uint64_t Exchange::freedBy() const { return seq_ - (transport::shm::kArenaSlots - 1); }

bool Exchange::waitingOn(int r) const {
  if (r == comm_.rank()) return false;
  if (!published_) return seq_ >= transport::shm::kArenaSlots && !reached(r, freedBy());
  return needs(r) && !reached(r, seq_);
}

bool Exchange::poll() {
  const int me = comm_.rank(), n = comm_.nranks();
  if (!published_) {
    // This rank's slot was last read by operation seq_-S; every peer is done with it once it has started seq_-S+1.
    for (; seq_ >= transport::shm::kArenaSlots && prev_ < n; ++prev_)
      if (prev_ != me && !reached(prev_, freedBy())) return waitMore();
    const void* mine = isControl_ ? control_ : publishes(op_, me) ? op_.sendbuf : nullptr;
    if (mine && bytes_) std::memcpy(arena_.payload(me, seq_, bytes_), mine, bytes_);
    arena_.line(me, seq_).seq.store(seq_, std::memory_order_release);
    published_ = true;
  }
  for (; next_ < n; ++next_)
    if (needs(next_) && !reached(next_, seq_)) return waitMore();
  if (!isControl_) finish();
  return true;
}

bool Exchange::waitMore() {
  if ((++failedPolls_ & 1023) == 0) check();
  return false;
}

void Exchange::check() {
  comm_.health().check(comm_.describe(), describeOp(op_));
  const auto now = Clock::now();
  if (waitingSince_ == Clock::time_point{}) waitingSince_ = now;
  if (now >= nextLivenessCheck_) {
    nextLivenessCheck_ = now + kLivenessInterval;
    for (int r = 0; r < comm_.nranks(); ++r) {  // only those it waits for: the others may have finished and left
      const boot::RankInfo& info = comm_.rankInfo()[r];
      if (!waitingOn(r) || info.pid == getpid() || transport::shm::processAlive(info.pid)) continue;
      throwRemoteError(fmt::format("{}: {} [{}] lost its peer {}: its process has exited or was killed. Look at that "
                                   "rank's output for the cause (crash, OOM kill, abort)",
                                   comm_.describe(), describeOp(op_), path_, transport::describePeer(info)));
    }
  }
  static const auto timeout = std::chrono::seconds(params::getInt("TIMEOUT"));
  if (now - waitingSince_ > timeout)
    throwRemoteError(fmt::format("{}: {} [{}] waited {} s for {}. That peer is stuck, dead or calling a different "
                                 "operation; check its log. Raise HOCCL_TIMEOUT if it is only slow.",
                                 comm_.describe(), describeOp(op_), path_, timeout.count(), missing()));
}

std::string Exchange::missing() const {
  std::string who;
  for (int r = 0; r < comm_.nranks(); ++r)
    if (waitingOn(r)) who += (who.empty() ? "" : ", ") + transport::describePeer(comm_.rankInfo()[r]);
  return who.empty() ? "nobody" : who;
}

void Exchange::finish() {
  const int me = comm_.rank(), n = comm_.nranks();
  const kernels::BinOp bin = binOpOf(op_.op);
  char* out = static_cast<char*>(op_.recvbuf);
  auto reduceAll = [&](size_t offset, size_t count) {  // out = p0 op p1 op ... (rank order) at offset
    kernels::reduce(out, payloadOf(0) + offset, payloadOf(1) + offset, count, op_.dtype, bin);
    for (int r = 2; r < n; ++r) kernels::reduce(out, out, payloadOf(r) + offset, count, op_.dtype, bin);
    if (op_.op == hocclAvg) kernels::divide(out, count, op_.dtype, n);
  };
  auto copyOut = [](char* dst, const void* src, size_t bytes) {
    if (dst != src) std::memcpy(dst, src, bytes);
  };
  ByteCounters& counters = comm_.counters();
  auto count = [&](int peer, size_t sent, size_t received) {
    const hocclLinkClass_t cls = comm_.topology().linkClass(me, peer);
    counters.sent[cls] += sent;
    counters.received[cls] += received;
  };
  switch (op_.coll) {
    case Coll::AllReduce:
      reduceAll(0, op_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) count(r, bytes_, bytes_);
      break;
    case Coll::Reduce:  // the others send to the root
      if (me != op_.root) {
        count(op_.root, bytes_, 0);
        break;
      }
      reduceAll(0, op_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) count(r, 0, bytes_);
      break;
    case Coll::Broadcast:  // the root sends to the others
      if (me != op_.root) {
        copyOut(out, payloadOf(op_.root), bytes_);
        count(op_.root, 0, bytes_);
        break;
      }
      copyOut(out, op_.sendbuf, bytes_);
      for (int r = 0; r < n; ++r)
        if (r != me) count(r, bytes_, 0);
      break;
    case Coll::AllGather:
      for (int r = 0; r < n; ++r) {
        copyOut(out + static_cast<size_t>(r) * bytes_, r == me ? op_.sendbuf : payloadOf(r), bytes_);
        if (r != me) count(r, bytes_, bytes_);
      }
      break;
    case Coll::ReduceScatter: {
      const size_t block = bytes_ / static_cast<size_t>(n);
      reduceAll(static_cast<size_t>(me) * block, op_.count);
      for (int r = 0; r < n; ++r)
        if (r != me) count(r, block, block);
      break;
    }
    default: throwInternalError("small one-shot path given a collective it does not implement");
  }
}

void run(const Op& op) {
  Communicator& comm = *op.comm;
  InFlightGuard inFlight(comm);
  Exchange ex(op);
  complete(ex, comm.oversubscribed());
}

void complete(Exchange& ex, bool oversubscribed) {
  for (unsigned idle = 0; !ex.poll(); ++idle) backoff(idle, oversubscribed);
}

void backoff(unsigned idle, bool oversubscribed) {
  // With a core per rank the peer is nanoseconds away: spin. With more ranks than cores it may need this core.
  if (oversubscribed ? idle < 4 : idle < (1u << 16)) cpuRelax();
  else if (idle < (1u << 20)) sched_yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace hoccl::small
