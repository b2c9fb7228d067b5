/// @file wire.h
/// Messages between a rank and its bootstrap root (internal to base/boot; the protocol is described at the top of
/// root_server.cc) and between the ranks of the gather tree (gather_tree.cc). Every message after the join is a fixed
/// header followed by `bytes` bytes of payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace hoccl::boot {

/// A socket address in a fixed-size form (IPv4 or IPv6).
struct AddressWire {
  uint32_t length;    ///< valid bytes of `bytes` (0: none)
  uint32_t reserved;  ///< 0
  uint8_t bytes[32];  ///< a sockaddr_in or sockaddr_in6
};

/// First message of a rank after the hello: who it is and where it listens (a RankInfo follows).
struct JoinMessage {
  int32_t nranks;        ///< the size the rank was told
  int32_t rank;          ///< its rank
  int32_t shareLo;       ///< first rank that joins this root (0 with one unique id)
  int32_t shareHi;       ///< one past the last rank that joins this root (nranks with one unique id)
  int32_t idIndex;       ///< which id of hocclCommInitRankScalable this root serves (0: the head root)
  int32_t nIds;          ///< how many ids the communicator has (1: a plain init)
  AddressWire listener;  ///< where the rank accepts its children in the gather tree (gather_tree.h)
};

/// Header of every message from a rank to the root after the join.
struct RankHeader {
  uint32_t type;      ///< kRankReport, kRankAbort, kRankGoodbye, kRankPong, kRankReady or kRankMismatch
  uint32_t reserved;  ///< 0
  uint64_t bytes;     ///< payload bytes that follow
};
// Type 1 carried an all-gather slot while the root relayed the exchanges (before the gather tree); no longer sent.
/// This rank detected a failure; the text follows (it names the suspect ranks as "rank N (host H, pid P)").
constexpr uint32_t kRankReport = 2;
/// This rank aborted the communicator (hocclCommAbort); no payload.
constexpr uint32_t kRankAbort = 3;
/// This rank leaves normally (communicator destroyed): its connection closing next is no failure; no payload.
constexpr uint32_t kRankGoodbye = 4;
/// Answer to kRootPing, sent by the rank's watcher thread (so it proves the process runs); no payload.
constexpr uint32_t kRankPong = 5;
/// This rank's init is complete (it linked the gather tree and holds the rank table): from now on its connection
/// closing alone is no failure (a rank may exit once its part is done). Before it, a close fails the job; no payload.
constexpr uint32_t kRankReady = 6;
/// This rank found that the ranks' calls differ (it compared them: a mismatch, not a wait that ran out); the text
/// follows as for kRankReport. The root's verdict says so instead of blaming a rank for stalling.
constexpr uint32_t kRankMismatch = 7;

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
/// The rank's place in the gather tree, once every rank has joined: a PlanWire, then the RankInfo of its parent
/// and of each of its children (in rank order), so that it can name them before the first exchange.
constexpr uint32_t kRootPlan = 7;

/// Payload head of kRootPlan.
struct PlanWire {
  int32_t parent;          ///< the rank's parent in the gather tree (-1: it is the top, rank 0)
  int32_t fanout;          ///< the tree's fanout (tree_shape.h)
  AddressWire parentAddr;  ///< where the parent listens (length 0 when parent is -1)
};

/// Header of every message between a sub-root (a unique id of hocclCommInitRankScalable other than the first) and
/// the head root (the first id), which decides for the whole communicator; the sub-root relays its ranks.
struct LinkHeader {
  uint32_t type;   ///< kLinkShare, kLinkLost, kLinkFromRank, kLinkClosed (sub -> head) or kLinkToRank (head -> sub)
  int32_t rank;    ///< the rank a relayed message comes from or goes to, or that was lost (-1 for kLinkShare)
  uint64_t bytes;  ///< payload bytes that follow
};
/// sub -> head, once: a ShareWire, then for each rank of the share its JoinMessage and RankInfo.
constexpr uint32_t kLinkShare = 1;
/// sub -> head: a whole message of `rank` (RankHeader and payload) follows.
constexpr uint32_t kLinkFromRank = 2;
/// sub -> head: `rank`'s connection closed; no payload.
constexpr uint32_t kLinkClosed = 3;
/// head -> sub: a whole message for `rank` (RootHeader and payload) follows.
constexpr uint32_t kLinkToRank = 4;
/// sub -> head, once, instead of kLinkShare: rank `rank` of the share dropped out before the share was complete, so
/// the communicator cannot be created. A ShareWire, the lost rank's RankInfo, then the verdict's text (at most
/// kMaxReportBytes) follow; the head root sends that verdict to every rank it serves.
constexpr uint32_t kLinkLost = 5;
/// The connection index in the Hello of a sub-root linking to its head root (its rank field carries the id index).
constexpr int32_t kRootLinkIndex = -9;

