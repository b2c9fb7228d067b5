/*
 * Rank side of the bootstrap: one connection to the root (mutually authenticated, handshake.h; protocol in
 * root_server.cc) and the links of the gather tree (gather_tree.cc), over which every exchange runs.
 *
 * The constructor joins synchronously: it opens this rank's tree listener (on the address its connection to the
 * root leaves from: the interface that reaches the root reaches the other ranks), sends the handshake, JoinMessage +
 * RankInfo, and waits for kRootInfo and kRootPlan (its parent's address and its neighbours' RankInfo), or for a
 * kRootVerdict: another rank dropped out before the job assembled. Then it starts the watcher, links the tree
 * (connects to the parent, accepts the children, closes the listener), all-gathers the rank table over it and tells
 * the root that its init is complete (kRankReady). Until then the root takes its connection closing as a failure of
 * the job, and its verdict (through the watcher and the alert) ends the other ranks' waits in the tree.
 *
 * From then on one watcher thread per communicator owns every read of the root connection: it waits in poll() on the
 * socket and on an eventfd (the destructor's wake-up), parses whole messages out of what arrived, and
 *   - queues kRootError / kRootTimeout texts (a join that failed);
 *   - records kRootVerdict in the communicator's Health (Health::fail: every wait sees it with one atomic load) and
 *     signals the alert eventfd, which ends every exchange waiting in the tree;
 *   - on kRootClosing remembers that the root's process exits normally;
 *   - answers kRootPing with kRankPong (while a failure is being judged: the process is running, not stopped);
 *   - on the connection closing without kRootClosing warns that failures can no longer be shared (running
 *     operations and exchanges go on: the tree and the data path still detect a peer that really died).
 * Writes (reports, abort, goodbye) come from any thread, each message in one writeAll under a mutex, so messages
 * never interleave. The watcher never blocks anywhere but in poll(), so the destructor's wake-up always ends it at
 * once.
 *
 * An exchange that fails because of a neighbour (gather_tree.h: Blame) reports the neighbour to the root and waits
 * briefly for the verdict, so that every rank fails with the same culprit; it first tells its own neighbours that it
 * gave up (kTreeGaveUp), so that they wait for the verdict instead of blaming it.
 */
#include "base/boot/bootstrap.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/gather_tree.h"
#include "base/boot/handshake.h"
#include "base/boot/root_server.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {

// kMaxRanks allows 512 bytes a rank: a join entry (JoinMessage and RankInfo, the affinity mask included) must fit.
static_assert(sizeof(JoinMessage) + sizeof(RankInfo) <= kMaxSlotBytes / kMaxRanks, "a rank's entry outgrew kMaxRanks");

std::string describeRank(const RankInfo& info) {
  std::string host(info.hostname, strnlen(info.hostname, sizeof(info.hostname)));
  return fmt::format("rank {} (host {}, pid {})", info.rank, host.empty() ? "?" : host, info.pid);
}

