// The arena exchange shared by the shm shortcuts (protocol in shm_session.h).
#include "transports/shm/shm_session.h"

#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"
#include "transports/shm/shm_channel.h"

namespace hoccl::transport::shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLivenessInterval = std::chrono::milliseconds(100);

// "device" or "host": the kind a call's buffers count as when ranks compare calls.
const char* kindWord(const CollCall& call) {
  return kernels::isHostKind(call.sendKind) && kernels::isHostKind(call.recvKind) ? "host" : "device";
}

CollCall callOf(const CallStamp& s) {
  CollCall c;
  c.coll = static_cast<Coll>(s.coll);
  c.dtype = static_cast<hocclDataType_t>(s.dtype);
  c.op = static_cast<hocclRedOp_t>(s.op);
  c.root = s.root;
  c.count = s.count;
  return c;
}

}  // namespace

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::Small: return "small one-shot";
    case Protocol::CopyAddresses: return "single copy, address round";
    case Protocol::CopyDone: return "single copy, closing round";
    case Protocol::HostAddresses: return "host level, address round";
    case Protocol::HostDone: return "host level, closing round";
  }
  return "unknown arena round";
}

CallStamp stampOf(const CollCall& call, Protocol protocol) {
  CallStamp s;
  s.protocol = static_cast<uint8_t>(protocol);
  s.coll = static_cast<uint8_t>(call.coll);
  s.dtype = static_cast<uint8_t>(call.dtype);
  s.op = static_cast<uint8_t>(call.op);
  s.root = isRooted(call.coll) ? call.root : 0;
  s.count = call.count;
  return s;
}

void ArenaSession::noteCall(const CollCall& call) {
  if (call.number == 0) return;
  CallNote& note = arena_->note(rank(), call.number);
  // A sequence lock with one writer: 0 while the fields change (peerCall re-reads the number after the fields).
  note.number.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  note.count.store(call.count, std::memory_order_relaxed);
  note.shape.store(callShape(call), std::memory_order_relaxed);
  note.number.store(call.number, std::memory_order_release);
}

std::optional<CollCall> ArenaSession::peerCall(int r, uint64_t number) const {
  const CallNote& note = arena_->note(r, number);
  if (note.number.load(std::memory_order_acquire) != number) return std::nullopt;
  const uint64_t count = note.count.load(std::memory_order_relaxed);
  const uint64_t shape = note.shape.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (note.number.load(std::memory_order_relaxed) != number) return std::nullopt;  // rewritten meanwhile
  CollCall c = callOfShape(shape, count);
  c.number = number;
  return c;
}

Exchange::Exchange(ArenaSession& session, const CollCall& call, Protocol protocol, const void* payload, size_t bytes,
                   bool needsAll, int only)
    : session_(session), call_(call), stamp_(stampOf(call, protocol)), seq_(session.nextSeq()), payload_(payload),
      bytes_(bytes), needsAll_(needsAll), only_(only) {
  if (bytes > session.arena().maxBytes())
    throwInternalError(
        fmt::format("shm arena round of {} bytes exceeds the arena's {} bytes", bytes, session.arena().maxBytes()));
  if (payload && bytes <= kArenaInlineBytes) {  // small enough to keep: the caller's copy may be gone by publishing
    std::memcpy(inlineCopy_, payload, bytes);
    payload_ = inlineCopy_;
  }
}

bool Exchange::reached(int r, uint64_t s) const {
  return session_.arena().line(r, s).seq.load(std::memory_order_acquire) >= s;
}

bool Exchange::waitingOn(int r) const {
  if (r == session_.rank()) return false;
  if (!published_) return seq_ >= kArenaSlots && !reached(r, freedBy());
  return needs(r) && !reached(r, seq_);
}

