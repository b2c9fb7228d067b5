/*
 * Closing an idle shm channel (HOCCL_MAX_CONNS): the handshake of transports/tcp/tcp_close.cc carried in the slot
 * rings, so that both sides let go of the pair's two segments at the same point of its message sequence, with
 * nothing in flight in either ring.
 *
 * Each side counts the messages it posted for sending (S) and the messages it received completely (R). Three words
 * travel as slots of their own (kind kSlotControl, the word's kind and its sender's S and R in the slot's inline
 * bytes) between two messages: REQ, ACK and NACK.
 *   - The closer, idle (nothing pending, no call in flight uses the channel, no earlier request unanswered),
 *     publishes REQ{S, R} and becomes Closing: it posts nothing on the channel until the question is settled (the
 *     communicator waits for the answer before a call uses the peer again).
 *   - The responder meets the REQ where it expects the next message: at the head of a posted receive (it is busy:
 *     NACK), or, when nothing is pending, in serviceClose (called at the start of every call and while a call waits,
 *     for every idle channel). It answers ACK only if it is idle, no call in flight uses the channel, and the two
 *     sides are in step: its R equals the closer's S and its S equals the closer's R. Its S equal to the closer's R
 *     means every message it published has been read out of its ring; its R equal to the closer's S, that it read
 *     every message of the closer's ring. After an ACK it is Closed at once.
 *   - The closer reads the answer in serviceClose: ACK -> Closed; NACK -> Open again. If the peer's next message
 *     comes first, the peer used the channel after the REQ and its answer will be a NACK: the closer is Open again
 *     at once and swallows that NACK when it comes (at a receive or idle).
 *   - Crossing REQs: a Closing side that reads the peer's REQ answers it like any responder; an ACK closes it (it
 *     never reads the answer to its own REQ). A NACK leaves it waiting for its own answer.
 * An ACK is only sent by a side that then closes and only read by a side that posted nothing since its REQ, so
 * both rings are empty of messages when the channel is destroyed on either side (a handshake word may be left
 * unread: it dies with its segment). The next call that needs the pair connects it again from both sides, with new
 * segments (ShmTransport::connectPeers counts the pair's connections in the names: a side that reconnects before
 * the peer has let go of the old segments can never open them).
 *
 * Memory: each side unmaps its own mappings and closes the file it created; a shared file lives until its last
 * mapping goes, so the side that closes first never pulls memory from under the other, which may still read the
 * ACK out of the old ring and release its slot. Once both sides have destroyed the channel, both segments are freed.
 *
 * A dead peer: a side waiting for the answer (the communicator needs the peer) checks the peer's process while it
 * waits and names it when it is gone, instead of waiting for HOCCL_TIMEOUT.
 */
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "transports/shm/shm_channel.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {
namespace {

constexpr uint64_t kReq = 1, kAck = 2, kNack = 3;

const char* kindName(uint64_t kind) { return kind == kReq ? "request" : kind == kAck ? "ACK" : "NACK"; }

// The inline bytes of a control slot: the word's kind, then its sender's messages sent and received.
struct ControlWord {
  uint64_t kind;
  uint64_t sent;
  uint64_t received;
};
static_assert(sizeof(ControlWord) <= kInlineBytes, "a control word fits in a slot's inline bytes");

}  // namespace

void ShmChannel::publishControl(const PendingSend& s, SlotInfo& info) {
  const ControlWord w{s.control, s.word[0], s.word[1]};
  std::memcpy(info.inlineData, &w, sizeof(w));
  info.bytes = 0;
  info.last = 1;
  info.kind = kSlotControl;
  info.tag = 0;
  info.messageBytes = 0;
  publish(info);
}

void ShmChannel::queueControl(uint64_t kind) {
  PendingSend s{nullptr, 0, 0};
  s.control = kind;
  s.word[0] = sendPosted_;
  s.word[1] = recvDone_;
  sends_.push_back(s);
  ++ctrlQueued_;
  HOCCL_TRACE(kShm, "shm: rank {} -> rank {}: close {} (sent {}, received {})", self_.rank, peer_.rank, kindName(kind),
              sendPosted_, recvDone_);
  if (progressSends()) ringPeer();  // the rest (a full ring) goes with the next progress() or serviceClose()
}