std::vector<int> namedRanks(const std::string& text) {
  static const std::string kRank = "rank ", kHost = " (host ";
  std::vector<int> out;
  for (size_t at = text.find(kRank); at != std::string::npos; at = text.find(kRank, at + 1)) {
    size_t p = at + kRank.size(), digits = p;
    while (digits < text.size() && digits - p < 9 && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == p || text.compare(digits, kHost.size(), kHost) != 0) continue;
    int r = std::stoi(text.substr(p, digits - p));
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

Share shareOf(int rank, int nranks, int nIds) {
  Share s;
  s.nIds = nIds;
  s.idIndex = static_cast<int>(static_cast<int64_t>(rank) * nIds / nranks);
  // The ranks of id k are those with floor(r * nIds / nranks) == k: from ceil(k * nranks / nIds) on.
  auto first = [&](int k) { return static_cast<int>((static_cast<int64_t>(k) * nranks + nIds - 1) / nIds); };
  s.lo = first(s.idIndex);
  s.hi = std::min(nranks, first(s.idIndex + 1));
  return s;
}

class Bootstrap::Impl {
 public:
  net::Fd fd;
  net::Fd wake;   // eventfd: the destructor wakes the watcher through it
  net::Fd alert;  // eventfd: readable once a verdict is known (ends the exchanges waiting in the tree)
  std::unique_ptr<GatherTree> tree;
  std::mutex exchangeMutex;  // one exchange at a time
  std::string rootName;
  int rank = 0;
  Health* health = nullptr;
  std::vector<RankInfo> ranks;
  RootInfoWire root{};  // the root's process (kRootInfo)
  std::thread watcher;

  std::mutex writeMutex;     // one message at a time on the socket
  mutable std::mutex mutex;  // everything below
  std::condition_variable changed;
  std::deque<Error> errors;  // failed bootstrap exchanges (kRootError, kRootTimeout)
  std::optional<Verdict> verdict;
  bool rootClosing = false;  // the root announced a normal exit
  bool rootGone = false;     // the connection to the root is closed

  // Reads one message during the join (before the watcher runs); turns an error message into an Error.
  std::vector<char> receiveJoin(RootHeader* h, net::Deadline deadline) {
    std::string ctx = fmt::format("rank {}: bootstrap join with root {}", rank, rootName);
    net::readAll(fd.get(), h, sizeof(*h), deadline, ctx);
    if (h->bytes > kMaxSlotBytes)
      throwInternalError(
          fmt::format("{}: the root announced a message of {} bytes (not a hoccl root of this "
                      "version?)",
                      ctx, h->bytes));
    std::vector<char> payload(h->bytes);
    net::readAll(fd.get(), payload.data(), payload.size(), deadline, ctx);
    if (h->type == kRootError)
      throwRemoteError(fmt::format("rank {}: {}", rank, std::string(payload.begin(), payload.end())));
    if (h->type == kRootTimeout)
      throwTimeout(fmt::format("rank {}: {}", rank, std::string(payload.begin(), payload.end())));
    if (h->type == kRootVerdict) {  // the job failed before this rank's join was answered (a rank dropped out)
      std::optional<Verdict> v = decodeVerdict(payload);
      if (v) {
        record(*v);
        throwRemoteError(fmt::format("rank {}: bootstrap join with root {} stopped: {}", rank, rootName, v->text));
      }
    }
    return payload;
  }

  // A kRootVerdict's payload; nullopt when it is too short to hold one.
  static std::optional<Verdict> decodeVerdict(const std::vector<char>& payload) {
    VerdictWire w{};
    if (payload.size() < sizeof(w)) return std::nullopt;
    std::memcpy(&w, payload.data(), sizeof(w));
    Verdict v;
    v.kind = static_cast<Verdict::Kind>(std::min<uint32_t>(w.kind, uint32_t(Verdict::Kind::Reported)));
    v.culprit = w.culprit;
    v.reporter = w.reporter;
    v.text.assign(payload.begin() + sizeof(w), payload.end());
    return v;
  }

  // Sends one message (header and payload in one write). Throws on a lost connection or timeout.
  void send(uint32_t type, const void* payload, size_t bytes, net::Deadline deadline, const char* what) {
    std::vector<char> buf(sizeof(RankHeader) + bytes);
    RankHeader h{type, 0, bytes};
    std::memcpy(buf.data(), &h, sizeof(h));
    if (bytes) std::memcpy(buf.data() + sizeof(h), payload, bytes);
    std::lock_guard<std::mutex> lock(writeMutex);
    if (!fd) throwRemoteError(fmt::format("rank {}: {}: the bootstrap connection is closed", rank, what));
    net::writeAll(fd.get(), buf.data(), buf.size(), deadline, fmt::format("rank {}: {}", rank, what));
  }

  // The same, for messages whose loss does not matter to the caller (reports, abort, goodbye).
  void sendQuietly(uint32_t type, const std::string& payload, const char* what) {
    try {
      send(type, payload.data(), payload.size(), net::Clock::now() + std::chrono::seconds(2), what);
    } catch (const Error& e) {
      HOCCL_INFO(kBootstrap, "rank {}: could not send {} to the bootstrap root: {}", rank, what, e.what());
    }
  }

  // Records the first verdict (the watcher's thread, or the loss of the root).
  void record(Verdict v) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (verdict) return;
      verdict = v;
    }
    HOCCL_WARN(kBootstrap, "rank {}: the communicator failed: {}", rank, v.text);
    if (health) health->fail(v.text);
    uint64_t one = 1;
    if (alert && ::write(alert.get(), &one, sizeof(one)) != sizeof(one))
      HOCCL_WARN(kBootstrap, "rank {}: could not signal the verdict to waiting exchanges: {}", rank,
                 std::strerror(errno));
    changed.notify_all();
  }

  std::string describeRoot() const {
    std::string host(root.hostname, strnlen(root.hostname, sizeof(root.hostname)));
    for (const RankInfo& info : ranks)
      if (info.pid == root.pid && std::strncmp(info.hostname, root.hostname, sizeof(root.hostname)) == 0)
        return describeRank(info) + ", which hosted the bootstrap root at " + rootName + ",";
    return fmt::format(
        "the process hosting the bootstrap root at {} (host {}, pid {}; the process that created the "
        "unique id)",
        rootName, host.empty() ? "?" : host, root.pid);
  }

  void rootLost(const std::string& how) {
    bool closing;
    {
      std::lock_guard<std::mutex> lock(mutex);
      rootGone = true;
      closing = rootClosing;
    }
    changed.notify_all();
    if (closing) {
      HOCCL_INFO(kBootstrap, "rank {}: the bootstrap root at {} exited normally", rank, rootName);
      return;
    }
    // Not a failure of the job by itself: the root's process may have finished its part and exited without
    // running its atexit handlers (_exit after fork), while the transports still carry the others' operations. From
    // now on failures are only seen first-hand, through the data path; a rank that really died is found there.
    HOCCL_WARN(kBootstrap,
               "rank {}: {} closed its connection ({}): failures can no longer be shared between the ranks of this "
               "communicator, each rank will only notice the peers it talks to. Keep the process that hosts the root "
               "running until every rank has destroyed its communicator",
               rank, describeRoot(), how);
  }

  void dispatch(const RootHeader& h, std::vector<char> payload) {
    switch (h.type) {
      case kRootError:
      case kRootTimeout: {
        std::lock_guard<std::mutex> lock(mutex);
        errors.emplace_back(h.type == kRootTimeout ? hocclTimeout : hocclRemoteError,
                            fmt::format("rank {}: {}", rank, std::string(payload.begin(), payload.end())));
        break;
      }
      case kRootVerdict: {
        if (std::optional<Verdict> v = decodeVerdict(payload)) record(*v);
        return;
      }
      case kRootClosing: {
        std::lock_guard<std::mutex> lock(mutex);
        rootClosing = true;
        return;
      }
      case kRootPing: sendQuietly(kRankPong, std::string(), "a pong"); return;
      default: return;  // kRootInfo again, or a newer root's message: nothing to do
    }
    changed.notify_all();
  }

  // The watcher thread: see the comment at the top of this file.
  void watch() {
    std::vector<char> in;
    char chunk[64 << 10];
    while (true) {
      pollfd p[2] = {{fd.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
      int rc = ::poll(p, 2, -1);
      if (rc < 0) {
        if (errno == EINTR) continue;
        rootLost(std::string("poll failed: ") + std::strerror(errno));
        return;
      }
      if (p[1].revents) return;  // destructor
      if (!p[0].revents) continue;
      ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        rootLost(n == 0 ? "its connection closed" : std::string("connection error: ") + std::strerror(errno));
        return;
      }
      in.insert(in.end(), chunk, chunk + n);
      size_t used = 0;
      while (true) {
        const Frame f = nextRootMessage(in.data() + used, in.size() - used);
        if (f.status == Frame::Partial) break;
        if (f.status == Frame::Malformed) {
          rootLost(fmt::format("it sent a message of {} bytes, which no hoccl root of this version sends", f.bytes));
          return;
        }
        RootHeader h;
        std::memcpy(&h, in.data() + used, sizeof(h));
        const char* body = in.data() + used + sizeof(h);
        dispatch(h, std::vector<char>(body, body + h.bytes));
        used += sizeof(h) + h.bytes;
      }
      in.erase(in.begin(), in.begin() + used);
    }
  }
};

Bootstrap::Bootstrap(const UniqueId& id, int rank, int nranks, const RankInfo& self, Health* health)
    : Bootstrap(Contact(id), rank, nranks, self, health) {}

Bootstrap::Bootstrap(const Contact& contact, int rank, int nranks, const RankInfo& self, Health* health)
    : impl_(std::make_unique<Impl>()), rank_(rank), nranks_(nranks), secret_(contact.job.secret),
      commTag_(contact.job.nonce) {
  const UniqueId& root = contact.root;
  const Share& share = contact.share;
  impl_->rootName = root.root.toString();
  impl_->rank = rank;
  impl_->health = health;
  const int hi = share.hi > 0 ? share.hi : nranks;
  if (share.idIndex > 0 && rank == share.lo) {
    // NCCL's rule for several ids: the first rank of each share created its id, so its root runs in this process.
    if (!servesRoot(root))
      throwInvalidUsage(fmt::format(
          "rank {} is the first rank of the share of unique id {} (ranks {}..{} of {} with {} ids), so it must have "
          "created that id itself (hocclGetUniqueId in this process) before hocclCommInitRankScalable; its root is not "
          "served here",
          rank, share.idIndex, share.lo, hi - 1, nranks, share.nIds));
    handHeadId(root, contact.job);
  }
  net::Deadline deadline = net::defaultDeadline();
  impl_->fd = connectAuthenticated(
      [&] {
    return net::connectUntil(root.root, deadline,
                             fmt::format("rank {}: joining the bootstrap root (HOCCL_COMM_ID / unique id)", rank));
      },
      root.secret, Hello{root.nonce, rank, -1, 0}, deadline,
      fmt::format("rank {}: joining the bootstrap root at {}", rank, impl_->rootName),
      "Start every rank with the same HOCCL_AUTH_TOKEN (hoccl-run sets one for the whole job) or pass every "
      "rank the bytes of the same hocclGetUniqueId call; if they are the same, another job or program "
      "listens at that address (is HOCCL_COMM_ID's port shared with another job?)");
  // The tree listener: on the address this end of the root connection has (the interface that reaches the root).
  net::Address here;
  here.length = sizeof(here.storage);
  if (::getsockname(impl_->fd.get(), reinterpret_cast<sockaddr*>(&here.storage), &here.length) != 0)
    throwSystemError(fmt::format("rank {}: getsockname on the bootstrap connection failed", rank), errno);
  if (here.storage.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&here.storage)->sin_port = 0;
  else reinterpret_cast<sockaddr_in6*>(&here.storage)->sin6_port = 0;
  net::Address bound;
  net::Fd listener = net::listenOn(here, &bound);
  JoinMessage join{nranks, rank, share.lo, hi, share.idIndex, share.nIds, {}};
  join.listener.length = std::min<uint32_t>(bound.length, sizeof(join.listener.bytes));
  std::memcpy(join.listener.bytes, &bound.storage, join.listener.length);
  RankInfo info = self;
  info.rank = rank;
  net::writeAll(impl_->fd.get(), &join, sizeof(join), deadline, "bootstrap join");
  net::writeAll(impl_->fd.get(), &info, sizeof(info), deadline, "bootstrap join");
  // The root answers a join with missing ranks at its own HOCCL_TIMEOUT (kRootTimeout, naming them): a second more
  // here lets that answer arrive before this rank's own read gives up with less to say.
  const net::Deadline joinDeadline = deadline + std::chrono::seconds(1);
  PlanWire plan{};
  std::vector<RankInfo> known;
  while (true) {
    RootHeader h{};
    std::vector<char> payload = impl_->receiveJoin(&h, joinDeadline);
    if (h.type == kRootInfo && payload.size() >= sizeof(RootInfoWire)) {
      std::memcpy(&impl_->root, payload.data(), sizeof(RootInfoWire));
      continue;
    }
    if (h.type != kRootPlan) continue;
    const int neighbours = planNeighbours(payload.size(), sizeof(RankInfo));
    if (neighbours < 0)
      throwInternalError(fmt::format("rank {}: the bootstrap root sent a plan of {} bytes", rank, payload.size()));
    std::memcpy(&plan, payload.data(), sizeof(plan));
    known.resize(neighbours);
    if (!known.empty())  // a 1-rank plan carries no neighbours (memcpy with a null pointer is undefined)
      std::memcpy(known.data(), payload.data() + sizeof(plan), known.size() * sizeof(RankInfo));
    break;
  }
  net::Address parentAddr;
  parentAddr.length = std::min<socklen_t>(plan.parentAddr.length, sizeof(plan.parentAddr.bytes));
  std::memcpy(&parentAddr.storage, plan.parentAddr.bytes, parentAddr.length);
  impl_->wake = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl_->alert = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake || !impl_->alert)
    throwSystemError(fmt::format("rank {}: eventfd() for the bootstrap watcher failed", rank), errno);
  impl_->tree = std::make_unique<GatherTree>(rank, nranks, std::max(1, plan.fanout), describeRank(info));
  impl_->watcher = std::thread([impl = impl_.get()] { impl->watch(); });
  try {
    TreeOutcome o = impl_->tree->link(listener.get(), parentAddr, secret_, commTag_, known, deadline,
                                      impl_->alert.get());
    listener.reset();
    if (o.kind != TreeOutcome::Ok) failExchange(o.kind, o.code, o.text, "linking the bootstrap tree");
    ranks_.resize(nranks);
    ranks_[rank] = info;
    o = impl_->tree->allGather(reinterpret_cast<char*>(ranks_.data()), sizeof(RankInfo), deadline, impl_->alert.get());
    if (o.kind != TreeOutcome::Ok) failExchange(o.kind, o.code, o.text, "the bootstrap all-gather of the rank table");
  } catch (...) {
    impl_->sendQuietly(kRankGoodbye, std::string(), "goodbye");
    impl_->tree.reset();
    uint64_t one = 1;
    if (::write(impl_->wake.get(), &one, sizeof(one)) != sizeof(one)) std::abort();  // the watcher would never end
    impl_->watcher.join();
    throw;
  }
  for (int r = 0; r < nranks; ++r) ranks_[r].rank = r;
  impl_->ranks = ranks_;
  // From now on this rank's connection closing alone fails nothing (before, it fails the job at once: root_server.cc).
  impl_->sendQuietly(kRankReady, std::string(), "the end of its init");
  HOCCL_INFO(kBootstrap, "rank {}/{} joined the bootstrap at {} (tree parent {}, {} children)", rank, nranks,
             impl_->rootName, plan.parent, impl_->tree->place().children.size());
}

