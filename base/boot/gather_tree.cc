/*
 * The all-gather of the bootstrap over the gather tree (tree_shape.h): no root, no relay through one thread.
 *
 * Links: every rank listens (its address reaches the others through the root, in the plan); once the plan arrives it
 * connects to its parent and accepts its children, every link authenticated with the job secret (handshake.h), so
 * a rank holds 1 + fanout links whatever the size of the job. The links stay for the communicator's lifetime.
 *
 * One exchange (exchange number `seq`, slots of `bytes`, the same on every rank):
 *   up    receive from each child the block of its subtree's slots (a subtree is a contiguous range of ranks), then
 *         send the block of this rank's subtree (its own slot and its children's blocks) to the parent;
 *   down  receive every slot from the parent (rank 0 has them all after the up phase), then send them to each child.
 * That is 2 x depth sequential hops, about 2 log_fanout(n); each rank wakes a few times per exchange, and the bytes
 * are sent by every inner rank instead of by one root thread. Every wait is a poll() on the link and on the
 * bootstrap's alert eventfd (readable once the root's verdict is known), never a spin: on an oversubscribed host
 * the waiting ranks leave the CPUs to the ones that run.
 *
 * Failures, during an exchange only (between exchanges nobody reads the links; the root connection watches):
 *   - a link closes without a message: the neighbour exited or was killed: Blame, naming it;
 *   - nothing before the deadline: Blame (the root's ping finds out whether the neighbour is stopped or waits itself);
 *   - kTreeBye: the neighbour destroyed its communicator while this rank waited: Local (mismatched calls: this call
 *     fails, the communicator does not);
 *   - a header of another exchange or another size: the ranks called different operations: Local;
 *   - kTreeGaveUp: the neighbour failed, its text follows: Follow when its failure went to the root (wait for the
 *     verdict), else Local;
 *   - the alert: Verdict.
 * The caller (bootstrap.cc) reports a Blame to the root, whose verdict names one culprit on every rank, and sends
 * kTreeGaveUp to its own neighbours when it leaves, so that the ranks around a failure do not blame each other.
 */
#include "base/boot/gather_tree.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/boot/handshake.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {
namespace {

using Clock = net::Clock;

// Waits until fd is ready for `events`: 1 ready (or closed), 0 the deadline passed, -1 the alert fired.
int waitFor(int fd, short events, int alertFd, net::Deadline deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p[2] = {{fd, events, 0}, {alertFd, POLLIN, 0}};
    const int rc = ::poll(p, alertFd >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (rc < 0 && errno != EINTR) return 0;
    if (rc <= 0) continue;
    if (alertFd >= 0 && p[1].revents) return -1;
    if (p[0].revents) return 1;
  }
}

// True once the alert eventfd is readable (never consumed: a verdict stays known).
bool alerted(int alertFd) {
  pollfd p{alertFd, POLLIN, 0};
  return alertFd >= 0 && ::poll(&p, 1, 0) == 1;
}

TreeOutcome blame(int code, std::string text) { return TreeOutcome{TreeOutcome::Blame, code, std::move(text)}; }

}  // namespace

GatherTree::GatherTree(int rank, int nranks, int fanout, std::string who)
    : rank_(rank), nranks_(nranks), who_(std::move(who)), place_(treePlace(nranks, rank, fanout)) {}

GatherTree::~GatherTree() { leave(std::string()); }