void ShmChannel::flushControl() {
  // Only handshake words can hold slots of this ring now (the peer read every message), and the peer reads them
  // while it waits for this answer: a short wait at most. A peer that closed too (crossing ACKs) reads nothing more.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (ctrlQueued_ > 0 && std::chrono::steady_clock::now() < deadline) {
    if (progressSends()) ringPeer();
    if (ctrlQueued_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool ShmChannel::requestClose() {
  if (link_ != Link::Open || owed_ != 0 || pending() != 0 || ctrlQueued_ != 0) return false;
  owed_ = 1;
  link_ = Link::Closing;
  queueControl(kReq);
  return true;
}

void ShmChannel::onControl(const SlotInfo& info, bool idle, bool inUse) {
  ControlWord w;
  std::memcpy(&w, info.inlineData, sizeof(w));
  HOCCL_TRACE(kShm, "shm: rank {} <- rank {}: close {} (peer sent {}, received {}; this side sent {}, received {})",
              self_.rank, peer_.rank, kindName(w.kind), w.sent, w.received, sendPosted_, recvDone_);
  if (w.kind == kReq) {
    const bool agree = idle && !inUse && link_ != Link::Closed && pending() == 0 && recvDone_ == w.sent &&
                       sendPosted_ == w.received;
    queueControl(agree ? kAck : kNack);
    if (agree) {
      flushControl();
      link_ = Link::Closed;
    }
    return;
  }
  if (w.kind == kAck && owed_ == 1 && link_ == Link::Closing && idle) {
    owed_ = 0;
    link_ = Link::Closed;
    return;
  }
  if (w.kind == kNack && owed_ == 1) {
    owed_ = 0;
    if (link_ == Link::Closing) link_ = Link::Open;
    return;
  }
  throwInternalError(
      fmt::format("shm: rank {}: unexpected close {} from {} (this side: {} answer(s) owed, {}, {} message(s) "
                  "pending); the close handshake of HOCCL_MAX_CONNS is out of step",
                  self_.rank, kindName(w.kind), describePeer(peer_), owed_, link_ == Link::Closing ? "closing" : "open",
                  pending()));
}

bool ShmChannel::takeControl(bool idle, bool inUse) {
  // The next slot of the incoming ring is published and is a handshake word: read it, release its slot, answer.
  const SlotInfo& info = inHdr_->info[inTail_ % inHdr_->slots];
  SlotInfo copy;
  std::memcpy(copy.inlineData, info.inlineData, sizeof(copy.inlineData));
  inHdr_->tail.store(++inTail_, std::memory_order_release);
  ringPeer();  // the peer may wait for ring space
  onControl(copy, idle, inUse);
  return true;
}

Channel::Link ShmChannel::serviceClose(bool inUse, bool needed) {
  if (ctrlQueued_ > 0 && progressSends()) ringPeer();
  if (link_ == Link::Closed || pending() != 0) return link_;
  while (link_ != Link::Closed) {
    const SlotInfo& info = inHdr_->info[inTail_ % inHdr_->slots];
    if (info.seq.load(std::memory_order_acquire) != inTail_ + 1) {  // nothing published
      if (link_ == Link::Closing && needed && checkPid_) {
        auto now = std::chrono::steady_clock::now();
        if (now >= nextCheck_) {
          nextCheck_ = now + std::chrono::milliseconds(100);
          if (!processAlive(peer_.pid))
            throwRemoteError(fmt::format(
                "shm: rank {} lost its peer {}: its process has exited or was killed before answering this rank's "
                "request to close their idle connection (HOCCL_MAX_CONNS). Look at the peer's output for the cause",
                self_.rank, describePeer(peer_)));
        }
      }
      break;
    }
    if (info.kind != kSlotControl) {                   // the peer's next message: it went on using the channel
      if (link_ == Link::Closing) link_ = Link::Open;  // its answer will be a NACK (see above)
      break;
    }
    takeControl(true, inUse);
  }
  return link_;
}

}  // namespace hoccl::transport::shm