Bootstrap::~Bootstrap() {
  if (!impl_->watcher.joinable()) return;
  impl_->sendQuietly(kRankGoodbye, std::string(), "goodbye");
  impl_->tree.reset();  // kTreeBye to the neighbours (after the goodbye: the root never blames a rank that left)
  uint64_t one = 1;
  if (::write(impl_->wake.get(), &one, sizeof(one)) != sizeof(one))
    HOCCL_WARN(kBootstrap, "rank {}: could not wake the bootstrap watcher: {}", rank_, std::strerror(errno));
  impl_->watcher.join();
}

void Bootstrap::failExchange(int kind, int code, const std::string& text, const char* what) {
  auto verdictText = [&]() -> std::optional<std::string> {
    std::optional<Verdict> v = verdict();
    if (v) return v->text;
    return std::nullopt;
  };
  if (kind == TreeOutcome::Verdict) {
    const std::string v = verdictText().value_or("a verdict");
    // Not a plain goodbye: a neighbour still in the exchange would blame this rank for leaving. "Gave up, reported"
    // makes it wait for the same verdict (the root sends it to every rank).
    if (impl_->tree) impl_->tree->leave(v, true);
    throwRemoteError(fmt::format("rank {}: {} stopped: {}", rank_, what, v));
  }
  // The neighbours waiting for this rank learn at once that it gave up, and why (they wait for the verdict).
  if (impl_->tree) impl_->tree->leave(text, kind != TreeOutcome::Local);
  if (kind == TreeOutcome::Local)
    throw Error(static_cast<hocclResult_t>(code), fmt::format("rank {}: {} failed: {}", rank_, what, text));
  if (kind == TreeOutcome::Blame) {
    const std::string v = shareFailure(text);
    throw Error(v.empty() ? static_cast<hocclResult_t>(code) : hocclRemoteError,
                fmt::format("rank {}: {} failed: {}", rank_, what, v.empty() ? text : v));
  }
  // Follow: the failure is elsewhere and already reported; its verdict gives every rank the same words.
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->changed.wait_for(lock, std::chrono::seconds(5), [&] { return impl_->verdict || impl_->rootGone; });
  }
  if (auto v = verdictText()) throwRemoteError(fmt::format("rank {}: {} stopped: {}", rank_, what, *v));
  throw Error(static_cast<hocclResult_t>(code), fmt::format("rank {}: {} stopped: {}", rank_, what, text));
}

