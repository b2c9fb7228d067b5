/// @file shm_channel.h
/// The shared-memory channel: two POSIX shared-memory segments per pair of ranks, one per direction, each a
/// single-producer single-consumer ring of fixed-size slots.
///
/// Segment layout (one per ordered pair sender -> receiver, created by the sender):
///
///   pages 0-1 geometry (magic, slot size, slot count, ranks)           written once, before sharing
///            head      slots published by the sender    (own cache line, release/acquire)
///            tail      slots released by the receiver   (own cache line, release/acquire)
///            bell      futex word the receiver sleeps on, plus its `sleeping` flag (own cache line)
///            info[i]   one cache line per slot: its sequence number (the publication), bytes, end-of-message
///                      flag, the whole message's size, and up to kInlineBytes of payload for small messages
///   page 2.. slot 0, slot 1, ... slot (slots-1)
///
/// A message occupies ceil(bytes / slotBytes) consecutive slots (never shares a slot with another message), so a
/// receiver hands each slot to its sink as one piece, straight out of shared memory: piece lengths are the slot
/// size (a multiple of 8) except for the last piece of a message.
///
/// Sleeping: rank a's channel to b sleeps on the bell of segment b->a. Rank b rings that bell (increments it and
/// calls FUTEX_WAKE, only when the sleeping flag is set) after it publishes a slot into b->a or releases a slot of
/// a->b, i.e. after anything a could be waiting for. The flag and the counters are ordered with seq_cst fences on
/// both sides (store flag / fence / re-check counters versus store counter / fence / load flag), so no wake-up is
/// lost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {

/// Most slots one segment may have.
constexpr uint32_t kMaxSlots = 64;

/// Bytes of payload carried inside the SlotInfo itself (small messages: one cache line crosses cores, not three).
constexpr uint32_t kInlineBytes = 40;

/// Per-slot metadata, one cache line, written by the sender before it publishes the slot by storing `seq`
/// (release). The receiver polls the `seq` of the next slot it expects (acquire) instead of the ring's head, so a
/// small message costs the receiver a single cache-line transfer.
struct alignas(64) SlotInfo {
  std::atomic<uint64_t> seq;                 ///< n+1 once the n-th slot (counting from 0) is published here
  uint32_t bytes;                            ///< payload bytes in the slot
  uint16_t last;                             ///< 1 if this slot ends its message
  uint16_t kind;                             ///< kSlotData, kSlotInline or kSlotControl
  uint32_t tag;                              ///< the call the message belongs to (CallTag; 0: untagged)
  uint32_t messageBytes;                     ///< the whole message's bytes (UINT32_MAX: 4 GiB or more), for errors
  alignas(8) char inlineData[kInlineBytes];  ///< the payload when kind == kSlotInline
};
static_assert(sizeof(SlotInfo) == 64, "one slot descriptor per cache line");
/// Slot holds payload bytes.
constexpr uint16_t kSlotData = 0;
/// The payload (at most kInlineBytes) is in SlotInfo::inlineData; the slot itself is unused.
constexpr uint16_t kSlotInline = 2;
/// A word of the close handshake (HOCCL_MAX_CONNS, shm_close.cc) in SlotInfo::inlineData, between two messages.
constexpr uint16_t kSlotControl = 3;

/// The control block at the start of every segment.
struct SegmentHeader {
  uint64_t magic;                          ///< kSegmentMagic once initialised
  uint32_t slotBytes;                      ///< size of one slot (multiple of 4096)
  uint32_t slots;                          ///< number of slots (1..kMaxSlots)
  int32_t sender;                          ///< rank that writes
  int32_t receiver;                        ///< rank that reads
  int32_t senderPid;                       ///< sender's process id
  alignas(64) std::atomic<uint64_t> head;  ///< slots published by the sender
  alignas(64) std::atomic<uint64_t> tail;  ///< slots released by the receiver
  alignas(64) std::atomic<uint32_t> bell;  ///< futex word the receiver of this segment sleeps on
  std::atomic<uint32_t> sleeping;          ///< non-zero while the receiver is (about to be) asleep on bell
  SlotInfo info[kMaxSlots];                ///< metadata of each slot (one cache line each)
};

