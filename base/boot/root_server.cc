/*
 * The bootstrap root (see root_server.h): one detached thread per communicator; it owns its sockets and ends by
 * itself when every rank has disconnected or the job never assembled.
 *
 * Protocol (messages in wire.h; every message after the join is a header and `bytes` of payload):
 *   join      rank -> root  the handshake (handshake.h: both sides prove the job secret), JoinMessage (with the
 *                           address where the rank listens for its children in the gather tree), RankInfo
 *             root -> rank  kRootInfo (the root's pid and host), then kRootPlan: the rank's parent in the gather
 *                           tree, where it listens, and the RankInfo of its parent and children; or kRootError (a bad
 *                           size, a duplicate rank), kRootTimeout (ranks missing at HOCCL_TIMEOUT)
 *   exchanges               none: all-gathers and barriers go over the gather tree between the ranks (gather_tree.cc);
 *                           the root only sends each rank its plan (a few hundred bytes), never the rank table
 *   failures  rank -> root  kRankReport: a failure this rank detected; the text names its suspects as
 *                           "rank N (host H, pid P)" (describeRank)
 *             rank -> root  kRankAbort: this rank called hocclCommAbort
 *             root -> rank  kRootPing, answered by the rank's watcher thread with kRankPong: is it running?
 *             root -> rank  kRootVerdict: the culprit, once per communicator, to every connected rank
 *   ready     rank -> root  kRankReady: its init is complete (tree linked, rank table held)
 *   leaving   rank -> root  kRankGoodbye, then close: a normal end (hocclCommDestroy); never blamed
 *             root -> rank  kRootClosing: the root's process exits normally (sent from an atexit handler)
 *
 * Several roots (hocclCommInitRankScalable with nIds ids): rank r joins the root of id floor(r * nIds / nranks), so
 * each root meets only its share of the ranks. The root of id 0 is the head; every other root is a sub-root: once
 * its share has joined it links to the head (authenticated with id 0's secret, which the first rank of its share,
 * in the sub-root's own process, hands it: handHeadId), sends the share's joins (kLinkShare), and from then on only
 * relays: every message of its ranks goes to the head (kLinkFromRank, kLinkClosed), every message of the head to
 * its rank (kLinkToRank). The head sees relayed ranks as if they were connected to it, so plans, pings and verdicts
 * are decided in one place for the whole communicator.
 *
 * The root reads every connection all the time (poll on all of them, whole messages parsed out of what arrived, so
 * a stopped rank never blocks it) and keeps one state per rank: live, leaving (said goodbye), gone (closed after a
 * goodbye) or lost (closed without one: killed, crashed, or exited without destroying its communicator).
 *
 * A rank whose connection closes before its kRankReady (with or without a goodbye) fails the job at once, during
 * the join as well as while the ranks link the tree: the others wait for it in init (its children connect to its
 * listener, its parent waits for it to link), so the root sends every rank a verdict naming it (rule 0 below) and
 * answers the ranks that join later with the same verdict. A sub-root that loses a rank before its share is complete
 * tells its own ranks and the head root (kLinkLost instead of kLinkShare), which tells the others.
 *
 * After its kRankReady, a lost rank alone is no failure: a rank may exit (even with _exit) once its part is done while others still finish
 * theirs, and that looks the same as a kill. It becomes the culprit as soon as somebody needs it:
 * a report that names it (a gather-tree neighbour waiting for it in a bootstrap exchange, or a peer of its data path).
 * The ranks that wait on it directly see it within ~0.1 s (a closed link; shm watches the pid, tcp sees the close);
 * their reports reach the root, and the root's verdict then releases every other rank, including those that only
 * wait on survivors.
 *
 * The verdict, once per communicator, picked from the reports received (in order) and the connection states:
 *   0. a rank whose connection closed before its init was complete and that reported nothing itself;
 *   1. an abort: the rank that aborted;
 *   2. a suspect whose connection closed without a goodbye: it died;
 *   3. a suspect that had said goodbye: it left while others still waited for it (mismatched calls);
 *   4. a rank that does not answer a ping within kPingWait (the first report that settles nothing pings every
 *      rank): its process is not running (SIGSTOP, a debugger, frozen). This finds a stopped rank although its
 *      survivors time out in any order, each naming only the neighbour it waits for;
 *   5. once every connected rank has reported or been named, or after kSettle: the suspect that others wait for but
 *      that reported nothing itself (a silent rank stalls a chain: rank 0 waits for 2, 2 waits for the silent 1;
 *      the sink of that graph is the culprit);
 *   6. a report naming nobody: its reporter.
 * Reports and closes that arrive together are all applied before deciding, so that a report blaming a rank that
 * exited after reporting itself does not win over that rank's own, earlier report.
 */