void Bootstrap::allGather(void* data, size_t bytes) {
  if (auto v = verdict()) throwRemoteError(fmt::format("rank {}: bootstrap all-gather stopped: {}", rank_, v->text));
  if (bytes > kMaxSlotBytes / static_cast<size_t>(nranks_))
    throwInvalidArgument(
        fmt::format("rank {}: bootstrap all-gather of {} x {} bytes is larger than the bootstrap "
                    "carries",
                    rank_, nranks_, bytes));
  std::lock_guard<std::mutex> lock(impl_->exchangeMutex);
  if (!impl_->tree) throwRemoteError(fmt::format("rank {}: bootstrap all-gather after a failed one", rank_));
  const TreeOutcome o = impl_->tree->allGather(static_cast<char*>(data), bytes, net::defaultDeadline(),
                                               impl_->alert.get());
  if (o.kind != TreeOutcome::Ok) failExchange(o.kind, o.code, o.text, "bootstrap all-gather");
}

void Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  allGather(dummy.data(), 1);
}

void Bootstrap::reportFailure(const std::string& message, bool mismatch) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->verdict || impl_->rootGone) return;
  }
  impl_->sendQuietly(mismatch ? kRankMismatch : kRankReport, message.substr(0, kMaxReportBytes), "a failure report");
}

void Bootstrap::reportAbort() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->verdict || impl_->rootGone) return;
  }
  impl_->sendQuietly(kRankAbort, std::string(), "the abort notice");
}

std::string Bootstrap::shareFailure(const std::string& message, std::chrono::milliseconds wait, bool mismatch) {
  reportFailure(message, mismatch);
  std::optional<Verdict> v;
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->changed.wait_for(lock, wait, [&] { return impl_->verdict || impl_->rootGone; });
    v = impl_->verdict;
  }
  if (!v || v->culprit < 0) return "";
  if (message.find(v->text) != std::string::npos) return "";  // the failure is the verdict itself
  // The root chose this rank's own report: its message is the first-hand one, unless the root had to find the culprit
  // itself (a stall: the report may name several peers it waited for, and the verdict names the one that stalled).
  if (v->reporter == rank_ && (v->kind != Verdict::Kind::Stalled || v->culprit == rank_)) return "";
  return v->text;
}

std::optional<Verdict> Bootstrap::verdict() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->verdict;
}

}  // namespace hoccl::boot
