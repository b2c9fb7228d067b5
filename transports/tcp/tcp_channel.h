/// @file tcp_channel.h
/// The tcp channel: several nonblocking TCP connections to one peer, with messages striped across them.
///
/// Wire format: the bytes themselves, and before the first stripe of every message a word (8 bytes, little-endian)
/// of its total length (bits 0-46) and 16 bits of its call's tag (bits 47-62; 0: untagged), which the receiver
/// compares with the length and tag it posted: ranks whose calls differ get an error naming both lengths instead of a
/// silent truncation, or, when only the tags differ, an error saying the message belongs to another call instead of
/// wrong data. Both sides post the same sequence of message sizes (the schedule
/// guarantees it), so both cut every message into the same stripes of `stripeBytes` (the last one shorter) and number
/// the stripes of a direction 0, 1, 2, ... across messages; stripe g travels on connection g % connections. A receiver therefore knows, for each connection, which stripe comes next and where it goes:
/// - a receive with a direct buffer reads every stripe straight to its place, from all connections at once;
/// - a receive with a sink reads a stripe into that connection's staging buffer and hands it to the sink only when
///   it is the message's next stripe, so the sink sees consecutive pieces (stripe lengths are multiples of 8 except
///   a message's last). A connection whose staged stripe waits for an earlier one pauses; the earliest missing
///   stripe is always at the front of its own connection, so this never deadlocks.
/// Empty messages carry no stripes and complete at once on both sides.
///
/// Control words of the close handshake (HOCCL_MAX_CONNS, tcp_close.cc) travel in the place of a message's length,
/// at a message boundary: on the connection where the next message's first stripe goes. Bit 63 tells them apart
/// from a length (no message is 2^63 bytes long).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transports/transport.h"

namespace hoccl::transport::tcp {

/// A channel to one peer over `connections` connected, authenticated sockets.
class TcpChannel final : public Channel {
 public:
  /// Takes the sockets (already past the hello; made nonblocking here). `stripeBytes` must be equal on both sides.
  TcpChannel(const boot::RankInfo& self, const boot::RankInfo& peerInfo, std::vector<net::Fd> sockets,
             size_t stripeBytes);
  ~TcpChannel() override;

  /// The peer's rank.
  int peer() const override { return peer_.rank; }
  /// Queues a send (cut into stripes over the connections).
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  /// Queues a send whose length word carries 16 bits of `tag`.
  void postTaggedSend(const void* data, size_t bytes, CallTag tag) override;
  /// Queues a receive; a message of its length tagged for another call fails it (RecvTarget::tag).
  void postRecv(size_t bytes, RecvTarget target) override;
  /// Writes and reads whatever the sockets accept without blocking.
  bool progress() override;
  /// Posted operations not yet complete.
  size_t pending() const override { return sendMsgs_.size() + recvMsgs_.size(); }
  /// poll() on the sockets that have work, up to the timeout.
  void waitForActivity(int timeoutMicros) override;
  /// Yes: see tcp_close.cc.
  bool closable() const override { return true; }
  /// Sends a close request when idle and no earlier request is unanswered (tcp_close.cc).
  bool requestClose() override;
  /// Reads and answers control words at the receive boundary when nothing is pending (tcp_close.cc).
  Link serviceClose(bool inUse, bool needed) override;
  /// The handshake's state.
  Link link() const override { return link_; }

 private:
  struct SendMsg {
    size_t stripesLeft;
  };
  struct RecvMsg {
    size_t bytes;
    RecvTarget target;
    size_t stripesLeft;
    uint64_t nextDeliver;  ///< global index of the next stripe to hand to the sink
  };
  struct Stripe {
    uint64_t index;       ///< global stripe number in this direction
    uint64_t msg;         ///< message sequence number in this direction
    char* base;           ///< sends: source; direct receives: destination; sink receives: null (staging)
    size_t offset;        ///< offset in the message
    size_t bytes;         ///< stripe length
    size_t done = 0;      ///< bytes moved so far
    uint64_t length = 0;  ///< the first stripe of a message: the message's length, sent (or received) ahead of it
    size_t lengthDone = sizeof(uint64_t);  ///< bytes of `length` moved so far (all of them when there is none)
    bool control = false;                  ///< sends: a control word alone (length holds it), no data
  };
  struct Conn {
    net::Fd fd;
    std::deque<Stripe> out;
    std::deque<Stripe> in;
    std::vector<char> staging;
  };

  bool progressSends();
  bool progressRecvs();
  bool deliverStaged();
  void completeRecvs();
  RecvMsg& recvMsg(uint64_t seq) { return recvMsgs_[seq - recvDone_]; }
  [[noreturn]] void fail(const std::string& what, int err) const;
  void checkLength(const Stripe& s);
  // Close handshake (tcp_close.cc).
  static constexpr uint64_t kControlBit = uint64_t{1} << 63;
  /// The length word: the message's length below bit 47, 16 bits of its call's tag above (tagBits).
  static constexpr int kTagShift = 47;
  static constexpr uint64_t kLengthMask = (uint64_t{1} << kTagShift) - 1;
  /// The 16 bits of `tag` a length word carries (0 only for an untagged message).
  static uint64_t tagBits(CallTag tag) {
    if (!tag) return 0;
    const uint64_t folded = (tag ^ (tag >> 16)) & 0xffff;
    return folded ? folded : 1;
  }
  void queueControl(uint64_t kind);
  void onControl(uint64_t word, bool idle, bool inUse);
  void takeControlWords(Stripe& s, char* data);
  void flushControl();

  Link link_ = Link::Open;
  int owed_ = 0;           ///< answers this side awaits to its close requests (0 or 1)
  size_t ctrlQueued_ = 0;  ///< control words queued for sending
  bool peerLeft_ = false;  ///< the peer closed without answering a request (its process is gone)

  boot::RankInfo self_;
  boot::RankInfo peer_;
  std::vector<Conn> conns_;
  size_t stripeBytes_;
  std::deque<SendMsg> sendMsgs_;
  std::deque<RecvMsg> recvMsgs_;
  uint64_t sendStripes_ = 0;  ///< stripes posted for sending so far
  uint64_t recvStripes_ = 0;  ///< stripes posted for receiving so far
  uint64_t sendPosted_ = 0;   ///< messages posted for sending so far
  uint64_t sendDone_ = 0;     ///< messages fully sent (a prefix)
  uint64_t recvPosted_ = 0;   ///< messages posted for receiving so far
  uint64_t recvDone_ = 0;     ///< messages fully received (a prefix)
};

}  // namespace hoccl::transport::tcp