/// Payload head of kLinkShare.
struct ShareWire {
  int32_t nranks;    ///< the communicator's size
  int32_t idIndex;   ///< which id the sub-root serves
  int32_t shareLo;   ///< its first rank
  int32_t shareHi;   ///< one past its last rank
  int32_t pid;       ///< the sub-root's process
  int32_t reserved;  ///< 0
};

/// Payload of kRootPlan: a PlanWire, then `rankInfoBytes` of RankInfo per neighbour (the parent first, then the
/// children). The number of neighbours, or -1 when `size` does not fit that form or names more than 1 + kMaxFanout.
constexpr int kMaxFanout = 64;
inline int planNeighbours(size_t size, uint64_t rankInfoBytes) {
  if (size < sizeof(PlanWire) || rankInfoBytes == 0 || (size - sizeof(PlanWire)) % rankInfoBytes != 0) return -1;
  const uint64_t n = (size - sizeof(PlanWire)) / rankInfoBytes;
  return n > 1 + kMaxFanout ? -1 : static_cast<int>(n);
}

/// Header of every message between two ranks of the gather tree (gather_tree.cc).
struct TreeHeader {
  uint32_t type;   ///< kTreeData, kTreeBye or kTreeGaveUp
  uint32_t seq;    ///< the exchange it belongs to (1, 2, ... on every rank; kTreeData only)
  uint64_t bytes;  ///< payload bytes that follow
};
/// A block of slots of exchange `seq` follows.
constexpr uint32_t kTreeData = 1;
/// The sender destroyed its communicator normally; no payload.
constexpr uint32_t kTreeBye = 2;
/// The sender gave up on the communicator because of a failure; its text follows (at most kMaxReportBytes).
constexpr uint32_t kTreeGaveUp = 3;
/// The connection index of gather-tree links in the handshake's Hello (transports use 0 and up).
constexpr int32_t kTreeLinkIndex = -7;

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

/// Largest message between ranks and roots (and of an all-gather's blocks).
constexpr uint64_t kMaxSlotBytes = uint64_t{256} << 20;
/// Largest failure report the root accepts.
constexpr uint64_t kMaxReportBytes = 64 << 10;
/// Largest communicator the bootstrap serves (its rank table, at most 512 bytes a rank, fits in kMaxSlotBytes): a
/// join or a share announcing more is refused before anything is sized by it.
constexpr int32_t kMaxRanks = static_cast<int32_t>(kMaxSlotBytes / 512);

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
  const uint64_t limit = h.type == kRankReport || h.type == kRankMismatch ? kMaxReportBytes : 0;
  if (h.type < kRankReport || h.type > kRankMismatch || h.bytes > limit) f.status = Frame::Malformed;
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

