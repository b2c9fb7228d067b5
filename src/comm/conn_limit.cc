/*
 * HOCCL_MAX_CONNS: the most peers a rank keeps connected over transports whose idle channels can be closed (tcp and
 * shm; the handshakes are in their folders: tcp_close.cc, shm_close.cc). Lazy connections only (HOCCL_CONNECT=lazy).
 *
 * The executor tells the communicator which peers each run uses (beginRun/endRun): those are pinned, and stamped
 * with a use clock. At the start of a run, when the closable peers connected and not closing, plus the closable peers
 * this run will connect, exceed the limit, the communicator asks idle peers (not pinned, nothing pending) to close,
 * least recently used first; it does not wait for their answers (the peer may be busy in a call that waits for this
 * rank). A run that needs a peer whose close is still being asked waits for the answer first (serviceIdle with the
 * run's peers, from the executor or connect()): ACK drops the channel and the run connects it again, NACK keeps it.
 * Every run also answers its peers' requests: at its start (when a limit is set or a request of its own is open) and
 * while it waits (the executor calls serviceIdle every few milliseconds), so a rank waiting for an answer always gets
 * one from a peer that makes the same call.
 *
 * A rank also answers while a transport connects it to the peers of a call (connectAnswering: the transport works in
 * a helper thread meanwhile), since a peer of that call may wait for an answer of this rank before it connects.
 *
 * The bound: a rank holds at most max(limit, the closable peers of its runs in flight) connections that are not
 * closing, plus those whose close it asked for and that the peer has not answered yet (the peer answers at its next
 * call or wait).
 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/communicator.h"
#include "exec/staged_channel.h"

namespace hoccl {

void Communicator::beginRun(const std::vector<int>& peers) {
  if (!lazy_) return;
  if (pinned_.empty()) {
    pinned_.assign(static_cast<size_t>(nranks_), 0);
    lastUse_.assign(static_cast<size_t>(nranks_), 0);
    maxConns_ = static_cast<int>(params::MAX_CONNS.get());
  }
  ++useClock_;
  for (int p : peers) {
    ++pinned_[static_cast<size_t>(p)];
    lastUse_[static_cast<size_t>(p)] = useClock_;
  }
  bool anyClosing = false;
  for (int p : closable_) anyClosing |= closing_[static_cast<size_t>(p)] != 0;
  if (maxConns_ > 0 || anyClosing) serviceIdle();
  if (maxConns_ > 0) requestIdleCloses(peers);
}

void Communicator::endRun(const std::vector<int>& peers) {
  if (!lazy_ || pinned_.empty()) return;
  for (int p : peers) --pinned_[static_cast<size_t>(p)];
}

void Communicator::requestIdleCloses(const std::vector<int>& peers) {
  int held = 0;
  for (int p : closable_) held += !closing_[static_cast<size_t>(p)];
  for (int p : peers) {
    const int t = transportIndexOf_[static_cast<size_t>(p)];
    held += !channels_[static_cast<size_t>(p)] && t >= 0 && transports_[static_cast<size_t>(t)]->closesIdle();
  }
  if (held <= maxConns_) return;
  std::vector<int> idle;
  for (int p : closable_) {
    const size_t i = static_cast<size_t>(p);
    if (!closing_[i] && pinned_[i] == 0 && channels_[i]->pending() == 0) idle.push_back(p);
  }
  std::sort(idle.begin(), idle.end(),
            [&](int a, int b) { return lastUse_[static_cast<size_t>(a)] < lastUse_[static_cast<size_t>(b)]; });
  for (int p : idle) {
    if (held <= maxConns_) break;
    if (!channels_[static_cast<size_t>(p)]->requestClose()) continue;  // an earlier request still unanswered
    closing_[static_cast<size_t>(p)] = 1;
    --held;
    HOCCL_INFO(kInit, "{}: asked rank {} to close their idle connection (HOCCL_MAX_CONNS={})", describe(), p,
               maxConns_);
  }
}

bool Communicator::serviceIdle(const std::vector<int>& waitFor) {
  bool waiting = false;
  for (size_t k = 0; k < closable_.size();) {
    const int p = closable_[k];
    const size_t i = static_cast<size_t>(p);
    transport::Channel& ch = *channels_[i];
    const bool needed = (!pinned_.empty() && pinned_[i] > 0) ||
                        std::find(waitFor.begin(), waitFor.end(), p) != waitFor.end();
    if (ch.pending() == 0) {
      transport::Channel::Link link;
      try {
        link = ch.serviceClose(!pinned_.empty() && pinned_[i] > 0, needed);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {}", describe(), e.what()), e.isMismatch());
      }
      if (link == transport::Channel::Link::Closed) {
        dropChannel(p);  // removes closable_[k]
        continue;
      }
      closing_[i] = link == transport::Channel::Link::Closing;
    }
    waiting |= closing_[i] && needed;
    ++k;
  }
  return waiting;
}

void Communicator::waitForCloses(const std::vector<int>& peers) {
  bool any = false;
  for (int p : peers) any |= p >= 0 && p < nranks_ && closing_[static_cast<size_t>(p)];
  if (!any) return;
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(waitPolicy());
  while (serviceIdle(peers)) {
    if (health_.aborted() || health_.failed())
      health_.check(describe(), "waiting for a peer to answer the request to close an idle connection");
    backoff.pause();
    if ((backoff.idle() & 63) == 0 && std::chrono::steady_clock::now() - start > timeout) {
      std::string who;
      for (int p : peers)
        if (p >= 0 && p < nranks_ && closing_[static_cast<size_t>(p)])
          who += fmt::format("{}rank {} (pid {})", who.empty() ? "" : ", ", p, rankInfo()[static_cast<size_t>(p)].pid);
      throw Error(hocclTimeout,
                  silentPeerMessage(describe(),
                                    "the answer to its request to close an idle connection (HOCCL_MAX_CONNS)",
                                    timeout.count(), who));
    }
  }
}

std::map<int, std::unique_ptr<transport::Channel>> Communicator::connectAnswering(size_t t,
                                                                                  const std::vector<int>& peers) {
  if (closable_.empty()) return transports_[t]->connectPeers(connectCtx_, peers);  // nothing to answer
  std::map<int, std::unique_ptr<transport::Channel>> channels;
  std::exception_ptr connectError, serviceError;
  std::atomic<bool> done{false};
  // The transport touches its own state and the context; this thread only the channels that exist already.
  std::thread worker([&] {
    try {
      channels = transports_[t]->connectPeers(connectCtx_, peers);
    } catch (...) {
      connectError = std::current_exception();
    }
    done = true;
  });
  while (!done.load()) {
    if (!serviceError) {
      try {
        serviceIdle();
      } catch (...) {
        serviceError = std::current_exception();  // after the worker is joined
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  worker.join();
  if (connectError) std::rethrow_exception(connectError);
  if (serviceError) std::rethrow_exception(serviceError);
  return channels;
}

void Communicator::dropChannel(int peer) {
  const size_t i = static_cast<size_t>(peer);
  if (!deviceChannels_.empty()) deviceChannels_[i].reset();
  channels_[i].reset();
  closing_[i] = 0;
  --connectedCount_;
  closable_.erase(std::find(closable_.begin(), closable_.end(), peer));
  HOCCL_INFO(kInit, "{}: closed the idle connection to rank {} ({} peer(s) connected, HOCCL_MAX_CONNS={})", describe(),
             peer, connectedCount_, maxConns_);
}

}  // namespace hoccl
