/*
 * Several roots (hocclCommInitRankScalable with nIds ids): rank r joins the root of id floor(r * nIds / nranks), so
 * each root meets only its share of the ranks. The root of id 0 is the head; every other root is a sub-root: once
 * its share has joined it links to the head (authenticated with id 0's secret, which the first rank of its share,
 * in the sub-root's own process, hands it: handHeadId), sends the share's joins (kLinkShare), and from then on only
 * relays: every message of its ranks goes to the head (kLinkFromRank, kLinkClosed), every message of the head to
 * its rank (kLinkToRank). The head sees relayed ranks as if they were connected to it, so plans, pings and verdicts
 * are decided in one place for the whole communicator.
 *
 * A sub-root that loses a joined rank before its share is complete does not link: it sends the head a loss notice
 * instead (kLinkLost, with the verdict it sent its own ranks), and the head sends that verdict to every rank it
 * serves, so that the ranks of the other ids stop at once too (root_server.cc, rule 0).
 *
 * Every message on a link is a LinkHeader and `bytes` of payload, parsed with nextLinkMessage and, for a link's first
 * message, checked with linkOpeningProblem (wire.h) before anything is sized by it.
 */
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/boot/handshake.h"
#include "base/boot/root_core.h"
#include "base/boot/root_server.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot::server {
namespace {

// The head root's id that the first rank of sub-root `subNonce`'s share handed over (handHeadId), if any yet.
std::optional<UniqueId> headIdOf(uint64_t subNonce) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().headIds.find(subNonce);
  if (it == registry().headIds.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void RootServer::acceptLink(Acceptor::Peer peer, net::Deadline deadline) {
  const std::string from = fmt::format("the bootstrap root of id {} ({})", peer.hello.rank, peer.from);
  try {
    net::Deadline by = std::min(deadline, Clock::now() + kProofWait);
    LinkHeader h{};
    ShareWire sw{};
    net::readAll(peer.fd.get(), &h, sizeof(h), by, "bootstrap link");
    net::readAll(peer.fd.get(), &sw, sizeof(sw), by, "bootstrap link");
    std::string problem;
    if (const char* bad = linkOpeningProblem(h, sw, sizeof(RankInfo)))
      problem = fmt::format("{} sent a malformed share: {}", from, bad);
    else if (peer.hello.tag != id_.nonce)
      problem = fmt::format("{} links to another communicator (tag {:#x}, this head root serves {:#x})", from,
                            peer.hello.tag, id_.nonce);
    else if (!ranks_.empty() && (idIndex_ != 0 || sw.nranks != nranks()))
      problem = fmt::format("{} has a share of a communicator of {} ranks, but this root serves id {} of {} ranks",
                            from, sw.nranks, idIndex_, nranks());
    if (!problem.empty()) {
      HOCCL_WARN(kBootstrap, "bootstrap root: {}", problem);
      return;
    }
    if (ranks_.empty()) ranks_.resize(sw.nranks);  // nIds_ and the head's own share come with its first rank
    if (h.type == kLinkLost) {
      acceptLoss(peer.fd.get(), h, sw, by, from);
      return;
    }
    std::vector<char> entries(h.bytes - sizeof(sw));  // bounded by linkOpeningProblem
    net::readAll(peer.fd.get(), entries.data(), entries.size(), by, "bootstrap link");
    if (const char* bad = shareEntriesProblem(entries.data(), entries.size(), sw, sizeof(RankInfo)))
      throwInvalidUsage(
          fmt::format("{} sent a malformed share (ranks {}..{}): {}", from, sw.shareLo, sw.shareHi - 1, bad));
    std::vector<std::pair<JoinMessage, RankInfo>> joins(sw.shareHi - sw.shareLo);
    for (size_t i = 0; i < joins.size(); ++i) {
      auto& [j, info] = joins[i];
      const char* at = entries.data() + i * (sizeof(JoinMessage) + sizeof(RankInfo));
      std::memcpy(&j, at, sizeof(j));
      std::memcpy(&info, at + sizeof(j), sizeof(info));
      if (ranks_[j.rank].present)
        throwInvalidUsage(fmt::format("{} relays rank {}, which already joined", from, j.rank));
    }
    Link link;
    link.fd = std::move(peer.fd);
    link.idIndex = sw.idIndex;
    link.pid = sw.pid;
    link.share = {sw.shareLo, sw.shareHi};
    for (auto& [j, info] : joins) {
      Rank& rk = ranks_[j.rank];
      rk.info = info;
      rk.info.rank = j.rank;
      rk.listener = j.listener;
      rk.via = static_cast<int>(links_.size());
      rk.present = true;
    }
    links_.push_back(std::move(link));
    HOCCL_INFO(kBootstrap, "bootstrap head root at {}: {} linked with ranks {}..{}", id_.root.toString(), from,
               sw.shareLo, sw.shareHi - 1);
    if (verdictSent_)  // the job already failed: its ranks learn it through their sub-root
      for (int r = sw.shareLo; r < sw.shareHi; ++r) sendVerdictTo(r);
  } catch (const Error& e) {
    HOCCL_WARN(kBootstrap, "bootstrap root: {} failed to link: {}", from, e.what());
  }
}

void RootServer::acceptLoss(int fd, const LinkHeader& h, const ShareWire& sw, net::Deadline by,
                            const std::string& from) {
  RankInfo info;
  net::readAll(fd, &info, sizeof(info), by, "bootstrap link");
  std::string text(h.bytes - sizeof(sw) - sizeof(info), '\0');
  net::readAll(fd, text.data(), text.size(), by, "bootstrap link");
  for (int r = sw.shareLo; r < sw.shareHi; ++r)
    if (!ranks_[r].present) ranks_[r].present = true;
  ranks_[h.rank].info = info;
  ranks_[h.rank].info.rank = h.rank;
  HOCCL_INFO(kBootstrap, "bootstrap head root at {}: {} lost rank {} before its share was complete",
             id_.root.toString(), from, h.rank);
  if (!verdictSent_) sendVerdict(Verdict::Kind::Died, h.rank, -1, text);
}

void RootServer::readLink(int l) {
  Link& link = links_[l];
  char chunk[64 << 10];
  ssize_t got = ::recv(link.fd.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (got <= 0) {
    loseLink(l);
    return;
  }
  link.in.insert(link.in.end(), chunk, chunk + got);
  size_t used = 0;
  while (true) {
    const Frame f = nextLinkMessage(link.in.data() + used, link.in.size() - used, link.share.lo, link.share.hi);
    if (f.status == Frame::Partial) break;
    if (f.status == Frame::Malformed) {
      HOCCL_WARN(kBootstrap,
                 "bootstrap head root: the root of id {} sent a malformed relay (type {}, {} bytes, for a rank "
                 "outside its share or too large); dropping its link",
                 link.idIndex, f.type, f.bytes);
      loseLink(l);
      return;
    }
    LinkHeader h;
    std::memcpy(&h, link.in.data() + used, sizeof(h));
    const char* body = link.in.data() + used + sizeof(h);
    if (h.type == kLinkClosed) closeRank(h.rank);
    else if (h.type == kLinkFromRank) {
      std::vector<char> one(body, body + h.bytes);
      parse(h.rank, one);
    }
    used += sizeof(h) + h.bytes;
  }
  link.in.erase(link.in.begin(), link.in.begin() + used);
}

void RootServer::loseLink(int l) {
  Link& link = links_[l];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    link.fd.reset();
  }
  HOCCL_WARN(kBootstrap, "bootstrap head root: the root of id {} (pid {}, ranks {}..{}) closed its link", link.idIndex,
             link.pid, link.share.lo, link.share.hi - 1);
  for (int r = link.share.lo; r < link.share.hi; ++r) {
    if (ranks_[r].info.pid == link.pid) closeRank(r);
    ranks_[r].via = -1;
  }
}

bool RootServer::linkToHead() {
  const std::optional<UniqueId> head = headIdOf(id_.nonce);
  std::string problem;
  if (!head)
    problem = fmt::format(
        "the bootstrap root of id {} (at {}) does not know the head root (id 0): rank {}, the first rank of its "
        "share, must create id {} itself (hocclGetUniqueId in its own process) and pass it to "
        "hocclCommInitRankScalable",
        idIndex_, id_.root.toString(), share_.lo, idIndex_);
  try {
    if (!head) throwInvalidUsage(problem);
    const net::Deadline deadline = net::defaultDeadline();
    const std::string what = fmt::format("the bootstrap root of id {} linking to the head root at {}", idIndex_,
                                         head->root.toString());
    head_ = connectAuthenticated([&] { return net::connectUntil(head->root, deadline, what); }, head->secret,
                                 Hello{head->nonce, idIndex_, -1, kRootLinkIndex}, deadline, what,
                                 "pass every rank the same ids, in the same order");
    ShareWire sw{nranks(), idIndex_, share_.lo, share_.hi, static_cast<int32_t>(pid_), 0};
    std::vector<char> payload(reinterpret_cast<const char*>(&sw), reinterpret_cast<const char*>(&sw) + sizeof(sw));
    for (int r = share_.lo; r < share_.hi; ++r) {
      JoinMessage j{nranks(), r, share_.lo, share_.hi, idIndex_, nIds_, ranks_[r].listener};
      payload.insert(payload.end(), reinterpret_cast<const char*>(&j), reinterpret_cast<const char*>(&j) + sizeof(j));
      const char* info = reinterpret_cast<const char*>(&ranks_[r].info);
      payload.insert(payload.end(), info, info + sizeof(RankInfo));
    }
    std::vector<char> m = frame(LinkHeader{kLinkShare, -1, payload.size()}, payload.data(), payload.size());
    net::writeAll(head_.get(), m.data(), m.size(), deadline, what);
    return true;
  } catch (const Error& e) {
    HOCCL_WARN(kBootstrap, "bootstrap root of id {}: {}", idIndex_, e.what());
    broadcastError(e.what());
    return false;
  }
}

void RootServer::tellHeadLost() {
  const std::optional<UniqueId> head = headIdOf(id_.nonce);
  if (!head) return;  // again at the next look
  headTold_ = true;
  const std::string what = fmt::format(
      "the bootstrap root of id {} telling the head root at {} that its share lost "
      "rank {}",
      idIndex_, head->root.toString(), verdictCulprit_);
  try {
    const net::Deadline deadline = Clock::now() + std::chrono::seconds(10);
    net::Fd fd = connectAuthenticated([&] { return net::connectUntil(head->root, deadline, what); }, head->secret,
                                      Hello{head->nonce, idIndex_, -1, kRootLinkIndex}, deadline, what,
                                      "pass every rank the same ids, in the same order");
    ShareWire sw{nranks(), idIndex_, share_.lo, share_.hi, static_cast<int32_t>(pid_), 0};
    const std::string text(verdict_.begin() + sizeof(VerdictWire), verdict_.end());
    std::vector<char> payload(sizeof(sw) + sizeof(RankInfo));
    std::memcpy(payload.data(), &sw, sizeof(sw));
    std::memcpy(payload.data() + sizeof(sw), &ranks_[verdictCulprit_].info, sizeof(RankInfo));
    payload.insert(payload.end(), text.begin(), text.begin() + std::min<size_t>(text.size(), kMaxReportBytes));
    std::vector<char> m = frame(LinkHeader{kLinkLost, verdictCulprit_, payload.size()}, payload.data(), payload.size());
    net::writeAll(fd.get(), m.data(), m.size(), deadline, what);
    std::lock_guard<std::mutex> lock(mutex_);
    head_ = std::move(fd);  // kept open while this root runs: the head reads it in its own time
  } catch (const Error& e) {
    HOCCL_WARN(kBootstrap, "{} failed: {}; the ranks of the other ids wait until HOCCL_TIMEOUT", what, e.what());
  }
}

void RootServer::relay() {
  std::vector<pollfd> pfds;
  std::vector<int> owner;  // rank, or -1 for the head
  std::vector<char> fromHead;
  char chunk[64 << 10];
  while (true) {
    pfds.assign(1, pollfd{head_.get(), POLLIN, 0});
    owner.assign(1, -1);
    for (int r = share_.lo; r < share_.hi; ++r)
      if (ranks_[r].fd) {
        pfds.push_back({ranks_[r].fd.get(), POLLIN, 0});
        owner.push_back(r);
      }
    if (pfds.size() == 1) return;
    int rc = ::poll(pfds.data(), pfds.size(), 1000);
    parkIfExiting();
    if (rc < 0 && errno != EINTR) throwSystemError("poll in a bootstrap sub-root failed", errno);
    for (size_t i = 1; rc > 0 && i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      const int r = owner[i];
      Rank& rk = ranks_[r];
      ssize_t got = ::recv(rk.fd.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      bool closed = got <= 0;
      if (!closed) {
        rk.in.insert(rk.in.end(), chunk, chunk + got);
        size_t used = 0;
        while (true) {
          const Frame f = nextRankMessage(rk.in.data() + used, rk.in.size() - used);
          if (f.status == Frame::Partial) break;
          if (f.status == Frame::Malformed) {
            closed = true;
            break;
          }
          const size_t len = sizeof(RankHeader) + f.bytes;
          toHead(LinkHeader{kLinkFromRank, r, len}, rk.in.data() + used, len);
          used += len;
        }
        rk.in.erase(rk.in.begin(), rk.in.begin() + used);
      }
      if (closed) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          rk.fd.reset();
        }
        toHead(LinkHeader{kLinkClosed, r, 0}, nullptr, 0);
      }
    }
    if (rc > 0 && pfds[0].revents) {
      ssize_t got = ::recv(head_.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got <= 0) {
        HOCCL_WARN(kBootstrap,
                   "bootstrap root of id {}: the head root's connection closed; its ranks {}..{} can no "
                   "longer share failures",
                   idIndex_, share_.lo, share_.hi - 1);
        return;
      }
      fromHead.insert(fromHead.end(), chunk, chunk + got);
      size_t used = 0;
      while (true) {
        const Frame f = nextLinkMessage(fromHead.data() + used, fromHead.size() - used, -1, -1);
        if (f.status == Frame::Partial) break;
        if (f.status == Frame::Malformed) throwInternalError("the head root sent a message larger than any it sends");
        LinkHeader h;
        std::memcpy(&h, fromHead.data() + used, sizeof(h));
        if (h.type == kLinkToRank && h.rank >= share_.lo && h.rank < share_.hi && ranks_[h.rank].fd) {
          std::lock_guard<std::mutex> lock(mutex_);
          try {
            net::writeAll(ranks_[h.rank].fd.get(), fromHead.data() + used + sizeof(h), h.bytes,
                          Clock::now() + std::chrono::seconds(2), "bootstrap sub-root relay");
          } catch (const Error&) {  // the rank is gone: its close comes through poll
          }
        }
        used += sizeof(h) + h.bytes;
      }
      fromHead.erase(fromHead.begin(), fromHead.begin() + used);
    }
  }
}

void RootServer::toHead(const LinkHeader& h, const void* data, size_t bytes) {
  std::vector<char> m = frame(h, data, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    if (head_) net::writeAll(head_.get(), m.data(), m.size(), Clock::now() + std::chrono::seconds(5), "relay");
  } catch (const Error& e) {
    HOCCL_WARN(kBootstrap, "bootstrap root of id {}: relaying to the head root failed: {}", idIndex_, e.what());
    head_.reset();
  }
}

}  // namespace hoccl::boot::server

namespace hoccl::boot {

void handHeadId(const UniqueId& sub, const UniqueId& head) {
  std::lock_guard<std::mutex> lock(server::registry().mutex);
  server::registry().headIds[sub.nonce] = head;
}

}  // namespace hoccl::boot
