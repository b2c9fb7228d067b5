/*
 * Closing an idle tcp connection (HOCCL_MAX_CONNS): a handshake on the channel itself, so that both sides drop the
 * connection at the same point of its message sequence, nothing in flight is lost, and a peer that closed on purpose
 * is never taken for a dead one.
 *
 * Each side counts the messages it posted for sending (S) and the messages it received completely (R). Three control
 * words travel in a length's place at a message boundary (tcp_channel.h): REQ, ACK and NACK, each carrying its sender's
 * S and R (30 bits each: the counts differ by the messages in flight, far fewer than 2^30).
 *   - The closer, idle (nothing pending, no call in flight uses the channel, no earlier request unanswered), sends
 *     REQ{S, R} and becomes Closing: it posts nothing on the channel until the question is settled (the
 *     communicator waits for the answer before a call uses the peer again).
 *   - The responder reads the REQ where it expects the next message: in a length slot when it has posted a receive
 *     (it is busy: NACK), or, when nothing is pending, from serviceClose (the executor calls it at the start of a call
 *     and while it waits, for every idle connection). It answers ACK only if it is idle, no call in flight uses the
 *     channel, and the two sides are in step: its R equals the closer's S and its S equals the closer's R (every
 *     message either side sent has been received). After an ACK it closes at once (Closed).
 *   - The closer reads the answer from serviceClose: ACK -> Closed; NACK -> Open again. If a message of the peer
 *     comes first, the peer used the channel after the REQ, so its answer will be NACK (its S moved past the REQ's
 *     R): the closer is Open again at once and swallows that NACK when it comes (in a length slot or idle).
 *   - Both sides' REQs may cross. A Closing side that reads the peer's REQ answers it like any responder; an ACK
 *     closes it (it never reads the answer to its own REQ, which can only be an ACK as well or arrive at a closed
 *     socket). A NACK (the channel is needed by a call in flight) leaves it waiting for its own answer.
 * An ACK is only ever sent by a side that then closes, and only read by a side that posted nothing since its REQ, so
 * both sides drop the channel with the same counts and empty queues; the next call that needs the pair connects it
 * again from both sides (TcpTransport::connectPeers). Every REQ gets exactly one answer, so `owed_` (0 or 1) tells
 * which answer is whose. No side ever waits for an answer except for a channel its own call needs; the peer then
 * makes the same call, and every rank answers while it runs or waits, so there is no cycle.
 *
 * Failure detection: the closed channel is destroyed on both sides, so its end-of-file is never read as a lost peer.
 * A Closing side that meets end-of-file without an answer reports the peer as gone when (and only when) a call needs
 * it. The words are 8 bytes on a connection whose peer reads them, so the ACK is flushed before the close.
 */
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "transports/tcp/tcp_channel.h"
#include "transports/transport_util.h"

namespace hoccl::transport::tcp {
namespace {

constexpr uint64_t kReq = 1, kAck = 2, kNack = 3;
constexpr uint64_t kCountMask = (uint64_t{1} << 30) - 1;

const char* kindName(uint64_t kind) { return kind == kReq ? "request" : kind == kAck ? "ACK" : "NACK"; }

}  // namespace

void TcpChannel::queueControl(uint64_t kind) {
  Stripe s{sendStripes_, 0, nullptr, 0, 0};
  s.length = kControlBit | (kind << 61) | ((recvDone_ & kCountMask) << 30) | (sendPosted_ & kCountMask);
  s.lengthDone = 0;
  s.control = true;
  conns_[sendStripes_ % conns_.size()].out.push_back(s);
  ++ctrlQueued_;
  HOCCL_TRACE(kNet, "tcp: rank {} -> rank {}: close {} (sent {}, received {})", self_.rank, peer_.rank, kindName(kind),
              sendPosted_, recvDone_);
}

void TcpChannel::flushControl() {
  // The words are tiny and the peer reads its socket: a short wait at most.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (ctrlQueued_ > 0 && std::chrono::steady_clock::now() < deadline) {
    progressSends();
    if (ctrlQueued_ > 0) waitForActivity(1000);
  }
}

