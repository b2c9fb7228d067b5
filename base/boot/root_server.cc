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
 *                           "rank N (host H, pid P)" (describeRank); kRankMismatch: the same for calls it found
 *                           to differ
 *             rank -> root  kRankAbort: this rank called hocclCommAbort
 *             root -> rank  kRootPing, answered by the rank's watcher thread with kRankPong: is it running?
 *             root -> rank  kRootVerdict: the culprit, once per communicator, to every connected rank
 *   ready     rank -> root  kRankReady: its init is complete (tree linked, rank table held)
 *   leaving   rank -> root  kRankGoodbye, then close: a normal end (hocclCommDestroy); never blamed
 *             root -> rank  kRootClosing: the root's process exits normally (sent from an atexit handler)
 *
 * Several roots (hocclCommInitRankScalable with nIds ids): each id's root meets only its share of the ranks; the
 * root of id 0 (the head) decides for the whole communicator, the others relay to it (root_link.cc).
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
 *   0. while no report is pending: a rank whose connection closed before its init was complete and that reported
 *      nothing itself;
 *   1. an abort: the rank that aborted;
 *   2. a suspect whose connection closed without a goodbye: it died;
 *   3. a suspect that had said goodbye: it left while others still waited for it (mismatched calls);
 *   3a. a report of a mismatch (kRankMismatch: the reporter compared the calls and found them different): its
 *      reporter, saying the calls differ;
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
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/handshake.h"
#include "base/boot/root_core.h"
#include "base/boot/tree_shape.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot::server {
namespace {

// How long reports of a failure whose suspects are all still connected are collected before the verdict.
constexpr auto kSettle = std::chrono::milliseconds(600);
// How long a running rank may take to answer a ping.
constexpr auto kPingWait = std::chrono::milliseconds(300);
// Children per rank in the gather tree (tree_shape.h): depth log4(n), 1 + 4 links per rank.
constexpr int kTreeFanout = 4;
// How often the root looks at the connections of the ranks that joined while it waits for the others.
constexpr auto kJoinedWatch = std::chrono::milliseconds(100);

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

void announceClosingAtExit() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().exiting = true;
  for (RootServer* s : registry().servers) s->announceClosing();
}

[[noreturn]] void park() {
  while (true) ::pause();
}

}  // namespace

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: used from an atexit handler
  return *r;
}

void releaseCryptoOrPark() {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    if (!registry().exiting) {
      releaseThreadCryptoState();
      return;
    }
  }
  park();
}

void parkIfExiting() {
  if (registry().exiting.load(std::memory_order_relaxed)) park();
}

