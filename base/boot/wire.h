/// @file wire.h
/// Messages between a rank and its bootstrap root (internal to base/boot; the protocol is described at the top of
/// root_server.cc). Every message after the join is a fixed header followed by `bytes` bytes of payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hoccl::boot {

/// First message of a rank after the hello: who it is (a RankInfo follows).
struct JoinMessage {
  int32_t nranks;  ///< the size the rank was told
  int32_t rank;    ///< its rank
};

/// Header of every message from a rank to the root after the join.
struct RankHeader {
  uint32_t type;      ///< kRankSlot, kRankReport, kRankAbort, kRankGoodbye or kRankPong
  uint32_t reserved;  ///< 0
  uint64_t bytes;     ///< payload bytes that follow
};
/// This rank's slot of the next all-gather (or barrier) round follows.
constexpr uint32_t kRankSlot = 1;
/// This rank detected a failure; the text follows (it names the suspect ranks as "rank N (host H, pid P)").
constexpr uint32_t kRankReport = 2;
/// This rank aborted the communicator (hocclCommAbort); no payload.
constexpr uint32_t kRankAbort = 3;
/// This rank leaves normally (communicator destroyed): its connection closing next is no failure; no payload.
constexpr uint32_t kRankGoodbye = 4;
/// Answer to kRootPing, sent by the rank's watcher thread (so it proves the process runs); no payload.
constexpr uint32_t kRankPong = 5;

/// Header of every message from the root to a rank.
struct RootHeader {
  uint32_t type;   ///< kRootData, kRootError, kRootVerdict, kRootClosing, kRootInfo, kRootPing or kRootTimeout
  int32_t rank;    ///< for errors and verdicts: the rank that failed or is missing (-1 = several / unknown)
  uint64_t bytes;  ///< payload bytes that follow (data, the error text, a VerdictWire and its text, ...)
};
/// A payload follows: the rank table after the join, or the result of an all-gather round.
constexpr uint32_t kRootData = 0;
/// An error text follows: the join, or the bootstrap exchange this rank waits in, failed.
constexpr uint32_t kRootError = 1;
/// The root's one decision about a failed communicator: a VerdictWire, then its text.
constexpr uint32_t kRootVerdict = 2;
/// The process hosting the root exits normally (its connection closing next is no failure); no payload.
constexpr uint32_t kRootClosing = 3;
/// Sent once before the rank table: a RootInfoWire naming the root's process (for messages when it disappears).
constexpr uint32_t kRootInfo = 4;
/// Is this process running? Answered with kRankPong; no payload.
constexpr uint32_t kRootPing = 5;
/// Like kRootError, for a join that gave up because ranks were still missing at HOCCL_TIMEOUT (hocclTimeout).
constexpr uint32_t kRootTimeout = 6;

/// Payload head of kRootVerdict.
struct VerdictWire {
  uint32_t kind;      ///< Verdict::Kind
  int32_t culprit;    ///< the rank blamed
  int32_t reporter;   ///< the rank whose report led to it (-1: the root saw it by itself)
  uint32_t reserved;  ///< 0
};

/// Payload of kRootInfo.
struct RootInfoWire {
  int32_t pid;        ///< process id of the root
  int32_t reserved;   ///< 0
  char hostname[64];  ///< its host
};

/// Largest slot of an all-gather round the root accepts.
constexpr uint64_t kMaxSlotBytes = uint64_t{256} << 20;
/// Largest failure report the root accepts.
constexpr uint64_t kMaxReportBytes = 64 << 10;

/// What the front of a connection's input holds (both sides parse what arrived with nextRankMessage or
/// nextRootMessage, one whole message at a time).
struct Frame {
  /// Partial: wait for more bytes; Whole: a message of `type` with `bytes` of payload is complete; Malformed: the
  /// header announces an unknown type or a payload larger than its type allows (drop the connection).
  enum Status { Partial, Whole, Malformed };
  Status status = Partial;  ///< see Status
  uint32_t type = 0;        ///< the header's type (Whole, Malformed)
  uint64_t bytes = 0;       ///< the header's payload size (Whole, Malformed)
};

/// The next message from a rank in data[0, size).
inline Frame nextRankMessage(const char* data, size_t size) {
  Frame f;
  if (size < sizeof(RankHeader)) return f;
  RankHeader h;
  std::memcpy(&h, data, sizeof(h));
  f.type = h.type;
  f.bytes = h.bytes;
  const uint64_t limit = h.type == kRankSlot ? kMaxSlotBytes : h.type == kRankReport ? kMaxReportBytes : 0;
  if (h.type < kRankSlot || h.type > kRankPong || h.bytes > limit) f.status = Frame::Malformed;
  else if (size - sizeof(h) >= h.bytes) f.status = Frame::Whole;
  return f;
}

/// The next message from the root in data[0, size) (types this version does not know are Whole: a newer root's
/// message is skipped, not an error; only a payload beyond kMaxSlotBytes is Malformed).
inline Frame nextRootMessage(const char* data, size_t size) {
  Frame f;
  if (size < sizeof(RootHeader)) return f;
  RootHeader h;
  std::memcpy(&h, data, sizeof(h));
  f.type = h.type;
  f.bytes = h.bytes;
  if (h.bytes > kMaxSlotBytes) f.status = Frame::Malformed;
  else if (size - sizeof(h) >= h.bytes) f.status = Frame::Whole;
  return f;
}

}  // namespace hoccl::boot
