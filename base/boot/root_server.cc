/*
 * The bootstrap root (see root_server.h): one detached thread per communicator; it owns its sockets and ends by
 * itself when every rank has disconnected or the job never assembled.
 *
 * Protocol (messages in wire.h; every message after the join is a header and `bytes` of payload):
 *   join      rank -> root  the handshake (handshake.h: both sides prove the job secret), JoinMessage, RankInfo
 *             root -> rank  kRootInfo (the root's pid and host), then kRootData with every rank's RankInfo, or
 *                           kRootError (a bad size, a duplicate rank), kRootTimeout (ranks missing at HOCCL_TIMEOUT)
 *   rounds    rank -> root  kRankSlot: its slot of an all-gather (barrier = all-gather of one byte)
 *             root -> rank  kRootData: all slots, once every rank sent one; kRootError when a rank the round waits
 *                           for has left with a goodbye (the ranks called different operations)
 *   failures  rank -> root  kRankReport: a failure this rank detected; the text names its suspects as
 *                           "rank N (host H, pid P)" (describeRank)
 *             rank -> root  kRankAbort: this rank called hocclCommAbort
 *             root -> rank  kRootPing, answered by the rank's watcher thread with kRankPong: is it running?
 *             root -> rank  kRootVerdict: the culprit, once per communicator, to every connected rank
 *   leaving   rank -> root  kRankGoodbye, then close: a normal end (hocclCommDestroy); never blamed
 *             root -> rank  kRootClosing: the root's process exits normally (sent from an atexit handler)
 *
 * The root reads every connection all the time (poll on all of them, whole messages parsed out of what arrived, so
 * a stopped rank never blocks it) and keeps one state per rank: live, leaving (said goodbye), gone (closed after a
 * goodbye) or lost (closed without one: killed, crashed, or exited without destroying its communicator).
 *
 * A lost rank alone is no failure: a rank may exit (even with _exit) once its part is done while others still finish
 * theirs, and that looks the same as a kill. It becomes the culprit as soon as somebody needs it: a bootstrap round
 * it has not contributed to, or a report that names it. The ranks that wait on it directly see it through their data
 * path within ~0.1 s (shm watches the pid, tcp sees the close); their reports reach the root, and the root's verdict
 * then releases every other rank, including those that only wait on survivors.
 *
 * The verdict, once per communicator, picked from the reports received (in order) and the connection states:
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

class RootServer;

// Live root servers of this process, told at exit that their process is ending normally.
struct Registry {
  std::mutex mutex;
  std::vector<RootServer*> servers;
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

class RootServer {
 public:
  RootServer(net::Fd listener, const UniqueId& id) : listener_(std::move(listener)), id_(id), pid_(::getpid()) {}

  void run() {
    try {
      const bool assembled = assemble();
      releaseThreadCryptoState();  // the handshakes are over; this thread may still run when the process exits
      if (assembled) {
        enroll();
        serve();
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
    for (auto& r : ranks_) {
      if (!r.fd) continue;
      RootHeader h{kRootClosing, -1, 0};
      try {
        net::writeAll(r.fd.get(), &h, sizeof(h), Clock::now() + std::chrono::milliseconds(100), "root closing");
      } catch (const Error&) {
      }
    }
  }

 private:
  enum class State { Live, Leaving, Gone, Lost };
  struct Rank {
    net::Fd fd;
    RankInfo info;
    State state = State::Live;
    bool answered = false;                // to the last ping (or reported: it runs)
    std::vector<char> in;                 // bytes received, not yet a whole message
    std::deque<std::vector<char>> slots;  // all-gather slots, oldest first
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
  }

  int nranks() const { return static_cast<int>(ranks_.size()); }
  std::string who(int r) const { return describeRank(ranks_[r].info); }

  // Accepts nranks authenticated ranks (handshake.h: all connections at once, each with its own short deadline, so
  // strangers and idle sockets cannot delay the job), then sends each the root's identity and the RankInfo table.
  bool assemble() {
    net::Deadline deadline = net::defaultDeadline();
    Acceptor acceptor(listener_.get(), id_.secret, -1, "the bootstrap root at " + id_.root.toString());
    int n = -1;
    size_t joined = 0;
    while (n < 0 || static_cast<int>(joined) < n) {
      std::optional<Acceptor::Peer> peer = acceptor.next(deadline);
      if (!peer) {
        reportMissing(n);
        return false;
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
        net::Deadline joinBy = std::min(deadline, Clock::now() + kHandshakeWait);
        net::readAll(fd.get(), &join, sizeof(join), joinBy, "bootstrap join");
        net::readAll(fd.get(), &info, sizeof(info), joinBy, "bootstrap join");
      } catch (const Error& e) {
        HOCCL_WARN(kBootstrap, "bootstrap root: rank {} at {} proved the secret but sent no join: {}", peer->hello.rank,
                   peer->from, e.what());
        continue;
      }
      if (join.rank != peer->hello.rank) {
        sendError(fd.get(), join.rank,
                  fmt::format("rank {} joined with a handshake made for rank {}", join.rank, peer->hello.rank));
        continue;
      }
      if (n < 0 && join.nranks > 0) {
        n = join.nranks;
        ranks_.resize(n);
      }
      std::string problem;
      if (join.nranks != n)
        problem = fmt::format("rank {} says the communicator has {} ranks but rank(s) before it said {}", join.rank,
                              join.nranks, n);
      else if (join.rank < 0 || join.rank >= n) problem = fmt::format("rank {} is outside 0..{}", join.rank, n - 1);
      else if (ranks_[join.rank].fd)
        problem = fmt::format("two processes both claim rank {} (check HOCCL_RANK / the launcher)", join.rank);
      if (!problem.empty()) {
        HOCCL_WARN(kBootstrap, "bootstrap root: {}", problem);
        sendError(fd.get(), join.rank, problem);
        continue;
      }
      info.rank = join.rank;
      ranks_[join.rank].fd = std::move(fd);
      ranks_[join.rank].info = info;
      ++joined;
    }
    RootInfoWire me{};
    me.pid = static_cast<int32_t>(pid_);
    ::gethostname(me.hostname, sizeof(me.hostname) - 1);
    std::vector<RankInfo> table;
    for (const auto& r : ranks_) table.push_back(r.info);
    for (int r = 0; r < n; ++r) {
      send(r, kRootInfo, -1, &me, sizeof(me), deadline);
      send(r, kRootData, -1, table.data(), table.size() * sizeof(RankInfo), deadline);
    }
    return true;
  }

  void reportMissing(int n) {
    std::string missing;
    for (int r = 0; r < n; ++r)
      if (!ranks_[r].fd) missing += (missing.empty() ? "" : ",") + std::to_string(r);
    std::string msg =
        n < 0 ? "no rank connected to the bootstrap root before HOCCL_TIMEOUT"
              : fmt::format(
                    "rank(s) {} never joined the bootstrap at {} before HOCCL_TIMEOUT; check that every rank was "
                    "started with the same unique id / HOCCL_COMM_ID",
                    missing, id_.root.toString());
    HOCCL_WARN(kBootstrap, "{}", msg);
    for (int r = 0; r < nranks(); ++r) sendText(r, kRootTimeout, -1, msg);
  }

  // Serves rounds and failures until every rank has disconnected.
  void serve() {
    std::vector<pollfd> pfds;
    std::vector<int> owner;
    while (true) {
      pfds.clear();
      owner.clear();
      for (int r = 0; r < nranks(); ++r)
        if (ranks_[r].fd) {
          pfds.push_back({ranks_[r].fd.get(), POLLIN, 0});
          owner.push_back(r);
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
        if (pfds[i].revents) readFrom(owner[i]);
      decide();
      advanceRounds();
    }
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
    size_t used = 0;
    while (true) {
      const Frame f = nextRankMessage(rk.in.data() + used, rk.in.size() - used);
      if (f.status == Frame::Partial) break;
      if (f.status == Frame::Malformed) {
        HOCCL_WARN(kBootstrap,
                   "bootstrap root: {} sent a malformed message (type {}, {} bytes); dropping its "
                   "connection",
                   who(r), f.type, f.bytes);
        closeRank(r);
        return;
      }
      const char* body = rk.in.data() + used + sizeof(RankHeader);
      handle(r, f.type, std::vector<char>(body, body + f.bytes));
      used += sizeof(RankHeader) + f.bytes;
    }
    rk.in.erase(rk.in.begin(), rk.in.begin() + used);
  }

  void handle(int r, uint32_t type, std::vector<char> payload) {
    switch (type) {
      case kRankSlot: ranks_[r].slots.push_back(std::move(payload)); break;
      case kRankReport: {
        if (verdictSent_) break;
        Report rep{r, std::string(payload.begin(), payload.end()), {}};
        for (int s : namedRanks(rep.text))
          if (s >= 0 && s < nranks() && s != r) rep.suspects.push_back(s);
        HOCCL_INFO(kBootstrap, "bootstrap root: {} reports: {}", who(r), rep.text);
        reports_.push_back(std::move(rep));
        ranks_[r].answered = true;
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
    }
    if (rk.state == State::Leaving || rk.state == State::Gone) {
      rk.state = State::Gone;
      return;
    }
    rk.state = State::Lost;
    HOCCL_INFO(kBootstrap, "bootstrap root: {} disconnected without a goodbye", who(r));
  }

  // Picks the culprit when the reports allow it (see the comment at the top of this file) and tells every rank.
  void decide() {
    if (verdictSent_) return;
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

  void sendVerdict(Verdict::Kind kind, int culprit, int reporter, const std::string& text) {
    verdictSent_ = true;
    settling_ = false;
    reports_.clear();
    HOCCL_WARN(kBootstrap, "bootstrap root at {}: {}", id_.root.toString(), text);
    std::vector<char> payload(sizeof(VerdictWire) + text.size());
    VerdictWire w{static_cast<uint32_t>(kind), culprit, reporter, 0};
    std::memcpy(payload.data(), &w, sizeof(w));
    std::memcpy(payload.data() + sizeof(w), text.data(), text.size());
    for (int r = 0; r < nranks(); ++r)
      send(r, kRootVerdict, culprit, payload.data(), payload.size(), Clock::now() + std::chrono::seconds(2));
  }

  // Completes every all-gather round whose slots are all in; fails a round that can no longer complete.
  void advanceRounds() {
    while (true) {
      std::vector<int> waiting, missing;
      for (int r = 0; r < nranks(); ++r) (ranks_[r].slots.empty() ? missing : waiting).push_back(r);
      if (waiting.empty()) return;
      if (missing.empty()) {
        std::vector<char> all;
        for (auto& rk : ranks_) {
          all.insert(all.end(), rk.slots.front().begin(), rk.slots.front().end());
          rk.slots.pop_front();
        }
        // Ranks of this process last: once one of them has its answer it may destroy its communicator and exit,
        // which ends this thread; by then every other rank's answer is already in its socket.
        for (int pass = 0; pass < 2; ++pass)
          for (int r = 0; r < nranks(); ++r)
            if ((ranks_[r].info.pid == static_cast<int32_t>(pid_)) == (pass == 1))
              send(r, kRootData, -1, all.data(), all.size(), net::defaultDeadline());
        continue;
      }
      int lost = -1, left = -1;
      for (int m : missing) {
        if (ranks_[m].state == State::Lost && lost < 0) lost = m;
        if ((ranks_[m].state == State::Gone || ranks_[m].state == State::Leaving) && left < 0) left = m;
      }
      if (lost < 0 && left < 0) return;  // the missing ranks may still come
      if (lost >= 0 && !verdictSent_) {
        sendVerdict(Verdict::Kind::Died, lost, -1,
                    fmt::format("{} exited or was killed before finishing (its connection to the bootstrap root "
                                "closed without a goodbye) while rank(s) {} waited for it in a bootstrap exchange "
                                "(init, hocclCommSplit or hocclCommFinalize). Look at rank {}'s output and the system "
                                "log (dmesg: OOM killer, signals) for the cause",
                                who(lost), joinRanks(waiting), lost));
      } else if (lost < 0) {
        std::string text = fmt::format(
            "{} destroyed its communicator while rank(s) {} waited for it in a bootstrap "
            "exchange: hocclCommSplit / hocclCommFinalize was called on some ranks only",
            who(left), joinRanks(waiting));
        HOCCL_WARN(kBootstrap, "bootstrap root: {}", text);
        for (int r : waiting) sendText(r, kRootError, left, text);
      }
      for (auto& rk : ranks_) rk.slots.clear();
      return;
    }
  }

  // Sends one message to rank r (header and payload in one write); a rank that cannot take it is disconnected.
  void send(int r, uint32_t type, int32_t rank, const void* data, size_t bytes, net::Deadline deadline) {
    std::vector<char> buf(sizeof(RootHeader) + bytes);
    RootHeader h{type, rank, bytes};
    std::memcpy(buf.data(), &h, sizeof(h));
    if (bytes) std::memcpy(buf.data() + sizeof(h), data, bytes);
    bool ok = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ranks_[r].fd) return;
      try {
        net::writeAll(ranks_[r].fd.get(), buf.data(), buf.size(), deadline, "bootstrap root send");
      } catch (const Error&) {
        ok = false;
      }
    }
    if (!ok) closeRank(r);
  }

  void sendText(int r, uint32_t type, int32_t rank, const std::string& text) {
    send(r, type, rank, text.data(), text.size(), Clock::now() + std::chrono::seconds(2));
  }

  static void sendError(int fd, int rank, const std::string& text) {
    RootHeader h{kRootError, rank, text.size()};
    std::vector<char> buf(sizeof(h) + text.size());
    std::memcpy(buf.data(), &h, sizeof(h));
    std::memcpy(buf.data() + sizeof(h), text.data(), text.size());
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
  std::mutex mutex_;  // ranks_[*].fd against announceClosing (another thread, at exit)
  std::vector<Rank> ranks_;
  std::vector<Report> reports_;  // received, not yet decided
  bool settling_ = false;
  Clock::time_point settleEnd_{};
  Clock::time_point pingEnd_{};
  int abortBy_ = -1;
  bool verdictSent_ = false;
};

void announceClosingAtExit() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (RootServer* s : registry().servers) s->announceClosing();
}

}  // namespace

void startRootServer(net::Fd listener, const UniqueId& id) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(announceClosingAtExit); });
  auto server = std::make_shared<RootServer>(std::move(listener), id);
  std::thread([server] { server->run(); }).detach();
}

}  // namespace hoccl::boot
