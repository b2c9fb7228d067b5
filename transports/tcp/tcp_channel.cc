// The tcp channel: striping of messages over several nonblocking connections (see tcp_channel.h).
#include "transports/tcp/tcp_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "transports/transport_util.h"

namespace hoccl::transport::tcp {

TcpChannel::TcpChannel(const boot::RankInfo& self, const boot::RankInfo& peerInfo, std::vector<net::Fd> sockets,
                       size_t stripeBytes)
    : self_(self), peer_(peerInfo), stripeBytes_(stripeBytes) {
  if (sockets.empty() || stripeBytes_ == 0 || stripeBytes_ % 8 != 0)
    throwInternalError(fmt::format("tcp: bad channel to rank {} ({} sockets, stripe {} bytes)", peer_.rank,
                                   sockets.size(), stripeBytes_));
  conns_.resize(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) {
    net::setNonBlocking(sockets[i].get());
    conns_[i].fd = std::move(sockets[i]);
  }
}

TcpChannel::~TcpChannel() = default;

void TcpChannel::postTaggedSend(const void* data, size_t bytes, CallTag tag) {
  if (bytes == 0) return;  // both sides skip empty messages
  if (bytes > kLengthMask)
    throwInvalidArgument(fmt::format("tcp: send of {} bytes to rank {}: a message is at most {} bytes", bytes,
                                     peer_.rank, kLengthMask));
  if (link_ != Link::Open)
    throwInternalError(
        fmt::format("tcp: send of {} bytes to rank {} on a connection that is closing", bytes, peer_.rank));
  if (!data)
    throwInvalidArgument(fmt::format("tcp: send of {} bytes to rank {} from a null buffer", bytes, peer_.rank));
  uint64_t seq = sendPosted_++;
  size_t stripes = (bytes + stripeBytes_ - 1) / stripeBytes_;
  sendMsgs_.push_back({stripes});
  char* base = const_cast<char*>(static_cast<const char*>(data));  // only ever read
  for (size_t off = 0; off < bytes; off += stripeBytes_) {
    uint64_t g = sendStripes_++;
    Stripe s{g, seq, base, off, std::min(stripeBytes_, bytes - off)};
    if (off == 0) {  // the message's length (and tag) travels ahead of its first stripe
      s.length = bytes | tagBits(tag) << kTagShift;
      s.lengthDone = 0;
    }
    conns_[g % conns_.size()].out.push_back(s);
  }
}

void TcpChannel::postRecv(size_t bytes, RecvTarget target) {
  if (bytes == 0) return;
  if (link_ != Link::Open)
    throwInternalError(
        fmt::format("tcp: receive of {} bytes from rank {} on a connection that is closing", bytes, peer_.rank));
  if (!target.direct && !target.sink)
    throwInvalidArgument(
        fmt::format("tcp: receive of {} bytes from rank {} has neither a buffer nor a sink", bytes, peer_.rank));
  uint64_t seq = recvPosted_++;
  size_t stripes = (bytes + stripeBytes_ - 1) / stripeBytes_;
  char* base = static_cast<char*>(target.direct);
  recvMsgs_.push_back({bytes, std::move(target), stripes, recvStripes_});
  for (size_t off = 0; off < bytes; off += stripeBytes_) {
    uint64_t g = recvStripes_++;
    Conn& c = conns_[g % conns_.size()];
    Stripe s{g, seq, base, off, std::min(stripeBytes_, bytes - off)};
    if (off == 0) s.lengthDone = 0;  // the sender's length of the message comes first
    c.in.push_back(s);
    if (!base && c.staging.empty()) c.staging.resize(stripeBytes_);
  }
}

bool TcpChannel::progressSends() {
  bool moved = false;
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    while (!c.out.empty()) {
      Stripe& s = c.out.front();
      // The length (if any is left to send) and the data in one system call.
      iovec iov[2];
      int parts = 0;
      if (s.lengthDone < sizeof(s.length))
        iov[parts++] = {reinterpret_cast<char*>(&s.length) + s.lengthDone, sizeof(s.length) - s.lengthDone};
      if (s.bytes > s.done) iov[parts++] = {s.base + s.offset + s.done, s.bytes - s.done};  // none: a control word
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = static_cast<size_t>(parts);
      ssize_t n = ::sendmsg(c.fd.get(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        if (s.control && (errno == EPIPE || errno == ECONNRESET)) {
          // A close handshake's word to a peer that has just closed after agreeing (crossing requests, tcp_close.cc):
          // nothing to tell it any more. A peer that died is found by the next use or by the wait for an answer.
          --ctrlQueued_;
          c.out.pop_front();
          continue;
        }
        fail(fmt::format("sending on connection {}", i), errno);
      }
      size_t sent = static_cast<size_t>(n);
      const size_t ofLength = std::min(sent, sizeof(s.length) - s.lengthDone);
      s.lengthDone += ofLength;
      sent -= ofLength;
      s.done += sent;
      moved = moved || n > 0;
      if (s.lengthDone < sizeof(s.length) || s.done < s.bytes) continue;
      if (s.control) {  // a control word of the close handshake: no message to complete
        --ctrlQueued_;
        c.out.pop_front();
        continue;
      }
      sendMsgs_[s.msg - sendDone_].stripesLeft--;
      c.out.pop_front();
    }
  }
  while (!sendMsgs_.empty() && sendMsgs_.front().stripesLeft == 0) {
    sendMsgs_.pop_front();
    ++sendDone_;
  }
  return moved;
}

bool TcpChannel::progressRecvs() {
  bool moved = false;
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    while (!c.in.empty()) {
      Stripe& s = c.in.front();
      if (s.done < s.bytes || s.lengthDone < sizeof(s.length)) {
        // The length (if any is left to read) and the data in one system call; the data never goes beyond this
        // rank's own stripe, whatever the peer sent.
        char* dst = s.base ? s.base + s.offset + s.done : c.staging.data() + s.done;
        iovec iov[2];
        int parts = 0;
        if (s.lengthDone < sizeof(s.length))
          iov[parts++] = {reinterpret_cast<char*>(&s.length) + s.lengthDone, sizeof(s.length) - s.lengthDone};
        iov[parts++] = {dst, s.bytes - s.done};
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<size_t>(parts);
        ssize_t n = ::recvmsg(c.fd.get(), &mh, MSG_DONTWAIT);
        if (n == 0) fail(fmt::format("connection {} was closed by the peer", i), 0);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == EINTR) continue;
          fail(fmt::format("receiving on connection {}", i), errno);
        }
        size_t got = static_cast<size_t>(n);
        const size_t ofLength = std::min(got, sizeof(s.length) - s.lengthDone);
        s.lengthDone += ofLength;
        got -= ofLength;
        s.done += got;
        moved = true;
        if (ofLength && s.lengthDone == sizeof(s.length)) {
          if (s.length & kControlBit) takeControlWords(s, dst);  // the close handshake's, in the length's place
          if (s.lengthDone == sizeof(s.length)) checkLength(s);
        }
        if (s.done < s.bytes) continue;
      }
      RecvMsg& m = recvMsg(s.msg);
      if (!s.base) {
        if (m.nextDeliver != s.index) break;  // an earlier stripe of this message is still on another connection
        m.target.sink(c.staging.data(), s.offset, s.bytes);
        m.nextDeliver++;
      }
      m.stripesLeft--;
      c.in.pop_front();
    }
  }
  moved = deliverStaged() || moved;
  completeRecvs();
  return moved;
}