TreeOutcome GatherTree::link(int listenFd, const net::Address& parentAddr, const net::Secret& secret, uint64_t tag,
                             const std::vector<RankInfo>& known, net::Deadline deadline, int alertFd) {
  auto nameOf = [&](int r) {
    for (const RankInfo& info : known)
      if (info.rank == r) return describeRank(info);
    return fmt::format("rank {} (host ?, pid 0)", r);
  };
  if (place_.parent >= 0) {
    parent_.rank = place_.parent;
    parent_.name = nameOf(place_.parent);
    const std::string what = fmt::format("{}: linking to its parent {} in the bootstrap tree at {}", who_, parent_.name,
                                         parentAddr.toString());
    // Connection attempts in short slices, so that the root's verdict (the parent dropped out of init: its
    // listener refuses) ends the wait instead of HOCCL_TIMEOUT.
    auto open = [&] {
      while (true) {
        const net::Deadline slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
        try {
          return net::connectUntil(parentAddr, slice, what);
        } catch (const Error& e) {
          if (e.code() != hocclTimeout || slice >= deadline || alerted(alertFd)) throw;
        }
      }
    };
    try {
      parent_.fd = connectAuthenticated(open, secret, Hello{tag, rank_, place_.parent, kTreeLinkIndex}, deadline, what,
                                        "every rank of a communicator must hold the same job secret (the same "
                                        "unique id)");
    } catch (const Error& e) {
      parent_.fd.reset();
      if (alerted(alertFd)) return {TreeOutcome::Verdict, 0, ""};
      return blame(e.code(), fmt::format("{} failed: {}", what, e.what()));
    }
    net::setNoDelay(parent_.fd.get());
  }
  children_.clear();
  for (const RankRange& c : place_.children) children_.push_back(Link{c.lo, nameOf(c.lo), net::Fd()});
  if (children_.empty()) return {};
  Acceptor acceptor(listenFd, secret, rank_, fmt::format("{}'s bootstrap tree listener", who_));
  size_t linked = 0;
  while (linked < children_.size()) {
    // Short slices, so that the root's verdict (a child that died before linking) ends the wait.
    const net::Deadline slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
    std::optional<Acceptor::Peer> peer = acceptor.next(slice);
    if (alerted(alertFd)) return {TreeOutcome::Verdict, 0, ""};
    if (!peer) {
      if (Clock::now() < deadline) continue;
      std::string missing;
      for (const Link& l : children_)
        if (!l.fd) missing += (missing.empty() ? "" : ", ") + l.name;
      return blame(hocclTimeout, fmt::format("{}: its children {} in the bootstrap tree did not link to it within "
                                             "HOCCL_TIMEOUT (stuck or stopped before init?)",
                                             who_, missing));
    }
    auto it = std::find_if(children_.begin(), children_.end(),
                           [&](const Link& l) { return l.rank == peer->hello.rank; });
    if (peer->hello.tag != tag || peer->hello.index != kTreeLinkIndex || it == children_.end() || it->fd) {
      noteRejected(fmt::format("{}'s bootstrap tree listener", who_), peer->from,
                   fmt::format("rank {} (tag {:#x}, index {}) is not an unlinked child of this rank in communicator "
                               "{:#x}",
                               peer->hello.rank, peer->hello.tag, peer->hello.index, tag));
      continue;
    }
    it->fd = std::move(peer->fd);
    net::setNoDelay(it->fd.get());
    ++linked;
  }
  return {};
}

TreeOutcome GatherTree::receive(Link& from, uint32_t seq, char* into, size_t bytes, net::Deadline deadline,
                                int alertFd) {
  const std::string during = fmt::format(
      "while {} waited for it in bootstrap exchange #{} (init, hocclCommSplit or hocclCommFinalize)", who_, seq);
  auto readExact = [&](void* dst, size_t n, TreeOutcome* out) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::recv(from.fd.get(), p, n, MSG_DONTWAIT);
      if (got > 0) {
        p += got;
        n -= static_cast<size_t>(got);
        continue;
      }
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        const int w = waitFor(from.fd.get(), POLLIN, alertFd, deadline);
        if (w == 1) continue;
        if (w < 0) *out = TreeOutcome{TreeOutcome::Verdict, 0, ""};
        else
          *out = blame(hocclTimeout, fmt::format("no word from {} within HOCCL_TIMEOUT {} (it is stuck, stopped or "
                                                 "calling a different operation; raise HOCCL_TIMEOUT if it is only "
                                                 "slow)",
                                                 from.name, during));
        return false;
      }
      *out = blame(hocclRemoteError,
                   fmt::format("{} exited or was killed: its bootstrap link closed without a goodbye {} ({})",
                               from.name, during, got == 0 ? "end of stream" : std::strerror(errno)));
      return false;
    }
    return true;
  };
  TreeOutcome out;
  TreeHeader h{};
  if (!readExact(&h, sizeof(h), &out)) return out;
  const TreeStep step = treeStep(h, seq, bytes);
  if (step.kind == TreeStep::Bye)
    return TreeOutcome{TreeOutcome::Local, hocclRemoteError,
                       fmt::format("{} destroyed its communicator {}: the ranks did not call the same "
                                   "sequence of operations (hocclCommSplit / hocclCommFinalize on some "
                                   "ranks only?)",
                                   from.name, during)};
  if (step.kind == TreeStep::GaveUp) {
    std::string text(step.read, '\0');
    if (!text.empty() && !readExact(text.data(), text.size(), &out)) return out;
    // seq 1: its failure was reported, the root's verdict follows; 0: an error of this call only.
    return TreeOutcome{h.seq == 1 ? TreeOutcome::Follow : TreeOutcome::Local, hocclRemoteError,
                       fmt::format("{} gave up on this exchange: {}", from.name, text)};
  }
  if (step.kind == TreeStep::Mismatch)
    return TreeOutcome{
        TreeOutcome::Local, hocclInvalidUsage,
        fmt::format("{} sent bootstrap exchange #{} of {} bytes (type {}) {}, which expected {} bytes: the "
                    "ranks called different operations (a mismatched hocclCommSplit or init?)",
                    from.name, h.seq, h.bytes, h.type, during, bytes)};
  if (!readExact(into, bytes, &out)) return out;
  return {};
}