#include "base/boot/root_server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/handshake.h"
#include "base/boot/tree_shape.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {
namespace {

using Clock = net::Clock;
// How long reports of a failure whose suspects are all still connected are collected before the verdict.
constexpr auto kSettle = std::chrono::milliseconds(600);
// How long a running rank may take to answer a ping.
constexpr auto kPingWait = std::chrono::milliseconds(300);
// Children per rank in the gather tree (tree_shape.h): depth log4(n), 1 + 4 links per rank.
constexpr int kTreeFanout = 4;
// How often the root looks at the connections of the ranks that joined while it waits for the others.
constexpr auto kJoinedWatch = std::chrono::milliseconds(100);

class RootServer;

// Live root servers of this process, told at exit that their process is ending normally; and the head ids that
// ranks of this process handed to the sub-roots this process serves (handHeadId), by the sub-root's nonce.
struct Registry {
  std::mutex mutex;
  std::vector<RootServer*> servers;
  std::vector<uint64_t> serving;         // nonces of the roots started here and still running
  std::map<uint64_t, UniqueId> headIds;  // sub-root nonce -> the head root's id
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: used from an atexit handler
  return *r;
}

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

AddressWire toWire(const net::Address& a) {
  AddressWire w{};
  w.length = std::min<uint32_t>(a.length, sizeof(w.bytes));
  std::memcpy(w.bytes, &a.storage, w.length);
  return w;
}

// One message (a header of type H and a payload) in one buffer.
template <class H>
std::vector<char> frame(const H& h, const void* data, size_t bytes) {
  std::vector<char> buf(sizeof(H) + bytes);
  std::memcpy(buf.data(), &h, sizeof(h));
  if (bytes) std::memcpy(buf.data() + sizeof(h), data, bytes);
  return buf;
}

class RootServer {
 public:
  RootServer(net::Fd listener, const UniqueId& id) : listener_(std::move(listener)), id_(id), pid_(::getpid()) {}

  void run() {
    try {
      const bool assembled = assemble();
      releaseThreadCryptoState();  // the handshakes are over; this thread may still run when the process exits
      if (assembled) {
        enroll();
        if (idIndex_ > 0) {
          const bool linked = linkToHead();
          releaseThreadCryptoState();  // linking to the head was a handshake too
          if (linked) relay();
        } else {
          sendPlans();
          serve();
        }
      }
    } catch (const std::exception& e) {
      HOCCL_WARN(kBootstrap, "bootstrap root at {} stopped: {}", id_.root.toString(), e.what());
      broadcastError(std::string("the bootstrap root failed: ") + e.what());
    }
    releaseThreadCryptoState();  // also when assemble() threw half-way through a handshake
    withdraw();
  }

  // From the atexit handler: tells every connected rank that this process ends normally.
  void announceClosing() {
    if (::getpid() != pid_) return;  // a forked child's copy of a parent's root
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // the root is writing: never block an exiting process
    const RootHeader h{kRootClosing, -1, 0};
    const auto until = Clock::now() + std::chrono::milliseconds(100);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      try {
        if (ranks_[r].fd) net::writeAll(ranks_[r].fd.get(), &h, sizeof(h), until, "root closing");
        else if (ranks_[r].via >= 0 && links_[ranks_[r].via].fd) {
          std::vector<char> m = frame(LinkHeader{kLinkToRank, static_cast<int32_t>(r), sizeof(h)}, &h, sizeof(h));
          net::writeAll(links_[ranks_[r].via].fd.get(), m.data(), m.size(), until, "root closing");
        }
      } catch (const Error&) {
      }
    }
  }

 private:
  enum class State { Live, Leaving, Gone, Lost };
  struct Rank {
    net::Fd fd;            // direct connection (-1: not joined, relayed, or closed)
    int via = -1;          // the sub-root link that relays it (head root only; -1: direct or absent)
    bool present = false;  // joined (directly or through a link)
    RankInfo info;
    AddressWire listener{};  // where it accepts its gather-tree children
    State state = State::Live;
    bool answered = false;  // to the last ping (or reported: it runs)
    bool ready = false;     // sent kRankReady: its init is complete
    bool reported = false;  // sent a kRankReport (its own account of a failure)
    std::vector<char> in;   // bytes received, not yet a whole message
  };
  struct Link {  // a sub-root linked to this head root
    net::Fd fd;
    int idIndex = 0;
    int pid = 0;
    RankRange share;
    std::vector<char> in;
  };
  struct Report {
    int reporter;
    std::string text;
    std::vector<int> suspects;
  };