void TcpChannel::checkLength(const Stripe& s) {
  const RecvMsg& m = recvMsg(s.msg);
  const uint64_t sent = s.length & kLengthMask;
  if (sent != m.bytes)
    throwMismatch(
        fmt::format("tcp: message size mismatch with {}: this rank posted a receive of {} bytes, the peer sent "
                    "{} bytes; nothing beyond this rank's buffer was written. The two ranks' calls differ "
                    "(count, type, collective or order)",
                    describePeer(peer_), m.bytes, sent));
  const uint64_t theirs = (s.length >> kTagShift) & 0xffff, mine = tagBits(m.target.tag);
  if (theirs && mine && theirs != mine)
    throwMismatch(fmt::format(
        "tcp: the message from {} belongs to another call: its size ({} bytes) matches this rank's receive, but it "
        "is tagged for call {:#06x} where this rank receives for call {:#06x} (nothing beyond this rank's buffer was "
        "written). The two "
        "ranks' calls differ (type, op, count, collective or order) in a way their message sizes do not show; "
        "HOCCL_CHECK_MISMATCH=2 names both calls",
        describePeer(peer_), sent, theirs, mine));
}

bool TcpChannel::deliverStaged() {
  // A staged stripe may have become deliverable when an earlier connection in the loop above delivered its own.
  bool moved = false;
  for (bool again = true; again;) {
    again = false;
    for (Conn& c : conns_) {
      if (c.in.empty()) continue;
      Stripe& s = c.in.front();
      if (s.base || s.done < s.bytes) continue;
      RecvMsg& m = recvMsg(s.msg);
      if (m.nextDeliver != s.index) continue;
      m.target.sink(c.staging.data(), s.offset, s.bytes);
      m.nextDeliver++;
      m.stripesLeft--;
      c.in.pop_front();
      moved = again = true;
    }
  }
  return moved;
}

void TcpChannel::completeRecvs() {
  while (!recvMsgs_.empty() && recvMsgs_.front().stripesLeft == 0) {
    recvMsgs_.pop_front();
    ++recvDone_;
  }
}

bool TcpChannel::progress() {
  if (sendMsgs_.empty() && recvMsgs_.empty() && ctrlQueued_ == 0) return false;
  bool moved = progressRecvs();
  return progressSends() || moved;
}

void TcpChannel::waitForActivity(int timeoutMicros) {
  if (timeoutMicros <= 0) return;
  std::vector<pollfd> fds;
  fds.reserve(conns_.size());
  for (Conn& c : conns_) {
    short events = 0;
    if (!c.out.empty()) events |= POLLOUT;
    if (!c.in.empty() && c.in.front().done < c.in.front().bytes) events |= POLLIN;
    if (events) fds.push_back({c.fd.get(), events, 0});
  }
  if (fds.empty()) {
    Channel::waitForActivity(timeoutMicros);
    return;
  }
  timespec ts{timeoutMicros / 1000000, static_cast<long>(timeoutMicros % 1000000) * 1000};
  ppoll(fds.data(), fds.size(), &ts, nullptr);  // errors and hang-ups surface in the next progress()
}

void TcpChannel::fail(const std::string& what, int err) const {
  std::string reason = err ? fmt::format("{} failed: {}", what, std::strerror(err)) : what;
  std::string selfHost(self_.hostname, strnlen(self_.hostname, sizeof(self_.hostname)));
  throwRemoteError(
      fmt::format("tcp: rank {} lost its peer {}: {} ({} send(s), {} receive(s) pending). The peer "
                  "process probably exited, crashed or was killed: check its output. If it is still "
                  "running, check the network between {} and the peer's host (firewall, "
                  "HOCCL_SOCKET_IFNAME)",
                  self_.rank, describePeer(peer_), reason, sendMsgs_.size(), recvMsgs_.size(),
                  selfHost.empty() ? "this host" : selfHost));
}

}  // namespace hoccl::transport::tcp