/// What is wrong with the first message of a sub-root's link (header `h`, then `sw`), whose entries (kLinkShare) are
/// a JoinMessage and `rankInfoBytes` of RankInfo each; nullptr when it is well-formed: a kLinkShare of exactly one
/// entry per rank of a share inside [0, nranks) with nranks <= kMaxRanks, or a kLinkLost naming a rank of that share
/// with a RankInfo and at most kMaxReportBytes of text. The head reads `h.bytes` only after this check.
inline const char* linkOpeningProblem(const LinkHeader& h, const ShareWire& sw, uint64_t rankInfoBytes) {
  if (sw.nranks < 1 || sw.nranks > kMaxRanks || sw.shareLo < 0 || sw.shareHi > sw.nranks || sw.shareLo >= sw.shareHi)
    return "its share does not fit in a communicator of its size";
  if (h.type == kLinkShare) {
    const uint64_t entry = sizeof(JoinMessage) + rankInfoBytes;
    if (h.bytes != sizeof(ShareWire) + entry * static_cast<uint64_t>(sw.shareHi - sw.shareLo))
      return "its share's size does not match its ranks";
    if (h.bytes > kMaxSlotBytes) return "its share is larger than any the bootstrap carries";
    return nullptr;
  }
  if (h.type == kLinkLost) {
    if (h.rank < sw.shareLo || h.rank >= sw.shareHi) return "the rank it lost is outside its share";
    const uint64_t head = sizeof(ShareWire) + rankInfoBytes;
    if (h.bytes < head || h.bytes - head > kMaxReportBytes) return "its loss notice has a wrong size";
    return nullptr;
  }
  return "it opened with an unknown message type";
}

/// What is wrong with the entries of a kLinkShare (what follows its ShareWire: `size` bytes, a JoinMessage and
/// `rankInfoBytes` of RankInfo per rank of the share, in any order); nullptr when there is one entry per rank of the
/// share, each rank once. `sw` passed linkOpeningProblem.
inline const char* shareEntriesProblem(const char* data, size_t size, const ShareWire& sw, uint64_t rankInfoBytes) {
  const uint64_t entry = sizeof(JoinMessage) + rankInfoBytes;
  const auto count = static_cast<uint64_t>(sw.shareHi - sw.shareLo);
  if (size != entry * count) return "its share's size does not match its ranks";
  std::vector<bool> seen(count, false);
  for (uint64_t i = 0; i < count; ++i) {
    JoinMessage j;
    std::memcpy(&j, data + i * entry, sizeof(j));
    if (j.rank < sw.shareLo || j.rank >= sw.shareHi) return "it relays a rank outside its share";
    if (seen[j.rank - sw.shareLo]) return "it relays a rank twice";
    seen[j.rank - sw.shareLo] = true;
  }
  return nullptr;
}

/// The next message on a link between roots in data[0, size): from a sub-root serving ranks [lo, hi) (at the head:
/// kLinkFromRank, kLinkClosed; a rank outside the share is Malformed), or, with lo = hi = -1, from the head (at a
/// sub-root: kLinkToRank). Types this version does not know are Whole (skipped); a payload beyond kMaxSlotBytes is
/// Malformed.
inline Frame nextLinkMessage(const char* data, size_t size, int lo, int hi) {
  Frame f;
  if (size < sizeof(LinkHeader)) return f;
  LinkHeader h;
  std::memcpy(&h, data, sizeof(h));
  f.type = h.type;
  f.bytes = h.bytes;
  const bool fromSub = lo >= 0;
  if (h.bytes > kMaxSlotBytes || (fromSub && (h.rank < lo || h.rank >= hi))) f.status = Frame::Malformed;
  else if (size - sizeof(h) >= h.bytes) f.status = Frame::Whole;
  return f;
}

/// What a rank of the gather tree does with a TreeHeader that arrives while it waits for exchange `seq` of `bytes`
/// payload bytes: read `read` payload bytes and then take the data (Data), fail the call because the neighbour left
/// (Bye) or gave up with the text it read (GaveUp: at most kMaxReportBytes, whatever the header says), or fail the
/// call because the ranks called different operations (Mismatch: another exchange, size or type; nothing is read).
struct TreeStep {
  enum Kind { Data, Bye, GaveUp, Mismatch };
  Kind kind = Mismatch;  ///< see above
  uint64_t read = 0;     ///< payload bytes to read now (never more than max(bytes, kMaxReportBytes))
};
/// See TreeStep.
inline TreeStep treeStep(const TreeHeader& h, uint32_t seq, uint64_t bytes) {
  if (h.type == kTreeBye) return {TreeStep::Bye, 0};
  if (h.type == kTreeGaveUp) return {TreeStep::GaveUp, h.bytes < kMaxReportBytes ? h.bytes : kMaxReportBytes};
  if (h.type == kTreeData && h.seq == seq && h.bytes == bytes) return {TreeStep::Data, bytes};
  return {TreeStep::Mismatch, 0};
}

}  // namespace hoccl::boot