TreeOutcome GatherTree::send(Link& to, uint32_t seq, const char* data, size_t bytes, net::Deadline deadline,
                             int alertFd) {
  TreeHeader h{kTreeData, seq, bytes};
  const char* parts[2] = {reinterpret_cast<const char*>(&h), data};
  size_t sizes[2] = {sizeof(h), bytes};
  for (int i = 0; i < 2; ++i) {
    const char* p = parts[i];
    size_t n = sizes[i];
    while (n > 0) {
      const ssize_t put = ::send(to.fd.get(), p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (put > 0) {
        p += put;
        n -= static_cast<size_t>(put);
        continue;
      }
      if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        const int w = waitFor(to.fd.get(), POLLOUT, alertFd, deadline);
        if (w == 1) continue;
        if (w < 0) return {TreeOutcome::Verdict, 0, ""};
        return blame(hocclTimeout,
                     fmt::format("{} took no data from {} within HOCCL_TIMEOUT in bootstrap exchange #{} (it is "
                                 "stuck or stopped)",
                                 to.name, who_, seq));
      }
      return blame(hocclRemoteError,
                   fmt::format("{} closed its bootstrap link while {} sent it bootstrap exchange #{} ({}): it exited "
                               "or was killed",
                               to.name, who_, seq, std::strerror(errno)));
    }
  }
  return {};
}

TreeOutcome GatherTree::allGather(char* slots, size_t bytes, net::Deadline deadline, int alertFd) {
  if (left_)
    return TreeOutcome{TreeOutcome::Local, hocclInvalidUsage,
                       who_ +
                           ": an earlier bootstrap exchange of this communicator failed, so it can no longer "
                           "exchange: destroy it (or abort it) and create a new one"};
  const uint32_t seq = ++seq_;
  const size_t all = bytes * static_cast<size_t>(nranks_);
  for (size_t i = 0; i < children_.size(); ++i) {
    const RankRange& c = place_.children[i];
    TreeOutcome o = receive(children_[i], seq, slots + bytes * c.lo, bytes * c.size(), deadline, alertFd);
    if (o.kind != TreeOutcome::Ok) return o;
  }
  if (parent_.fd) {
    TreeOutcome o = send(parent_, seq, slots + bytes * place_.range.lo, bytes * place_.range.size(), deadline, alertFd);
    if (o.kind == TreeOutcome::Ok) o = receive(parent_, seq, slots, all, deadline, alertFd);
    if (o.kind != TreeOutcome::Ok) return o;
  }
  for (Link& c : children_) {
    TreeOutcome o = send(c, seq, slots, all, deadline, alertFd);
    if (o.kind != TreeOutcome::Ok) return o;
  }
  return {};
}

void GatherTree::drop() {
  left_ = true;
  parent_.fd.reset();
  for (Link& c : children_) c.fd.reset();
}

void GatherTree::leave(const std::string& failure, bool reported) {
  if (left_) return;
  left_ = true;
  const std::string text = failure.substr(0, kMaxReportBytes);
  TreeHeader h{failure.empty() ? kTreeBye : kTreeGaveUp, reported ? 1u : 0u, text.size()};
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  msg += text;
  auto tell = [&](Link& l) {
    if (!l.fd) return;
    // Best effort and never blocking: a neighbour that is gone or does not read has no use for it.
    (void)::send(l.fd.get(), msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    l.fd.reset();
  };
  tell(parent_);
  for (Link& c : children_) tell(c);
}

}  // namespace hoccl::boot