bool Exchange::poll() {
  const int me = session_.rank(), n = session_.nranks();
  Arena& arena = session_.arena();
  if (!published_) {
    // This rank's slot was last read in round seq_-S; every peer is done with it once it has started seq_-S+1.
    for (; seq_ >= kArenaSlots && prev_ < n; ++prev_)
      if (prev_ != me && !reached(prev_, freedBy())) return waitMore();
    if (payload_ && bytes_) std::memcpy(arena.payload(me, seq_, bytes_), payload_, bytes_);
    ArenaLine& line = arena.line(me, seq_);
    line.stamp = stamp_;
    line.seq.store(seq_, std::memory_order_release);
    published_ = true;
  }
  for (; next_ < n; ++next_) {
    if (!needs(next_)) continue;
    if (!reached(next_, seq_)) return waitMore();
    agree(next_);
  }
  return true;
}

void Exchange::agree(int r) const {
  // The line was published with release after its stamp: reading it after the acquire of seq is safe.
  const CallStamp theirs = session_.arena().line(r, seq_).stamp;
  if (theirs == stamp_) return;
  const auto& ctx = session_.ctx();
  throwMismatch(
      fmt::format("{}: the calls do not match at operation #{} of this communicator: this rank called {} "
                  "[{}], but {} called {} [{}]. Nothing was read or written. Every rank must make the same "
                  "collective calls in the same order, with the same count, type, op and root.",
                  ctx.who, seq_, describeCall(call_), protocolName(static_cast<Protocol>(stamp_.protocol)),
                  session_.describeRank(r), describeCall(callOf(theirs)),
                  protocolName(static_cast<Protocol>(theirs.protocol))));
}

bool Exchange::waitMore() {
  if ((++failedPolls_ & 1023) == 0) check();
  return false;
}

void Exchange::check() {
  const auto& ctx = session_.ctx();
  auto what = [&] { return describeCall(call_) + " [" + protocolName(static_cast<Protocol>(stamp_.protocol)) + "]"; };
  if (ctx.health->aborted() || ctx.health->failed()) ctx.health->check(ctx.who, what());
  compareNotes();
  const auto now = Clock::now();
  if (waitingSince_ == Clock::time_point{}) waitingSince_ = now;
  if (now >= nextLivenessCheck_) {
    nextLivenessCheck_ = now + kLivenessInterval;
    for (int r = 0; r < session_.nranks(); ++r) {  // only those it waits for: the others may have finished and left
      const boot::RankInfo& info = ctx.connect->peers[r];
      if (!waitingOn(r) || info.pid == getpid() || processAlive(info.pid)) continue;
      throwRemoteError(
          fmt::format("{}: {} lost its peer {}: its process has exited or was killed. Look at that "
                      "rank's output for the cause (crash, OOM kill, abort)",
                      ctx.who, what(), describePeer(info)));
    }
  }
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  if (now - waitingSince_ > timeout) throwTimeout(silentPeerMessage(ctx.who, what(), timeout.count(), missing()));
}

void Exchange::compareNotes() const {
  if (call_.number == 0) return;
  for (int r = 0; r < session_.nranks(); ++r) {
    if (!waitingOn(r)) continue;
    const std::optional<CollCall> theirs = session_.peerCall(r, call_.number);
    if (!theirs || (callShape(*theirs) == callShape(call_) && theirs->count == call_.count)) continue;
    const bool kinds = std::string(kindWord(*theirs)) != kindWord(call_);
    throwMismatch(fmt::format(
        "{}: the calls do not match at call #{} of this communicator: this rank called {} on {} buffers "
        "[{}], but {} called {} on {} buffers, which it runs another way, so it never takes part here. Nothing was "
        "read or written. {}",
        session_.ctx().who, call_.number - 1, describeCall(call_), kindWord(call_),  // numbered from 0, as the check
        protocolName(static_cast<Protocol>(stamp_.protocol)), session_.describeRank(r), describeCall(*theirs),
        kindWord(*theirs),
        kinds ? "Every rank of a call must pass device buffers, or every rank host buffers (as NCCL requires)."
              : "Every rank must make the same collective calls in the same order, with the same count, type, op "
                "and root."));
  }
}

std::string Exchange::missing() const {
  std::string who;
  for (int r = 0; r < session_.nranks(); ++r)
    if (waitingOn(r)) who += (who.empty() ? "" : ", ") + session_.describeRank(r);
  return who.empty() ? "nobody" : who;
}

}  // namespace hoccl::transport::shm