void RootServer::run() {
  try {
    const bool assembled = assemble();
    releaseCryptoOrPark();  // the handshakes are over; this thread may still run when the process exits
    if (assembled) {
      enroll();
      if (idIndex_ > 0) {
        const bool linked = linkToHead();
        releaseCryptoOrPark();  // linking to the head was a handshake too
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
  withdraw();
  // Also when assemble() threw half-way through a handshake. Last: a thread that ends while the process exits would
  // free its OpenSSL state from the thread's end, racing OpenSSL's exit handler (a suspected cause of a rank 0 that
  // crashed as it exited once in 340 runs, session 22); it parks instead.
  releaseCryptoOrPark();
}

void RootServer::announceClosing() {
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

void RootServer::enroll() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().servers.push_back(this);
}

void RootServer::withdraw() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& s = registry().servers;
  s.erase(std::remove(s.begin(), s.end(), this), s.end());
  auto& n = registry().serving;
  n.erase(std::remove(n.begin(), n.end(), id_.nonce), n.end());
  registry().headIds.erase(id_.nonce);
}

bool RootServer::complete() const {
  if (ranks_.empty()) return false;
  for (int r = domain().lo; r < domain().hi; ++r)
    if (!ranks_[r].present) return false;
  return true;
}

std::string RootServer::configure(const JoinMessage& j) {
  if (!configured_) {
    if (j.nranks < 1 || j.nranks > kMaxRanks || j.nIds < 1 || j.idIndex < 0 || j.idIndex >= j.nIds || j.shareLo < 0 ||
        j.shareHi > j.nranks || j.shareLo >= j.shareHi)
      return fmt::format("rank {} joined with nranks {}, id {} of {}, share {}..{}, which do not fit together", j.rank,
                         j.nranks, j.idIndex, j.nIds, j.shareLo, j.shareHi - 1);
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

bool RootServer::assemble() {
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

void RootServer::watchJoined() {
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

RootInfoWire RootServer::myInfo() const {
  RootInfoWire me{};
  me.pid = static_cast<int32_t>(pid_);
  ::gethostname(me.hostname, sizeof(me.hostname) - 1);
  return me;
}

void RootServer::sendPlans() {
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

void RootServer::reportMissing() {
  std::vector<int> missing;
  const RankRange d = domain();
  for (int r = d.lo; r < d.hi && !ranks_.empty(); ++r)
    if (!ranks_[r].present) missing.push_back(r);
  std::string msg = ranks_.empty()
                        ? std::string("no rank connected to the bootstrap root before HOCCL_TIMEOUT")
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

void RootServer::serve() {
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
    parkIfExiting();
    if (rc < 0 && errno != EINTR) throwSystemError("poll in the bootstrap root failed", errno);
    for (size_t i = 0; rc > 0 && i < pfds.size(); ++i)
      if (pfds[i].revents) owner[i] >= 0 ? readFrom(owner[i]) : readLink(-1 - owner[i]);
    decide();
  }
}

bool RootServer::parse(int r, std::vector<char>& in) {
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

void RootServer::readFrom(int r) {
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

void RootServer::handle(int r, uint32_t type, std::vector<char> payload) {
  switch (type) {
    case kRankReport:
    case kRankMismatch: {
      if (verdictSent_) break;
      Report rep{r, std::string(payload.begin(), payload.end()), {}, type == kRankMismatch};
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

void RootServer::closeRank(int r) {
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

void RootServer::decide() {
  if (verdictSent_) return;
  if (abortBy_ >= 0) {
    sendVerdict(Verdict::Kind::Aborted, abortBy_, abortBy_,
                fmt::format("{} aborted the communicator (hocclCommAbort), so every rank of it stops. Look at that "
                            "rank's output for why it aborted",
                            who(abortBy_)));
    return;
  }
  if (reports_.empty()) {
    // Rule 0, while no report is being judged (a report decides by the rules below, and a rank that left after
    // waiting in vain for that verdict is not the culprit).
    for (int r : initLost_) {
      if (ranks_[r].reported) continue;  // its own report says why (and may blame another rank)
      const bool died = ranks_[r].state == State::Lost;
      sendVerdict(died ? Verdict::Kind::Died : Verdict::Kind::Left, r, -1, initLossText(r, died));
      return;
    }
    return;
  }
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
  // A rank that found the calls differ: nobody stalled, the calls disagree (the rank it names is alive and busy with
  // its own call, so rules 4 and 5 would blame it for stopping).
  for (const Report& rep : reports_)
    if (rep.mismatch) {
      sendVerdict(Verdict::Kind::Reported, rep.reporter, rep.reporter,
                  fmt::format("{} found that the ranks' calls do not match, so every rank of the communicator stops: "
                              "{}",
                              who(rep.reporter), rep.text));
      return;
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

std::string RootServer::initLossText(int r, bool died) const {
  if (died)
    return fmt::format(
        "{} dropped out during init: its connection to the bootstrap root at {} closed without a goodbye before "
        "its init was complete (its init failed, it exited, was killed, or its bootstrap connection broke), so the communicator "
        "cannot be created and every rank stops. Look at rank {}'s output for its error, and at the system log "
        "(dmesg: OOM killer, signals); on an overloaded machine, fewer ranks per host or a larger HOCCL_TIMEOUT "
        "may help",
        who(r), id_.root.toString(), r);
  return fmt::format(
      "{} gave up during init (it left the bootstrap before its init was complete), so the communicator cannot be "
      "created and every rank stops. Rank {}'s own output says why its init failed",
      who(r), r);
}

void RootServer::sendVerdict(Verdict::Kind kind, int culprit, int reporter, const std::string& text) {
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

void RootServer::sendVerdictTo(int r) {
  send(r, kRootVerdict, verdictCulprit_, verdict_.data(), verdict_.size(), Clock::now() + std::chrono::seconds(2));
}

void RootServer::send(int r, uint32_t type, int32_t rank, const void* data, size_t bytes, net::Deadline deadline) {
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

void RootServer::sendText(int r, uint32_t type, int32_t rank, const std::string& text) {
  send(r, type, rank, text.data(), text.size(), Clock::now() + std::chrono::seconds(2));
}

void RootServer::sendError(int fd, int rank, const std::string& text) {
  std::vector<char> buf = frame(RootHeader{kRootError, rank, text.size()}, text.data(), text.size());
  try {
    net::writeAll(fd, buf.data(), buf.size(), Clock::now() + std::chrono::seconds(2), "bootstrap root error");
  } catch (const Error&) {
  }
}

void RootServer::broadcastError(const std::string& text) {
  for (int r = 0; r < nranks(); ++r) sendText(r, kRootError, -1, text);
}

}  // namespace hoccl::boot::server

namespace hoccl::boot {

void startRootServer(net::Fd listener, const UniqueId& id) {
  static std::once_flag once;
  std::call_once(once, [] {
    initCrypto();  // OpenSSL's exit handler first, so that hoccl's (registered after it) runs before it
    std::atexit(server::announceClosingAtExit);
  });
  {
    std::lock_guard<std::mutex> lock(server::registry().mutex);
    server::registry().serving.push_back(id.nonce);
  }
  auto root = std::make_shared<server::RootServer>(std::move(listener), id);
  std::thread([root] { root->run(); }).detach();
}

bool servesRoot(const UniqueId& id) {
  std::lock_guard<std::mutex> lock(server::registry().mutex);
  const auto& n = server::registry().serving;
  return std::find(n.begin(), n.end(), id.nonce) != n.end();
}

}  // namespace hoccl::boot