  void enroll() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().servers.push_back(this);
  }

  void withdraw() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto& s = registry().servers;
    s.erase(std::remove(s.begin(), s.end(), this), s.end());
    auto& n = registry().serving;
    n.erase(std::remove(n.begin(), n.end(), id_.nonce), n.end());
    registry().headIds.erase(id_.nonce);
  }

  int nranks() const { return static_cast<int>(ranks_.size()); }
  std::string who(int r) const { return describeRank(ranks_[r].info); }
  // The ranks this root waits for: its share (a sub-root) or all (the head).
  RankRange domain() const { return idIndex_ > 0 ? share_ : RankRange{0, nranks()}; }
  bool complete() const {
    if (ranks_.empty()) return false;
    for (int r = domain().lo; r < domain().hi; ++r)
      if (!ranks_[r].present) return false;
    return true;
  }

  // What a join says about the communicator, checked against the first join: "" when it agrees.
  std::string configure(const JoinMessage& j) {
    if (!configured_) {
      if (j.nranks < 1 || j.nranks > kMaxRanks || j.nIds < 1 || j.idIndex < 0 || j.idIndex >= j.nIds || j.shareLo < 0 ||
          j.shareHi > j.nranks || j.shareLo >= j.shareHi)
        return fmt::format("rank {} joined with nranks {}, id {} of {}, share {}..{}, which do not fit together",
                           j.rank, j.nranks, j.idIndex, j.nIds, j.shareLo, j.shareHi - 1);
      if (!ranks_.empty() && j.nranks != nranks())  // a sub-root's link came first
        return fmt::format("rank {} says the communicator has {} ranks but a linked root said {}", j.rank, j.nranks,
                           nranks());
      configured_ = true;
      ranks_.resize(j.nranks);
      nIds_ = j.nIds;
      idIndex_ = j.idIndex;
      share_ = {j.shareLo, j.shareHi};
      return "";
    }
    if (j.nranks != nranks())
      return fmt::format("rank {} says the communicator has {} ranks but rank(s) before it said {}", j.rank, j.nranks,
                         nranks());
    if (j.nIds != nIds_ || j.idIndex != idIndex_ || j.shareLo != share_.lo || j.shareHi != share_.hi)
      return fmt::format(
          "rank {} joined as id {} of {} (ranks {}..{}) but rank(s) before it as id {} of {} (ranks "
          "{}..{}): every rank must pass hocclCommInitRankScalable the same ids in the same order",
          j.rank, j.idIndex, j.nIds, j.shareLo, j.shareHi - 1, idIndex_, nIds_, share_.lo, share_.hi - 1);
    return "";
  }

  // Accepts the ranks of this root's share, each authenticated (handshake.h: all connections at once, each with its
  // own short deadline, so strangers and idle sockets cannot delay the job); the head root also accepts the links of
  // the sub-roots, each bringing its share. A sub-root then tells its ranks who it is.
  bool assemble() {
    net::Deadline deadline = net::defaultDeadline();
    Acceptor acceptor(listener_.get(), id_.secret, -1, "the bootstrap root at " + id_.root.toString());
    Clock::time_point watched{};
    while (!complete()) {
      // Short slices: a rank that joined and then dropped out is found within a fraction of a second.
      std::optional<Acceptor::Peer> peer = acceptor.next(std::min(deadline, Clock::now() + kJoinedWatch));
      if (!peer || Clock::now() - watched >= kJoinedWatch) {
        watchJoined();
        watched = Clock::now();
      }
      if (!peer) {
        if (Clock::now() < deadline) continue;
        if (!verdictSent_) reportMissing();
        return false;
      }
      if (peer->hello.index == kRootLinkIndex) {
        acceptLink(std::move(*peer), deadline);
        continue;
      }
      net::Fd fd = std::move(peer->fd);
      if (peer->hello.tag != id_.nonce) {
        std::string problem = fmt::format(
            "rank {} holds this job's secret but joins another communicator (tag {:#x}; this root at {} serves "
            "{:#x}): pass every rank the unique id of the same hocclGetUniqueId call",
            peer->hello.rank, peer->hello.tag, id_.root.toString(), id_.nonce);
        HOCCL_WARN(kBootstrap, "bootstrap root: {}", problem);
        sendError(fd.get(), peer->hello.rank, problem);
        continue;
      }
      JoinMessage join{};
      RankInfo info;
      try {  // an authenticated rank sends its join right after its proof
        net::Deadline joinBy = std::min(deadline, Clock::now() + kProofWait);
        net::readAll(fd.get(), &join, sizeof(join), joinBy, "bootstrap join");
        net::readAll(fd.get(), &info, sizeof(info), joinBy, "bootstrap join");
      } catch (const Error& e) {
        HOCCL_WARN(kBootstrap, "bootstrap root: rank {} at {} proved the secret but sent no join: {}", peer->hello.rank,
                   peer->from, e.what());
        continue;
      }
      std::string problem;
      if (join.rank != peer->hello.rank)
        problem = fmt::format("rank {} joined with a handshake made for rank {}", join.rank, peer->hello.rank);
      else problem = configure(join);
      if (problem.empty() && (join.rank < share_.lo || join.rank >= share_.hi))
        problem = fmt::format("rank {} is outside {}..{}, the ranks of this root (id {} of {})", join.rank, share_.lo,
                              share_.hi - 1, idIndex_, nIds_);
      else if (problem.empty() && ranks_[join.rank].present)
        problem = fmt::format("two processes both claim rank {} (check HOCCL_RANK / the launcher)", join.rank);
      if (!problem.empty()) {
        HOCCL_WARN(kBootstrap, "bootstrap root: {}", problem);
        sendError(fd.get(), join.rank, problem);
        continue;
      }
      info.rank = join.rank;
      Rank& rk = ranks_[join.rank];
      rk.fd = std::move(fd);
      rk.info = info;
      rk.listener = join.listener;
      rk.present = true;
      if (verdictSent_) sendVerdictTo(join.rank);  // the job already failed: tell it at once
    }
    if (verdictSent_) return false;
    if (idIndex_ > 0) {
      RootInfoWire me = myInfo();
      for (int r = share_.lo; r < share_.hi; ++r) send(r, kRootInfo, -1, &me, sizeof(me), deadline);
    }
    return true;
  }

  // While the root waits for the other ranks: reads the connections of those that joined (they send nothing before
  // their plan, so anything readable is a close or an error), fails the job when one dropped out (decide(), rule 0)
  // and, on a sub-root, tells the head root.
  void watchJoined() {
    std::vector<pollfd> pfds;
    std::vector<int> owner;
    for (int r = 0; r < nranks(); ++r)
      if (ranks_[r].fd) {
        pfds.push_back({ranks_[r].fd.get(), POLLIN, 0});
        owner.push_back(r);
      }
    if (!pfds.empty() && ::poll(pfds.data(), pfds.size(), 0) > 0)
      for (size_t i = 0; i < pfds.size(); ++i)
        if (pfds[i].revents) readFrom(owner[i]);
    decide();
    if (idIndex_ > 0 && verdictSent_ && !headTold_) tellHeadLost();
  }

  RootInfoWire myInfo() const {
    RootInfoWire me{};
    me.pid = static_cast<int32_t>(pid_);
    ::gethostname(me.hostname, sizeof(me.hostname) - 1);
    return me;
  }

  // The head root: a sub-root's link and the joins of its share.
  void acceptLink(Acceptor::Peer peer, net::Deadline deadline) {
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
      std::vector<std::pair<JoinMessage, RankInfo>> joins(sw.shareHi - sw.shareLo);
      for (auto& [j, info] : joins) {
        net::readAll(peer.fd.get(), &j, sizeof(j), by, "bootstrap link");
        net::readAll(peer.fd.get(), &info, sizeof(info), by, "bootstrap link");
        if (j.rank < sw.shareLo || j.rank >= sw.shareHi || ranks_[j.rank].present)
          throwInvalidUsage(fmt::format("{} relays rank {}, outside its share {}..{} or already joined", from, j.rank,
                                        sw.shareLo, sw.shareHi - 1));
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

  // The head root: a sub-root lost rank h.rank of its share before the share was complete (kLinkLost). The job
  // cannot be created: every rank this root serves gets the sub-root's verdict, and the share counts as present (its
  // sub-root answers its ranks), so that this root stops waiting for it.
  void acceptLoss(int fd, const LinkHeader& h, const ShareWire& sw, net::Deadline by, const std::string& from) {
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

  // A sub-root whose share lost a rank before it was complete: tells the head root (kLinkLost with the verdict this
  // sub-root sent its own ranks), so that the ranks of the other shares stop too. Waits until the first rank of the
  // share has handed over the head's id (handHeadId).
  void tellHeadLost() {
    std::optional<UniqueId> head;
    {
      std::lock_guard<std::mutex> lock(registry().mutex);
      auto it = registry().headIds.find(id_.nonce);
      if (it != registry().headIds.end()) head = it->second;
    }
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
      std::vector<char> m = frame(LinkHeader{kLinkLost, verdictCulprit_, payload.size()}, payload.data(),
                                  payload.size());
      net::writeAll(fd.get(), m.data(), m.size(), deadline, what);
      std::lock_guard<std::mutex> lock(mutex_);
      head_ = std::move(fd);  // kept open while this root runs: the head reads it in its own time
    } catch (const Error& e) {
      HOCCL_WARN(kBootstrap, "{} failed: {}; the ranks of the other ids wait until HOCCL_TIMEOUT", what, e.what());
    }
  }

  // The head root: every rank's place in the gather tree, and its neighbours' names.
  void sendPlans() {
    const net::Deadline deadline = net::defaultDeadline();
    RootInfoWire me = myInfo();
    for (int r = 0; r < nranks(); ++r) {
      const TreePlace place = treePlace(nranks(), r, kTreeFanout);
      PlanWire plan{};
      plan.parent = place.parent;
      plan.fanout = kTreeFanout;
      if (place.parent >= 0) plan.parentAddr = ranks_[place.parent].listener;
      std::vector<char> payload(sizeof(plan));
      std::memcpy(payload.data(), &plan, sizeof(plan));
      auto add = [&](int q) {
        const char* p = reinterpret_cast<const char*>(&ranks_[q].info);
        payload.insert(payload.end(), p, p + sizeof(RankInfo));
      };
      if (place.parent >= 0) add(place.parent);
      for (const RankRange& c : place.children) add(c.lo);
      if (ranks_[r].fd) send(r, kRootInfo, -1, &me, sizeof(me), deadline);  // a sub-root sent its own to its ranks
      send(r, kRootPlan, -1, payload.data(), payload.size(), deadline);
    }
  }

  void reportMissing() {
    std::vector<int> missing;
    const RankRange d = domain();
    for (int r = d.lo; r < d.hi && !ranks_.empty(); ++r)
      if (!ranks_[r].present) missing.push_back(r);
    std::string msg =
        ranks_.empty() ? std::string("no rank connected to the bootstrap root before HOCCL_TIMEOUT")
                       : fmt::format(
                             "rank(s) {} never joined the bootstrap at {} before HOCCL_TIMEOUT; check that every rank "
                             "was started with the same unique id(s) / HOCCL_COMM_ID{}",
                             joinRanks(missing), id_.root.toString(),
                             nIds_ > 1 ? " (with several ids: is every id's root up, served by the first rank of its "
                                         "share?)"
                                       : "");
    HOCCL_WARN(kBootstrap, "{}", msg);
    for (int r = 0; r < nranks(); ++r) sendText(r, kRootTimeout, -1, msg);
  }

  // A sub-root whose share is complete: links to the head root with the id that the first rank of its share handed
  // over (handHeadId), and sends it the share's joins. False (after telling its ranks why) when it cannot.
  bool linkToHead() {
    std::optional<UniqueId> head;
    {
      std::lock_guard<std::mutex> lock(registry().mutex);
      auto it = registry().headIds.find(id_.nonce);
      if (it != registry().headIds.end()) head = it->second;
    }
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

  // A sub-root: relays whole messages between its ranks and the head root until every rank has disconnected or the
  // head is gone (then its ranks' connections close: they warn that failures are no longer shared).
  void relay() {
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
        while (fromHead.size() - used >= sizeof(LinkHeader)) {
          LinkHeader h;
          std::memcpy(&h, fromHead.data() + used, sizeof(h));
          if (h.bytes > kMaxSlotBytes) throwInternalError("the head root sent a message larger than any it sends");
          if (fromHead.size() - used - sizeof(h) < h.bytes) break;
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

  void toHead(const LinkHeader& h, const void* data, size_t bytes) {
    std::vector<char> m = frame(h, data, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      if (head_) net::writeAll(head_.get(), m.data(), m.size(), Clock::now() + std::chrono::seconds(5), "relay");
    } catch (const Error& e) {
      HOCCL_WARN(kBootstrap, "bootstrap root of id {}: relaying to the head root failed: {}", idIndex_, e.what());
      head_.reset();
    }
  }

  // The head root: serves failures (its own ranks and the sub-roots' links) until every rank has disconnected.
  void serve() {
    std::vector<pollfd> pfds;
    std::vector<int> owner;  // rank >= 0, or -1 - link index
    while (true) {
      pfds.clear();
      owner.clear();
      for (int r = 0; r < nranks(); ++r)
        if (ranks_[r].fd) {
          pfds.push_back({ranks_[r].fd.get(), POLLIN, 0});
          owner.push_back(r);
        }
      for (size_t l = 0; l < links_.size(); ++l)
        if (links_[l].fd) {
          pfds.push_back({links_[l].fd.get(), POLLIN, 0});
          owner.push_back(-1 - static_cast<int>(l));
        }
      if (pfds.empty()) return;
      int timeoutMs = 1000;
      if (settling_) {
        auto next = Clock::now() < pingEnd_ ? pingEnd_ : settleEnd_;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
        timeoutMs = static_cast<int>(std::clamp<long long>(left + 1, 0, 1000));
      }
      int rc = ::poll(pfds.data(), pfds.size(), timeoutMs);
      if (rc < 0 && errno != EINTR) throwSystemError("poll in the bootstrap root failed", errno);
      for (size_t i = 0; rc > 0 && i < pfds.size(); ++i)
        if (pfds[i].revents) owner[i] >= 0 ? readFrom(owner[i]) : readLink(-1 - owner[i]);
      decide();
    }
  }

  // Handles every whole message at the front of `in` from rank r; false when one is malformed.
  bool parse(int r, std::vector<char>& in) {
    size_t used = 0;
    bool ok = true;
    while (true) {
      const Frame f = nextRankMessage(in.data() + used, in.size() - used);
      if (f.status == Frame::Partial) break;
      if (f.status == Frame::Malformed) {
        HOCCL_WARN(kBootstrap, "bootstrap root: {} sent a malformed message (type {}, {} bytes); dropping it", who(r),
                   f.type, f.bytes);
        ok = false;
        break;
      }
      const char* body = in.data() + used + sizeof(RankHeader);
      handle(r, f.type, std::vector<char>(body, body + f.bytes));
      used += sizeof(RankHeader) + f.bytes;
    }
    in.erase(in.begin(), in.begin() + used);
    return ok;
  }

  // Takes what arrived from rank r and handles every whole message in it.
  void readFrom(int r) {
    Rank& rk = ranks_[r];
    char chunk[64 << 10];
    ssize_t got = ::recv(rk.fd.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (got <= 0) {
      closeRank(r);
      return;
    }
    rk.in.insert(rk.in.end(), chunk, chunk + got);
    if (!parse(r, rk.in)) closeRank(r);
  }

  // Takes what arrived from sub-root link l: its ranks' messages and closes.
  void readLink(int l) {
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
    while (link.in.size() - used >= sizeof(LinkHeader)) {
      LinkHeader h;
      std::memcpy(&h, link.in.data() + used, sizeof(h));
      const bool mine = h.rank >= link.share.lo && h.rank < link.share.hi;
      if (h.bytes > kMaxSlotBytes || !mine) {
        HOCCL_WARN(kBootstrap, "bootstrap head root: the root of id {} sent a malformed relay; dropping its link",
                   link.idIndex);
        loseLink(l);
        return;
      }
      if (link.in.size() - used - sizeof(h) < h.bytes) break;
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

  // A sub-root's link closed: the ranks of its process are lost; the others of its share can no longer be reached.
  void loseLink(int l) {
    Link& link = links_[l];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      link.fd.reset();
    }
    HOCCL_WARN(kBootstrap, "bootstrap head root: the root of id {} (pid {}, ranks {}..{}) closed its link",
               link.idIndex, link.pid, link.share.lo, link.share.hi - 1);
    for (int r = link.share.lo; r < link.share.hi; ++r) {
      if (ranks_[r].info.pid == link.pid) closeRank(r);
      ranks_[r].via = -1;
    }
  }

  void handle(int r, uint32_t type, std::vector<char> payload) {
    switch (type) {
      case kRankReport: {
        if (verdictSent_) break;
        Report rep{r, std::string(payload.begin(), payload.end()), {}};
        for (int s : namedRanks(rep.text))
          if (s >= 0 && s < nranks() && s != r) rep.suspects.push_back(s);
        HOCCL_INFO(kBootstrap, "bootstrap root: {} reports: {}", who(r), rep.text);
        reports_.push_back(std::move(rep));
        ranks_[r].answered = true;
        ranks_[r].reported = true;
        if (!settling_) {
          settling_ = true;
          settleEnd_ = Clock::now() + kSettle;
          pingEnd_ = Clock::now() + kPingWait;
          for (int q = 0; q < nranks(); ++q)
            if (q != r) {
              ranks_[q].answered = false;
              send(q, kRootPing, -1, nullptr, 0, Clock::now() + std::chrono::milliseconds(100));
            }
        }
        break;
      }
      case kRankPong: ranks_[r].answered = true; break;
      case kRankReady: ranks_[r].ready = true; break;
      case kRankAbort:
        if (abortBy_ < 0) abortBy_ = r;
        break;
      case kRankGoodbye:
        if (ranks_[r].state == State::Live) ranks_[r].state = State::Leaving;
        break;
      default: break;
    }
  }

  void closeRank(int r) {
    Rank& rk = ranks_[r];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rk.fd.reset();
      rk.via = -1;
    }
    if (!rk.ready && std::find(initLost_.begin(), initLost_.end(), r) == initLost_.end()) initLost_.push_back(r);
    if (rk.state == State::Leaving || rk.state == State::Gone) {
      rk.state = State::Gone;
      return;
    }
    if (rk.state == State::Lost) return;
    rk.state = State::Lost;
    HOCCL_INFO(kBootstrap, "bootstrap root: {} disconnected without a goodbye", who(r));
  }

  // Picks the culprit when the reports allow it (see the comment at the top of this file) and tells every rank.
  void decide() {
    if (verdictSent_) return;
    for (int r : initLost_) {
      if (ranks_[r].reported) continue;  // its own report says why (and may blame another rank)
      const bool died = ranks_[r].state == State::Lost;
      sendVerdict(died ? Verdict::Kind::Died : Verdict::Kind::Left, r, -1, initLossText(r, died));
      return;
    }
    if (abortBy_ >= 0) {
      sendVerdict(Verdict::Kind::Aborted, abortBy_, abortBy_,
                  fmt::format("{} aborted the communicator (hocclCommAbort), so every rank of it stops. Look at that "
                              "rank's output for why it aborted",
                              who(abortBy_)));
      return;
    }
    if (reports_.empty()) return;
    for (State wanted : {State::Lost, State::Gone}) {
      for (const Report& rep : reports_) {
        for (int s : rep.suspects) {
          State st = ranks_[s].state == State::Leaving ? State::Gone : ranks_[s].state;
          if (st != wanted) continue;
          if (wanted == State::Lost)
            sendVerdict(Verdict::Kind::Died, s, rep.reporter,
                        fmt::format("{} exited or was killed before finishing its part (its connection to the "
                                    "bootstrap root closed without a goodbye). Look at rank {}'s output and the "
                                    "system log (dmesg: OOM killer, signals) for the cause. [Rank {} noticed it "
                                    "first: {}]",
                                    who(s), s, rep.reporter, rep.text));
          else
            sendVerdict(Verdict::Kind::Left, s, rep.reporter,
                        fmt::format("{} had already destroyed its communicator while rank {} still waited for it: the "
                                    "ranks did not call the same sequence of operations. [Rank {} reported: {}]",
                                    who(s), rep.reporter, rep.reporter, rep.text));
          return;
        }
      }
    }
    std::vector<int> reporters;
    for (const Report& rep : reports_) reporters.push_back(rep.reporter);
    auto reported = [&](int r) { return std::find(reporters.begin(), reporters.end(), r) != reporters.end(); };
    // A connected rank that did not answer the ping (nor report): its process does not run. Named ones first.
    if (Clock::now() >= pingEnd_) {
      int frozen = -1;
      for (const Report& rep : reports_)
        for (int s : rep.suspects)
          if (frozen < 0 && ranks_[s].state == State::Live && !ranks_[s].answered && !reported(s)) frozen = s;
      for (int r = 0; r < nranks() && frozen < 0; ++r)
        if (ranks_[r].state == State::Live && !ranks_[r].answered && !reported(r)) frozen = r;
      if (frozen >= 0) {
        int reporter = -1;
        for (const Report& rep : reports_)
          if (reporter < 0 && std::find(rep.suspects.begin(), rep.suspects.end(), frozen) != rep.suspects.end())
            reporter = rep.reporter;
        const Report& first = reports_.front();
        sendVerdict(Verdict::Kind::Stalled, frozen, reporter,
                    fmt::format("{} does not respond: its process is stopped (SIGSTOP, a debugger) or frozen, so "
                                "rank(s) {} gave up waiting for the operation it is part of. `grep State "
                                "/proc/{}/status` or `gdb -p {}` shows why. [Rank {} reported: {}]",
                                who(frozen), joinRanks(reporters), ranks_[frozen].info.pid, ranks_[frozen].info.pid,
                                first.reporter, first.text));
        return;
      }
    }
    // Wait for more reports while some connected rank has neither reported nor been named: its report could still
    // change the picture (a chain of waits reports from its far end first).
    if (settling_ && Clock::now() < settleEnd_) {
      std::vector<bool> covered(nranks(), false);
      for (const Report& rep : reports_) {
        covered[rep.reporter] = true;
        for (int s : rep.suspects) covered[s] = true;
      }
      for (int r = 0; r < nranks(); ++r)
        if (!covered[r] && ranks_[r].state == State::Live) return;
      for (int r = 0; r < nranks(); ++r)  // covered, but a stopped rank may still show itself by not answering
        if (Clock::now() < pingEnd_ && ranks_[r].state == State::Live && !ranks_[r].answered && !reported(r)) return;
    }
    // Everybody named is still connected: the culprit is the one others wait for that did not report itself.
    std::vector<int> order;
    std::map<int, std::vector<int>> waiters;
    for (const Report& rep : reports_)
      for (int s : rep.suspects) {
        if (reported(s)) continue;
        if (!waiters.count(s)) order.push_back(s);
        auto& w = waiters[s];
        if (std::find(w.begin(), w.end(), rep.reporter) == w.end()) w.push_back(rep.reporter);
      }
    int culprit = -1;
    for (int s : order)
      if (culprit < 0 || waiters[s].size() > waiters[culprit].size()) culprit = s;
    const Report& first = reports_.front();
    if (culprit < 0 && !first.suspects.empty()) {
      culprit = first.suspects.front();
      waiters[culprit].push_back(first.reporter);
    }
    if (culprit >= 0) {
      const Report* rep = &first;
      for (const Report& r : reports_)
        if (std::find(r.suspects.begin(), r.suspects.end(), culprit) != r.suspects.end()) {
          rep = &r;
          break;
        }
      sendVerdict(Verdict::Kind::Stalled, culprit, rep->reporter,
                  fmt::format("{} stopped taking part while its process is still connected: rank(s) {} gave up "
                              "waiting for it. It is stuck, stopped (SIGSTOP, a debugger), or calling a different "
                              "operation; `gdb -p {}` or py-spy shows where. [Rank {} reported: {}]",
                              who(culprit), joinRanks(waiters[culprit]), ranks_[culprit].info.pid, rep->reporter,
                              rep->text));
      return;
    }
    sendVerdict(Verdict::Kind::Reported, first.reporter, first.reporter,
                fmt::format("{} failed: {}", who(first.reporter), first.text));
  }

  // Rule 0: rank r's connection closed before its init was complete (`died`: without a goodbye).
  std::string initLossText(int r, bool died) const {
    if (died)
      return fmt::format(
          "{} dropped out during init: its connection to the bootstrap root at {} closed without a goodbye before "
          "its init was complete (it exited, was killed, or its bootstrap connection broke), so the communicator "
          "cannot be created and every rank stops. Look at rank {}'s output for its error, and at the system log "
          "(dmesg: OOM killer, signals); on an overloaded machine, fewer ranks per host or a larger HOCCL_TIMEOUT "
          "may help",
          who(r), id_.root.toString(), r);
    return fmt::format(
        "{} gave up during init (it left the bootstrap before its init was complete), so the communicator cannot be "
        "created and every rank stops. Rank {}'s own output says why its init failed",
        who(r), r);
  }

  void sendVerdict(Verdict::Kind kind, int culprit, int reporter, const std::string& text) {
    verdictSent_ = true;
    settling_ = false;
    reports_.clear();
    HOCCL_WARN(kBootstrap, "bootstrap root at {}: {}", id_.root.toString(), text);
    verdict_.assign(sizeof(VerdictWire) + text.size(), 0);
    VerdictWire w{static_cast<uint32_t>(kind), culprit, reporter, 0};
    std::memcpy(verdict_.data(), &w, sizeof(w));
    std::memcpy(verdict_.data() + sizeof(w), text.data(), text.size());
    verdictCulprit_ = culprit;
    for (int r = 0; r < nranks(); ++r) sendVerdictTo(r);
  }

  // The verdict already decided, to rank r (one that joined or linked after it, or every rank when it is decided).
  void sendVerdictTo(int r) {
    send(r, kRootVerdict, verdictCulprit_, verdict_.data(), verdict_.size(), Clock::now() + std::chrono::seconds(2));
  }

  // Sends one message to rank r (header and payload in one write; through its sub-root when it is relayed); a rank
  // that cannot take it is disconnected.
  void send(int r, uint32_t type, int32_t rank, const void* data, size_t bytes, net::Deadline deadline) {
    std::vector<char> buf = frame(RootHeader{type, rank, bytes}, data, bytes);
    bool ok = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      int fd = ranks_[r].fd.get();
      if (fd < 0 && ranks_[r].via >= 0) {
        buf = frame(LinkHeader{kLinkToRank, r, buf.size()}, buf.data(), buf.size());
        fd = links_[ranks_[r].via].fd.get();
      }
      if (fd < 0) return;
      try {
        net::writeAll(fd, buf.data(), buf.size(), deadline, "bootstrap root send");
      } catch (const Error&) {
        ok = false;
      }
    }
    if (!ok && ranks_[r].fd) closeRank(r);
  }

  void sendText(int r, uint32_t type, int32_t rank, const std::string& text) {
    send(r, type, rank, text.data(), text.size(), Clock::now() + std::chrono::seconds(2));
  }

  static void sendError(int fd, int rank, const std::string& text) {
    std::vector<char> buf = frame(RootHeader{kRootError, rank, text.size()}, text.data(), text.size());
    try {
      net::writeAll(fd, buf.data(), buf.size(), Clock::now() + std::chrono::seconds(2), "bootstrap root error");
    } catch (const Error&) {
    }
  }

  void broadcastError(const std::string& text) {
    for (int r = 0; r < nranks(); ++r) sendText(r, kRootError, -1, text);
  }

  net::Fd listener_;
  UniqueId id_;
  pid_t pid_;
  std::mutex mutex_;  // the sockets of ranks_, links_ and head_ against announceClosing (another thread, at exit)
  std::vector<Rank> ranks_;
  std::vector<Link> links_;  // head root: the sub-roots
  net::Fd head_;             // sub-root: its link to the head root
  bool configured_ = false;  // the first rank of this root's own share has joined
  int nIds_ = 1;
  int idIndex_ = 0;
  RankRange share_;
  std::vector<Report> reports_;  // received, not yet decided
  bool settling_ = false;
  Clock::time_point settleEnd_{};
  Clock::time_point pingEnd_{};
  int abortBy_ = -1;
  std::vector<int> initLost_;  // ranks whose connection closed before their kRankReady, in order
  bool verdictSent_ = false;
  std::vector<char> verdict_;  // the verdict's payload (VerdictWire and text), for ranks that join after it
  int verdictCulprit_ = -1;
  bool headTold_ = false;  // sub-root: the head root knows of the rank its share lost (kLinkLost)
};

void announceClosingAtExit() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (RootServer* s : registry().servers) s->announceClosing();
}

}  // namespace

void startRootServer(net::Fd listener, const UniqueId& id) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(announceClosingAtExit); });
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().serving.push_back(id.nonce);
  }
  auto server = std::make_shared<RootServer>(std::move(listener), id);
  std::thread([server] { server->run(); }).detach();
}

bool servesRoot(const UniqueId& id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  const auto& n = registry().serving;
  return std::find(n.begin(), n.end(), id.nonce) != n.end();
}

void handHeadId(const UniqueId& sub, const UniqueId& head) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().headIds[sub.nonce] = head;
}

}  // namespace hoccl::boot
