/// @file shm_arena.h
/// The arena: one shared-memory segment per communicator whose ranks all share a host, with a small region per
/// rank into which the shm shortcuts publish: the one-shot collectives for small messages (shm_small.h) their
/// inputs, single copy (shm_single_copy.h) its buffer addresses and sizes.
///
/// Layout: a header page (magic, geometry), then one region per rank, regionBytes apart (page aligned), with
/// kArenaSlots slots used in turn by consecutive operations (operation s uses slot s % kArenaSlots):
///   line[0..slots-1]   one cache line each: the sequence number of the last operation this rank published in
///                      that slot (release store), the stamp of the call it published for (so that readers check
///                      they agree on the call before using the payload), then up to kArenaInlineBytes of payload
///   claim              one cache line: the counter of the rank's block of the registered all-reduce's pieces
///                      (shm_zero_copy.h: PieceClaims), the one word of a region that other ranks write too
///   notes[0..15]       the call board: one cache line per collective the rank started, by any path (collective n
///                      in notes[n % 16]), read by a peer's arena wait that has gone on, to tell a peer that makes
///                      the same call another way (device buffers: a schedule) from one that is only late
///   data[0..slots-1]   maxBytes each, for payloads that do not fit in the line
/// A rank writes only its own region (and the other ranks' claim words) and reads everybody's. Small payloads cost a reader one
/// cache-line transfer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/transport.h"

namespace hoccl::transport::shm {

/// Payload bytes that travel inside the sequence line itself.
constexpr size_t kArenaInlineBytes = 40;
/// Slots per rank: how far (kArenaSlots - 1 operations) a rank that waits for nobody, such as a broadcast root,
/// may run ahead of the slowest peer.
constexpr uint64_t kArenaSlots = 4;

/// What a rank says it is doing when it publishes: readers compare it with their own call before they use the
/// payload (or, for single copy, before they touch the publisher's buffers).
struct CallStamp {
  uint8_t protocol = 0;  ///< which shortcut and round published (shm_small.h: Protocol)
  uint8_t coll = 0;      ///< hoccl::Coll
  uint8_t dtype = 0;     ///< hocclDataType_t
  uint8_t op = 0;        ///< hocclRedOp_t (built-in)
  int32_t root = 0;      ///< root of a rooted collective, else 0
  uint64_t count = 0;    ///< count as the C API takes it
  /// Field by field.
  bool operator==(const CallStamp& o) const {
    return protocol == o.protocol && coll == o.coll && dtype == o.dtype && op == o.op && root == o.root &&
           count == o.count;
  }
  /// Field by field.
  bool operator!=(const CallStamp& o) const { return !(*this == o); }
};
static_assert(sizeof(CallStamp) == 16, "a call stamp takes 16 bytes of the line");

/// One cache line of a rank's region: sequence number, call stamp and inline payload.
struct alignas(64) ArenaLine {
  std::atomic<uint64_t> seq;                      ///< number of the last operation published in this line
  CallStamp stamp;                                ///< the call that operation belongs to
  alignas(8) char inlineData[kArenaInlineBytes];  ///< payload of that operation when it fits
};
static_assert(sizeof(ArenaLine) == 64, "one arena line per cache line");

/// Collectives a rank's call board remembers (a peer looks up only the call it waits in).
constexpr uint64_t kArenaNotes = 16;

/// One line of a rank's call board: which collective the rank started, and what it is. Written by its rank only, as a
/// sequence lock (number 0 while the fields change), so a reader never takes a half-written note for a whole one.
struct alignas(64) CallNote {
  std::atomic<uint64_t> number;  ///< the collective's number on the communicator (CollCall::number), 0 while written
  std::atomic<uint64_t> count;   ///< count as the C API takes it
  std::atomic<uint64_t> shape;   ///< what the call is (transports/shortcut.h: callShape)
};
static_assert(sizeof(CallNote) == 64, "one call note per cache line");

/// A mapped arena (RAII: unmapped on destruction). An anonymous shared file (shm_file.h) that rank 0 holds open only
/// until every rank has mapped it: nothing of it is ever named in /dev/shm.
class Arena {
 public:
  /// Collective over ctx (every rank calls it): rank 0 creates and sizes the segment for ctx.nranks regions of
  /// `maxBytes` payload per slot, the others map it, then rank 0 lets go of the file. Any rank's failure
  /// throws on every rank. With `crossMemory`, the ranks then test whether they can read each other's memory (see
  /// crossMemory()); under Yama's ptrace_scope=1 each rank first allows processes of its user to attach to it, as
  /// Open MPI's shared-memory transport does (what ptrace_scope=0 allows anyway).
  static std::unique_ptr<Arena> connect(const ConnectContext& ctx, size_t maxBytes, bool crossMemory);
  /// Not collective over the communicator: the ranks of `group` (the ranks of one host; group.rank and group.nranks
  /// are positions in it, group.peers its members) meet in an arena called `name`. Position 0 creates it and keeps
  /// its file open for the arena's lifetime (it cannot tell when the others have opened it); the others wait for it
  /// (HOCCL_TIMEOUT, group.health, the creator's process) and map it. No cross-memory probe (crossMemory() false).
  static std::unique_ptr<Arena> openGroup(const ConnectContext& group, const std::string& name, size_t maxBytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// Rank r's line of operation s.
  ArenaLine& line(int r, uint64_t s) const { return region(r)->lines[s % kArenaSlots]; }
  /// Rank r's payload of `bytes` bytes for operation s: inside its line when it fits, else its data area.
  char* payload(int r, uint64_t s, size_t bytes) const {
    return bytes <= kArenaInlineBytes ? region(r)->lines[s % kArenaSlots].inlineData
                                      : reinterpret_cast<char*>(region(r) + 1) + (s % kArenaSlots) * maxBytes_;
  }
  /// Rank r's claim word: the counter of block r of the registered all-reduce's pieces (PieceClaims in
  /// shm_zero_copy.h), which every rank may take pieces from. Zero in a fresh arena.
  std::atomic<uint64_t>& claimWord(int r) const { return region(r)->claim; }
  /// Rank r's call-board line for collective `number`.
  CallNote& note(int r, uint64_t number) const { return region(r)->notes[number % kArenaNotes]; }
  /// True when every rank can read and write every other rank's memory (process_vm_readv/writev were probed at
  /// connect on every pair, and all ranks agreed): the single-copy collectives of shm_single_copy.h may run.
  bool crossMemory() const { return crossMemory_; }
  /// Largest payload a rank may publish.
  size_t maxBytes() const { return maxBytes_; }
  /// The shared file's name (in /proc/<pid>/maps and messages).
  const std::string& name() const { return name_; }

 private:
  struct Region {
    ArenaLine lines[kArenaSlots];
    alignas(64) std::atomic<uint64_t> claim;
    char pad[64 - sizeof(std::atomic<uint64_t>)];
    CallNote notes[kArenaNotes];
  };
  Arena(std::string name, void* base, size_t bytes, size_t maxBytes, size_t regionBytes);
  Region* region(int r) const { return reinterpret_cast<Region*>(regions_ + static_cast<size_t>(r) * regionBytes_); }

  std::string name_;
  void* base_;
  size_t bytes_;
  size_t maxBytes_;
  size_t regionBytes_;
  char* regions_;
  bool crossMemory_ = false;
  int fd_ = -1;  // openGroup's creator: the file, held open while the arena lives
};

}  // namespace hoccl::transport::shm