/// A mapped shared-memory segment (RAII: unmapped on destruction). An anonymous shared file (shm_file.h): its creator
/// holds the file open until every peer has opened it (unlink), nothing of it is ever in /dev/shm.
class Segment {
 public:
  /// Creates and maps a new segment named `name` (unique in this process) with the given geometry. Throws
  /// SystemError with advice (free memory, the slot parameters) on failure.
  static std::unique_ptr<Segment> create(const std::string& name, uint32_t slotBytes, uint32_t slots, int sender,
                                         int receiver);
  /// Opens and maps the segment `name` that process `creatorPid` (the peer) created and still holds; checks its
  /// magic and geometry.
  static std::unique_ptr<Segment> open(const std::string& name, int creatorPid, int sender, int receiver);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  /// The creator lets go of the file once every peer has opened it (the mappings stay valid; nobody can open it
  /// any more). Idempotent; nothing for a segment that was opened.
  void unlink();
  /// The control block.
  SegmentHeader* header() const { return header_; }
  /// Start of slot i (0 <= i < slots).
  char* slot(uint64_t i) const { return data_ + (i % header_->slots) * static_cast<size_t>(header_->slotBytes); }
  /// The name (of the shared file, in /proc/<pid>/fd and messages).
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* base, size_t bytes, int file);
  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int file_ = -1;  // the creator's descriptor until unlink()
  SegmentHeader* header_ = nullptr;
  char* data_ = nullptr;
};

/// Bytes of the header region (the data starts this far into the segment).
constexpr size_t kHeaderRegion = 8192;
static_assert(sizeof(SegmentHeader) <= kHeaderRegion, "segment header must fit in two pages");

/// A channel to one peer on the same host over two segments (out: this rank -> peer, in: peer -> this rank).
class ShmChannel final : public Channel {
 public:
  /// Takes both mapped segments. `self` and `peerInfo` name the two sides in errors; `checkPid` is false when the
  /// peer is a thread of this process.
  ShmChannel(const boot::RankInfo& self, const boot::RankInfo& peerInfo, bool checkPid, std::unique_ptr<Segment> out,
             std::unique_ptr<Segment> in);
  ~ShmChannel() override;

  /// The peer's rank.
  int peer() const override { return peer_.rank; }
  /// Queues a send; bytes are copied into slots by progress().
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  /// Queues a send whose slots carry `tag`.
  void postTaggedSend(const void* data, size_t bytes, CallTag tag) override;
  /// Queues a receive; a message of its size tagged for another call fails it (RecvTarget::tag).
  void postRecv(size_t bytes, RecvTarget target) override;
  /// Copies pending sends into free slots and hands published slots to pending receives.
  bool progress() override;
  /// Posted operations not yet complete (the handshake's queued words are not counted).
  size_t pending() const override { return sends_.size() - ctrlQueued_ + recvs_.size(); }
  /// Sleeps on the futex of the incoming segment until the peer moves something, or the timeout.
  void waitForActivity(int timeoutMicros) override;
  /// Yes: see shm_close.cc.
  bool closable() const override { return true; }
  /// Publishes a close request when idle and no earlier request is unanswered (shm_close.cc).
  bool requestClose() override;
  /// Reads and answers the handshake's words at the message boundary when nothing is pending (shm_close.cc).
  Link serviceClose(bool inUse, bool needed) override;
  /// The handshake's state.
  Link link() const override { return link_; }

 private:
  struct PendingSend {
    const char* data;
    size_t bytes;
    size_t done;
    CallTag tag = 0;        ///< written into every slot of the message
    uint64_t control = 0;   ///< non-zero: a handshake word alone (kind; the counts are in `word`), no data
    uint64_t word[2] = {};  ///< the control word's counts: this side's messages sent, received (when queued)
  };
  struct PendingRecv {
    size_t bytes;
    size_t done;
    RecvTarget target;
  };

  bool progressSends();
  bool progressRecvs();
  bool ready() const;
  void publish(SlotInfo& info);
  void ringPeer();
  void checkPeer(bool force);
  void checkPeerWhilePolling();
  [[noreturn]] void peerGone(const std::string& why) const;
  // Close handshake (shm_close.cc).
  void publishControl(const PendingSend& s, SlotInfo& info);
  void queueControl(uint64_t kind);
  void onControl(const SlotInfo& info, bool idle, bool inUse);
  void flushControl();
  bool takeControl(bool idle, bool inUse);

  boot::RankInfo self_;
  boot::RankInfo peer_;
  bool checkPid_;
  std::unique_ptr<Segment> out_;
  std::unique_ptr<Segment> in_;
  SegmentHeader* outHdr_;
  SegmentHeader* inHdr_;
  uint64_t outHead_ = 0;  ///< local copy of out_->head (this side is its only writer)
  uint64_t inTail_ = 0;   ///< local copy of in_->tail (this side is its only writer)
  std::deque<PendingSend> sends_;
  std::deque<PendingRecv> recvs_;
  std::chrono::steady_clock::time_point nextCheck_;
  uint32_t idlePolls_ = 0;   ///< idle progress calls; the peer's liveness is checked every 256th
  uint64_t sendPosted_ = 0;  ///< messages posted for sending so far (empty ones are not messages)
  uint64_t recvDone_ = 0;    ///< messages received completely so far
  Link link_ = Link::Open;
  int owed_ = 0;           ///< answers this side awaits to its close requests (0 or 1)
  size_t ctrlQueued_ = 0;  ///< handshake words queued in sends_, not yet published
};

}  // namespace hoccl::transport::shm
