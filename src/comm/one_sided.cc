// One-sided puts and signals between the ranks of one host (see one_sided.h).
#include "comm/one_sided.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/communicator.h"
#include "kernels/device/device.h"
#include "transports/transport_util.h"

namespace hoccl {
namespace {

constexpr int kSignals = HOCCL_ONE_SIDED_SIGNALS;
constexpr int kContexts = HOCCL_ONE_SIDED_CONTEXTS;
constexpr auto kLivenessInterval = std::chrono::milliseconds(100);

// Index of the counter (sigIdx, ctx) from `sender` in a block of nranks senders.
size_t slotOf(int nranks, int sender, int sigIdx, int ctx) {
  return (static_cast<size_t>(ctx) * kSignals + static_cast<size_t>(sigIdx)) * static_cast<size_t>(nranks) +
         static_cast<size_t>(sender);
}

std::string hostOf(const boot::RankInfo& info) { return std::string(info.hostname, strnlen(info.hostname, 64)); }

}  // namespace

OneSided::OneSided(Communicator& comm)
    : comm_(comm), rank_(comm.rank()), nranks_(comm.nranks()), peerSignals_(static_cast<size_t>(comm.nranks())),
      consumed_(static_cast<size_t>(kContexts) * kSignals * static_cast<size_t>(comm.nranks()), 0) {}

OneSided::~OneSided() {
  for (auto& [handle, w] : windows_)
    for (size_t r = 0; r < w->mapped.size(); ++r) kernels::unmapPeerShared(w->mapped[r], w->cards[r].part.fileBytes);
  for (PeerSignals& p : peerSignals_) kernels::unmapPeerShared(p.mapping, p.ref.block.fileBytes);
  try {
    kernels::sharedFree(signalBlock_);
  } catch (...) {  // never pinned; nothing to do if it were
  }
}

std::string OneSided::who() const { return comm_.describe(); }

std::string OneSided::describeRank(int r) const {
  return transport::describePeer(comm_.rankInfo()[static_cast<size_t>(r)]);
}

hocclWindow_t OneSided::registerWindow(void* base, size_t bytes) {
  Card card;
  std::memset(&card, 0, sizeof card);  // no stray bytes on the wire
  card.part.fd = -1;
  card.signals.fd = -1;
  card.pid = static_cast<int32_t>(getpid());
  card.bytes = bytes;
  card.address = reinterpret_cast<uintptr_t>(base);
  std::unique_ptr<Error> refused;
  try {
    if (!base && bytes > 0) throwInvalidArgument("buff is NULL but size is not 0");
    if (base && kernels::classify(base) == kernels::MemoryKind::Device)
      throwInvalidArgument(
          fmt::format("buff {} is device memory; hoccl's windows are host memory (allocate them "
                      "with hocclMemAlloc / ncclMemAlloc)",
                      base));
    const size_t signalBytes = consumed_.size() * sizeof(uint64_t);
    if (!signalBlock_) signalBlock_ = kernels::sharedAlloc(signalBytes);
    if (!kernels::findShared(signalBlock_, signalBytes, &card.signals))
      throwInternalError("the block of signal counters is not shared memory");
    card.signalsAddress = reinterpret_cast<uintptr_t>(signalBlock_);
    if (bytes > 0 && !kernels::findShared(base, bytes, &card.part)) card.part.fd = -1;
    card.ok = 1;
  } catch (const Error& e) {
    refused = std::make_unique<Error>(e);
  }
  std::vector<Card> cards(static_cast<size_t>(nranks_));
  cards[static_cast<size_t>(rank_)] = card;
  comm_.bootstrap().allGather(cards.data(), sizeof(Card));  // collective: every rank's part, or its refusal
  if (refused) throw *refused;
  for (int r = 0; r < nranks_; ++r)
    if (!cards[static_cast<size_t>(r)].ok)
      throwInvalidUsage(
          fmt::format("{}: {} refused its part of the window (its own error says why); nothing was "
                      "registered on any rank",
                      who(), describeRank(r)));
  for (int r = 0; r < nranks_; ++r) {
    PeerSignals& p = peerSignals_[static_cast<size_t>(r)];
    if (p.ref.block.fd >= 0) continue;  // published with an earlier window: the block lives as long as the communicator
    const Card& c = cards[static_cast<size_t>(r)];
    p.ref = SignalRef{c.signals, c.signalsAddress, c.pid};
  }
  auto w = std::make_unique<Window>();
  w->base = base;
  w->bytes = bytes;
  w->registration = comm_.registrations().add(base, bytes);
  w->cards = std::move(cards);
  w->mapped.assign(static_cast<size_t>(nranks_), nullptr);
  auto handle = reinterpret_cast<hocclWindow_t>(w.get());
  windows_.emplace(handle, std::move(w));
  return handle;
}

void OneSided::deregisterWindow(hocclWindow_t win) {
  Window& w = windowOf(win, "deregister");
  comm_.registrations().remove(w.registration);  // throws (window kept) while a collective uses the range
  for (size_t r = 0; r < w.mapped.size(); ++r) kernels::unmapPeerShared(w.mapped[r], w.cards[r].part.fileBytes);
  windows_.erase(win);
}

OneSided::Window& OneSided::windowOf(hocclWindow_t win, const char* what) {
  auto it = windows_.find(win);
  if (it == windows_.end())
    throwInvalidArgument(
        fmt::format("{}: cannot {}: window {} is not a window of this communicator (never "
                    "registered on it, or deregistered already)",
                    who(), what, static_cast<void*>(win)));
  return *it->second;
}

void OneSided::checkSignal(const char* what, int peer, int sigIdx, int ctx, unsigned flags) const {
  if (peer < 0 || peer >= nranks_)
    throwInvalidArgument(
        fmt::format("{}: {}: peer {} is not a rank of this {}-rank communicator", who(), what, peer, nranks_));
  if (sigIdx < 0 || sigIdx >= kSignals)
    throwInvalidArgument(fmt::format("{}: {}: signal index {} is out of range; hoccl offers indices 0 to {}", who(),
                                     what, sigIdx, kSignals - 1));
  if (ctx < 0 || ctx >= kContexts)
    throwInvalidArgument(fmt::format("{}: {}: context {} is out of range; hoccl offers contexts 0 to {}", who(), what,
                                     ctx, kContexts - 1));
  if (flags != 0)
    throwInvalidArgument(fmt::format("{}: {}: flags {:#x}: no flags are defined, pass 0", who(), what, flags));
}

void OneSided::requireSameHost(const char* what, int peer) const {
  const auto& ranks = comm_.rankInfo();
  const boot::RankInfo& me = ranks[static_cast<size_t>(rank_)];
  const boot::RankInfo& them = ranks[static_cast<size_t>(peer)];
  if (me.hostHash == them.hostHash) return;
  throwInvalidUsage(fmt::format(
      "{}: {}: {} runs on another host than this rank (host {}). hoccl's one-sided calls write straight into a "
      "peer's memory, which only the ranks of one host share; nothing was written. Use two-sided calls "
      "(ncclSend/ncclRecv, hocclSend/hocclRecv) for peers on other hosts",
      who(), what, describeRank(peer), hostOf(me)));
}

uint64_t* OneSided::counter(int owner, int sender, int sigIdx, int ctx) {
  if (!signalBlock_)
    throwInvalidUsage(
        fmt::format("{}: no window is registered on this communicator yet; hoccl sets the signals up "
                    "with the first window (hocclCommWindowRegister / ncclCommWindowRegister, a "
                    "collective call): register one first",
                    who()));
  const size_t slot = slotOf(nranks_, sender, sigIdx, ctx);
  if (owner == rank_) return static_cast<uint64_t*>(signalBlock_) + slot;
  PeerSignals& p = peerSignals_[static_cast<size_t>(owner)];
  if (!p.base) {
    requireSameHost("signal", owner);
    if (p.ref.pid == getpid()) {
      p.base = reinterpret_cast<uint64_t*>(p.ref.address);  // a rank of this process
    } else {
      std::string why;
      int err = 0;
      p.mapping = kernels::mapPeerShared(p.ref.pid, p.ref.block, &why, &err);
      if (!p.mapping)
        throwSystemError(fmt::format("{}: cannot map the signal counters of {}: {}. Is its process out of sight "
                                     "(separate pid namespaces)?",
                                     who(), describeRank(owner), why),
                         err);
      p.base = reinterpret_cast<uint64_t*>(static_cast<char*>(p.mapping) + p.ref.block.offset);
    }
  }
  return p.base + slot;
}

void OneSided::bump(int peer, int sigIdx, int ctx) {
  // Release: the peer's acquire of the count also sees every store of this rank before it (the put's data).
  __atomic_fetch_add(counter(peer, rank_, sigIdx, ctx), uint64_t{1}, __ATOMIC_RELEASE);
}

void OneSided::putSignal(const void* src, size_t bytes, int peer, hocclWindow_t win, size_t offset, int sigIdx, int ctx,
                         unsigned flags) {
  Window& w = windowOf(win, "put");
  checkSignal("put", peer, sigIdx, ctx, flags);
  if (!src && bytes > 0) throwInvalidArgument("localbuff is NULL but count is not 0");
  const Card& c = w.cards[static_cast<size_t>(peer)];
  if (offset > c.bytes || bytes > c.bytes - offset)
    throwInvalidArgument(
        fmt::format("{}: a put of {} bytes at offset {} does not fit the {}-byte part of window {} "
                    "that {} registered (it must end by byte {}); nothing was written",
                    who(), bytes, offset, c.bytes, static_cast<void*>(win), describeRank(peer), c.bytes));
  if (peer != rank_) requireSameHost("put", peer);
  if (bytes > 0) {
    char* dst = nullptr;
    if (peer == rank_ || c.pid == getpid()) {
      dst = reinterpret_cast<char*>(c.address) + offset;  // this rank, or a rank of this process
    } else {
      if (c.part.fd < 0)
        throwInvalidUsage(
            fmt::format("{}: {}'s part of window {} is not memory of hocclMemAlloc/ncclMemAlloc, so "
                        "this process cannot reach it; nothing was written. Allocate the windows with "
                        "ncclMemAlloc (hocclMemAlloc), or use ncclSend/ncclRecv",
                        who(), describeRank(peer), static_cast<void*>(win)));
      void*& mapped = w.mapped[static_cast<size_t>(peer)];
      if (!mapped) {
        std::string why;
        int err = 0;
        mapped = kernels::mapPeerShared(c.pid, c.part, &why, &err);
        if (!mapped)
          throwSystemError(fmt::format("{}: cannot map {}'s part of window {}: {}. Did that rank free its "
                                       "ncclMemAlloc memory while registered, or is its process out of sight "
                                       "(separate pid namespaces)?",
                                       who(), describeRank(peer), static_cast<void*>(win), why),
                           err);
      }
      dst = static_cast<char*>(mapped) + c.part.offset + offset;
    }
    std::memmove(dst, src, bytes);  // memmove: a put into this rank's own window may overlap its source
  }
  bump(peer, sigIdx, ctx);
}

void OneSided::signal(int peer, int sigIdx, int ctx, unsigned flags) {
  InFlightGuard inFlight(comm_);
  checkSignal("signal", peer, sigIdx, ctx, flags);
  if (peer != rank_) requireSameHost("signal", peer);
  bump(peer, sigIdx, ctx);
}

void OneSided::wait(int n, const hocclWaitSignalDesc_t* descs) {
  InFlightGuard inFlight(comm_);  // an abort marks the health (checked below), then waits for this call to leave
  if (n < 0) throwInvalidArgument(fmt::format("{}: nDesc is {}; it must be 0 or more", who(), n));
  if (n > 0 && !descs) throwInvalidArgument(fmt::format("{}: signalDescs is NULL but nDesc is {}", who(), n));
  struct Need {
    size_t slot;
    uint64_t target;
    const uint64_t* counter;
    int peer, sigIdx, ctx;
  };
  std::vector<Need> needs;
  for (int i = 0; i < n; ++i) {
    const hocclWaitSignalDesc_t& d = descs[i];
    checkSignal(fmt::format("wait descriptor {}", i).c_str(), d.peer, d.sigIdx, d.ctx, 0);
    if (d.opCnt < 0)
      throwInvalidArgument(fmt::format("{}: wait descriptor {}: opCnt is {}; it must be 0 or more", who(), i, d.opCnt));
    if (d.peer != rank_) requireSameHost("wait", d.peer);
    const size_t slot = slotOf(nranks_, d.peer, d.sigIdx, d.ctx);
    bool merged = false;
    for (Need& need : needs)  // the same signal twice: wait for both counts
      if (need.slot == slot) need.target += static_cast<uint64_t>(d.opCnt), merged = true;
    if (!merged)
      needs.push_back(Need{slot, consumed_[slot] + static_cast<uint64_t>(d.opCnt),
                           counter(rank_, d.peer, d.sigIdx, d.ctx), d.peer, d.sigIdx, d.ctx});
  }
  auto arrived = [](const Need& need) { return __atomic_load_n(need.counter, __ATOMIC_ACQUIRE); };
  auto missing = [&] {
    std::string text;
    for (const Need& need : needs) {
      const uint64_t got = arrived(need) - consumed_[need.slot];
      const uint64_t want = need.target - consumed_[need.slot];
      if (got >= want) continue;
      text += fmt::format("{}{} ({} of {} signal(s) on signal index {}, context {})", text.empty() ? "" : ", ",
                          describeRank(need.peer), got, want, need.sigIdx, need.ctx);
    }
    return text;
  };
  Backoff backoff(comm_.waitPolicy());
  const auto start = std::chrono::steady_clock::now();
  auto nextLiveness = start + kLivenessInterval;
  const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  for (unsigned polls = 1;; ++polls) {
    bool done = true;
    for (const Need& need : needs) done = done && arrived(need) >= need.target;
    if (done) break;
    Health& health = comm_.health();  // every poll: an abort from another thread is seen at once
    if (health.aborted() || health.failed()) health.check(who(), "hocclWaitSignal");
    if ((polls & 255) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= nextLiveness) {
        nextLiveness = now + kLivenessInterval;
        for (const Need& need : needs) {
          const boot::RankInfo& info = comm_.rankInfo()[static_cast<size_t>(need.peer)];
          if (info.pid == getpid() || transport::processAlive(info.pid) || arrived(need) >= need.target) continue;
          throwRemoteError(
              fmt::format("{}: hocclWaitSignal lost its peer {}: its process has exited or was killed "
                          "before sending the signals waited for ({}). Look at that rank's output for "
                          "the cause",
                          who(), describeRank(need.peer), missing()));
        }
      }
      if (now - start > timeout)
        throwTimeout(silentPeerMessage(who(), "hocclWaitSignal", static_cast<long long>(timeout.count()), missing()));
    }
    backoff.pause();
  }
  for (const Need& need : needs) consumed_[need.slot] = need.target;
}

OneSided& Communicator::oneSided() {
  if (!oneSided_) oneSided_ = std::make_unique<OneSided>(*this);
  return *oneSided_;
}

}  // namespace hoccl
