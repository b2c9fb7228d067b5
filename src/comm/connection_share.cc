/*
 * Connections shared across communicators (hocclCommSplit with config.splitShare = 1 or
 * HOCCL_COMM_SPLIT_SHARE_RESOURCES=1, what NCCL calls splitShare).
 *
 * A split normally gives the new communicator connections of its own: a second socket or shared-memory ring pair to
 * every peer it talks to, though the parent already has one to the same process. A sharing split instead borrows:
 * - The owner is the communicator that makes the connections: the parent, or the parent's own owner when the parent
 *   borrows too, so a chain of sharing splits has one owner and every channel exists once per pair of processes.
 * - Every channel of the borrower is a BorrowedChannel, a view of the owner's channel to the same process that
 *   speaks in the borrower's rank numbers (peer(), errors). A borrower connecting a peer asks the owner to connect
 *   the owner's rank of that process (Communicator::connect on the owner): lazy connections are pairwise, and the
 *   peer's borrower asks its owner for this rank in the same call, so the owners meet as for one of their own calls.
 * - A channel carries one ordered stream of messages, so the family (the owner and its borrowers) runs one call at a
 *   time: Communicator::SharedUse claims the family's connections for the length of an executor run (and of the
 *   probes at init); a member starting while another holds them fails with hocclInvalidUsage naming both instead
 *   of mixing their messages. The ranks must also order their calls on the members alike; a rank that does not
 *   (its call on the owner meets a peer's call on a borrower) makes a mismatched call: the check's fingerprint
 *   carries the communicator (comm/call_check.h), and the channels' message sizes bound the rest.
 * - A member's call that fails with messages still in flight on the shared channels (a timeout, an abort, a dead
 *   peer) leaves them out of step: the family is marked broken and every member's next call fails saying so.
 * - The borrower holds its owner alive (shared ownership), so destroying the parent first is allowed; the owner's
 *   bootstrap and transports then live until the last borrower is gone.
 * - Every rank of the new communicator must share or none: the split's first round carries each rank's wish, and
 *   sharing happens only when every member wishes it (and every member keeps no limit on its connections:
 *   HOCCL_MAX_CONNS would close channels under a borrower).
 * Not shared: the transports' collective shortcuts and host levels (shared-memory arenas of the communicator's own
 * ranks), which every communicator still makes for its own members.
 */
#include <fmt/format.h>

#include <mutex>

#include "base/error.h"
#include "base/log.h"
#include "comm/communicator.h"

namespace hoccl {
namespace {

// The borrower's view of the owner's channel to one process: everything goes to the owner's channel, but the peer is
// the borrower's rank and the owner's errors say which communicator's rank they mean.
class BorrowedChannel final : public transport::Channel {
 public:
  BorrowedChannel(transport::Channel& owned, int peer, std::string ownerName)
      : owned_(owned), peer_(peer), ownerName_(std::move(ownerName)) {}
  int peer() const override { return peer_; }
  void postSend(const void* data, size_t bytes) override { owned_.postSend(data, bytes); }
  void postTaggedSend(const void* data, size_t bytes, transport::CallTag tag) override {
    owned_.postTaggedSend(data, bytes, tag);
  }
  void postRecv(size_t bytes, transport::RecvTarget target) override { owned_.postRecv(bytes, std::move(target)); }
  bool progress() override {
    try {
      return owned_.progress();
    } catch (const Error& e) {
      throw Error(e.code(),
                  fmt::format("{} (the connection to this communicator's rank {} is {}'s, to its rank {}: "
                              "split with splitShare)",
                              e.what(), peer_, ownerName_, owned_.peer()),
                  e.isMismatch());
    }
  }
  size_t pending() const override { return owned_.pending(); }
  void waitForActivity(int timeoutMicros) override { owned_.waitForActivity(timeoutMicros); }
  // Never closed through the borrower (sharing is off under HOCCL_MAX_CONNS): closable() stays false.