bool TcpChannel::requestClose() {
  if (link_ != Link::Open || owed_ != 0 || pending() != 0 || ctrlQueued_ != 0) return false;
  queueControl(kReq);
  owed_ = 1;
  link_ = Link::Closing;
  progressSends();  // the rest (if the socket is full) goes with the next progress() or serviceClose()
  return true;
}

void TcpChannel::onControl(uint64_t word, bool idle, bool inUse) {
  const uint64_t kind = (word >> 61) & 3;
  const uint64_t peerSent = word & kCountMask, peerReceived = (word >> 30) & kCountMask;
  HOCCL_TRACE(kNet, "tcp: rank {} <- rank {}: close {} (peer sent {}, received {}; this side sent {}, received {})",
              self_.rank, peer_.rank, kindName(kind), peerSent, peerReceived, sendPosted_, recvDone_);
  if (kind == kReq) {
    const bool agree = idle && !inUse && link_ != Link::Closed && sendMsgs_.empty() && recvMsgs_.empty() &&
                       (recvDone_ & kCountMask) == peerSent && (sendPosted_ & kCountMask) == peerReceived;
    queueControl(agree ? kAck : kNack);
    if (agree) {
      flushControl();
      link_ = Link::Closed;
    } else {
      progressSends();
    }
    return;
  }
  if (kind == kAck && owed_ == 1 && link_ == Link::Closing && idle) {
    owed_ = 0;
    link_ = Link::Closed;
    return;
  }
  if (kind == kNack && owed_ == 1) {
    owed_ = 0;
    if (link_ == Link::Closing) link_ = Link::Open;
    return;
  }
  throwInternalError(
      fmt::format("tcp: rank {}: unexpected close {} from {} (this side: {} answer(s) owed, {}, {} "
                  "message(s) pending); the close handshake of HOCCL_MAX_CONNS is out of step",
                  self_.rank, kindName(kind), describePeer(peer_), owed_, link_ == Link::Closing ? "closing" : "open",
                  pending()));
}

void TcpChannel::takeControlWords(Stripe& s, char* data) {
  // A receive is posted here, so the channel is busy: any request is refused. The bytes read past the word (at
  // data, s.done of them) are the next word or the message's length and then its data: shift them into place.
  while (s.lengthDone == sizeof(s.length) && (s.length & kControlBit)) {
    onControl(s.length, false, true);
    const size_t extra = s.done;
    const size_t k = std::min(extra, sizeof(s.length));
    std::memcpy(&s.length, data, k);
    s.lengthDone = k;
    std::memmove(data, data + k, extra - k);
    s.done = extra - k;
  }
}

Channel::Link TcpChannel::serviceClose(bool inUse, bool needed) {
  if (ctrlQueued_ > 0) progressSends();
  if (link_ == Link::Closed || !recvMsgs_.empty() || !sendMsgs_.empty()) return link_;
  if (peerLeft_) {
    if (needed) fail("the peer closed the connection without answering this rank's request to close it", 0);
    return link_;
  }
  // Nothing is posted: the next word on the stream is at the boundary, on the connection of the next stripe.
  Conn& c = conns_[recvStripes_ % conns_.size()];
  while (link_ != Link::Closed) {
    uint64_t word = 0;
    ssize_t n = ::recv(c.fd.get(), &word, sizeof(word), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      // End of file (or an error) with nothing posted: the peer is gone. Reported by the next use, or now if this
      // side waits for an answer.
      if (link_ == Link::Closing) {
        peerLeft_ = true;
        if (needed) fail("the peer closed the connection without answering this rank's request to close it", 0);
      }
      break;
    }
    if (n < static_cast<ssize_t>(sizeof(word))) break;  // nothing yet, or only part of a word
    if (!(word & kControlBit)) {                        // the peer's next message: it went on using the channel
      if (link_ == Link::Closing) link_ = Link::Open;   // its answer will be a NACK (see above)
      break;
    }
    n = ::recv(c.fd.get(), &word, sizeof(word), MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof(word)))
      fail(fmt::format("reading a control word that was there a moment ago ({} bytes)", n), n < 0 ? errno : 0);
    onControl(word, true, inUse);
  }
  return link_;
}

}  // namespace hoccl::transport::tcp