 private:
  transport::Channel& owned_;
  int peer_;
  std::string ownerName_;
};

}  // namespace

void Communicator::joinShare() {
  if (!lender_.owner) {
    share_ = std::make_shared<ShareState>();
    return;
  }
  if (lender_.ownerRank.size() != static_cast<size_t>(nranks_))
    throwInternalError(fmt::format("{}: borrowing connections for {} ranks from {} owner ranks", describe(), nranks_,
                                   lender_.ownerRank.size()));
  share_ = lender_.owner->share_;
  std::lock_guard<std::mutex> lock(share_->mutex);
  ++share_->members;
}

void Communicator::leaveShare() {
  if (!lender_.owner || !share_) return;
  std::lock_guard<std::mutex> lock(share_->mutex);
  --share_->members;
}

Communicator::SharedUse::SharedUse(Communicator& comm) : comm_(&comm) {
  ShareState& s = *comm.share_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.broken.empty()) {
    comm_ = nullptr;
    throw Error(hocclInvalidUsage,
                fmt::format("{}: cannot start a call: {}. Communicators that share connections (splitShare) fail "
                            "together: destroy them and create new ones",
                            comm.describe(), s.broken),
                true);
  }
  if (s.user && s.user != &comm) {
    const std::string other = s.user->describe();
    comm_ = nullptr;
    throwInvalidUsage(fmt::format(
        "{}: cannot start a call: this communicator shares its connections with {} (a split with splitShare=1 or "
        "HOCCL_COMM_SPLIT_SHARE_RESOURCES=1), which has a call in flight. Communicators that share connections run one call at a "
        "time: wait for the other's call to complete (or its stream, for device buffers), do not put calls on both "
        "in one group, or split without splitShare",
        comm.describe(), other));
  }
  s.user = &comm;
  ++s.depth;
}

// The last claim of a run: when others share the connections, a run that ended with messages still in flight on
// them (a failed call: a timeout, an abort, a dead peer) leaves them out of step, and those messages name buffers of
// a call that is over, so no member may use them again.
Communicator::SharedUse::~SharedUse() {
  if (!comm_) return;
  ShareState& s = *comm_->share_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (--s.depth > 0) return;
  s.user = nullptr;
  if (s.members < 2 || !s.broken.empty()) return;
  const Communicator& owner = comm_->lender_.owner ? *comm_->lender_.owner : *comm_;
  for (size_t p = 0; p < owner.channels_.size(); ++p) {
    const auto& ch = owner.channels_[p];
    if (!ch || ch->pending() == 0) continue;
    s.broken = fmt::format(
        "the connections it shares were left with messages in flight (to {}'s rank {}) by a "
        "failed call of {}",
        owner.describe(), p, comm_->describe());
    HOCCL_WARN(kColl, "{}", s.broken);
    return;
  }
}

void Communicator::connectBorrowed(const std::vector<int>& peers) {
  Communicator& owner = *lender_.owner;
  std::vector<int> wanted;  // owner's ranks of the peers this communicator has no channel to yet
  for (int p : peers) {
    if (p < 0 || p >= nranks_)
      throwInternalError(fmt::format("{}: asked to connect to rank {}, out of range", describe(), p));
    if (p != rank_ && !channels_[static_cast<size_t>(p)]) wanted.push_back(lender_.ownerRank[static_cast<size_t>(p)]);
  }
  if (wanted.empty()) return;
  owner.connect(wanted);
  int added = 0;
  for (int p : peers) {
    auto& slot = channels_[static_cast<size_t>(p)];
    if (p == rank_ || slot) continue;
    slot = std::make_unique<BorrowedChannel>(owner.channel(lender_.ownerRank[static_cast<size_t>(p)]), p,
                                             owner.describe());
    ++connectedCount_;
    ++added;
  }
  HOCCL_INFO(kInit, "{}: borrowed {} more connection(s) of {} ({} in all)", describe(), added, owner.describe(),
             connectedCount_);
}

}  // namespace hoccl
