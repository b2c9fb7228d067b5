/// @file communicator.h
/// The communicator: bootstrap, topology, one Channel per peer, scratch memory, counters, and the state that the C
/// API edge needs (async error, abort flag). The collectives go through group.h and the executor.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "algo/registry.h"
#include "algo/tuner.h"
#include "base/boot/bootstrap.h"
#include "base/health.h"
#include "base/wait.h"
#include "comm/flight_recorder.h"
#include "comm/online_choice.h"
#include "hoccl/hoccl.h"
#include "topology/link_model.h"
#include "topology/topology.h"
#include "kernels/registrations.h"
#include "transports/device_channel.h"
#include "transports/shortcut.h"
#include "transports/transport.h"

namespace hoccl {

using topo::ByteCounters;
class Proxy;
class OneShotAllReduce;
class OneSided;

class Communicator;

/// Connections a new communicator borrows instead of making its own (hocclCommSplit with config.splitShare = 1 or
/// HOCCL_COMM_SPLIT_SHARE_RESOURCES=1, NCCL's splitShare; comm/connection_share.cc): every channel of the new
/// communicator is the owner's channel to the same process, connected through the owner when first needed.
struct ConnectionLender {
  std::shared_ptr<Communicator> owner;  ///< whose channels (the first of a chain of sharing splits); kept alive
  std::vector<int> ownerRank;           ///< by rank of the new communicator: the same process's rank in owner
};

/// A communicator. Created by CommInitRank / CommSplit; one thread drives it at a time.
class Communicator {
 public:
  /// Connects rank `rank` of `nranks` through the bootstrap of `contact` (a unique id, or a share of several). `name`
  /// appears in logs. With a lender (`lender.owner` set) the peers' channels are the owner's (ConnectionLender).
  Communicator(const boot::Contact& contact, int rank, int nranks, std::string name, ConnectionLender lender = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int nranks() const { return nranks_; }
  /// Every rank's info.
  const std::vector<boot::RankInfo>& rankInfo() const { return bootstrap_->ranks(); }
  /// The topology (hosts, switches, link classes).
  const topo::Topology& topology() const { return topology_; }
  /// The bootstrap (for CommSplit and transports).
  boot::Bootstrap& bootstrap() { return *bootstrap_; }
  /// The channel to peer; it must be connected (connect()): an unconnected peer is hocclInternalError.
  transport::Channel& channel(int peer) {
    transport::Channel* ch = peer >= 0 && peer < nranks_ ? channels_[static_cast<size_t>(peer)].get() : nullptr;
    if (!ch) noChannel(peer);
    return *ch;
  }
  /// Whether a usable channel to peer exists (not one whose close was asked for: HOCCL_MAX_CONNS).
  bool connected(int peer) const {
    return channels_[static_cast<size_t>(peer)] != nullptr && !closing_[static_cast<size_t>(peer)];
  }
  /// Connects to every peer of `peers` not connected yet (duplicates and this rank are skipped), each through the
  /// transport chosen for it at init. Not collective: every listed peer must make the same call with this rank in
  /// its list (the peers of one call's schedules are symmetric). Nothing to do in eager mode (HOCCL_CONNECT=eager),
  /// where every peer was connected at init. Throws hocclRemoteError naming a peer that died or stayed silent.
  void connect(const std::vector<int>& peers);
  /// Whether this rank asked peer to close their idle connection and has no answer yet (HOCCL_MAX_CONNS).
  bool closing(int peer) const { return closing_[static_cast<size_t>(peer)] != 0; }
  /// HOCCL_MAX_CONNS (comm/conn_limit.cc), called by the executor: a run starts using `peers` (each once): they
  /// are kept open until endRun(); answers the peers' close handshakes on idle channels, and when more closable
  /// peers than the limit would be connected, asks idle ones to close, least recently used first. Lazy mode only.
  void beginRun(const std::vector<int>& peers);
  /// The run that began with beginRun(peers) is over.
  void endRun(const std::vector<int>& peers);
  /// Moves the close handshakes of idle channels forward without blocking and drops the channels both sides agreed
  /// to close. Returns true while a peer of `waitFor` is still closing (its connection cannot be used yet). Throws
  /// hocclRemoteError naming a peer of a run in flight (or of waitFor) that left without answering.
  bool serviceIdle(const std::vector<int>& waitFor = {});
  /// True when peers are connected on first use (HOCCL_CONNECT=lazy, the default).
  bool lazy() const { return lazy_; }
  /// Number of peers with a channel now.
  int connectedPeers() const { return connectedCount_; }
  /// True when this host runs more ranks of this communicator than this process has CPUs (an input of
  /// waitPolicy()).
  bool oversubscribed() const { return oversubscribed_; }
  /// How this communicator's waits behave now (base/wait.h): HOCCL_WAIT_POLICY when it names one, else chosen from
  /// the ranks on this host, the CPUs this process may use and the host's runnable threads (/proc/loadavg, sampled
  /// at most every 100 ms per process). Cheap: a clock read per call.
  WaitPolicy waitPolicy() const;
  /// The transport name used for peer ("shm", "tcp", "self").
  const std::string& transportName(int peer) const;
  /// Scratch memory of at least bytes (grown on demand, kept).
  void* scratch(size_t bytes);
  /// Device memory of at least bytes on the process's device, for the scratch of schedules on device buffers (grown
  /// on demand, kept until the communicator is destroyed). Only the proxy's thread uses it.
  void* deviceScratch(size_t bytes);
  /// The channel for device buffers the host cannot touch to peer (transports/device_channel.h: the direct path
  /// between the devices of one host, or the staging pipeline, exec/device_channels.h); made on first use (the peer
  /// must be connected) and kept. Only the proxy's thread uses it.
  transport::DeviceChannel& deviceChannel(int peer);
  /// Byte counters.
  ByteCounters& counters() { return counters_; }
  /// What runs a collective call, chosen once per distinct call shape by the tuner (algo/tuner.h) and cached
  /// (bounded), so that repeated calls cost a lookup: a shortcut, or an algorithm with this rank's schedule.
  struct Decision {
    algo::Choice choice;                              ///< the shortcut or the algorithm
    std::shared_ptr<const sched::Schedule> schedule;  ///< this rank's schedule when an algorithm was chosen
    /// For a shape chosen online between a schedule and a shortcut that follows its fold (kernels/fold_order.h):
    /// the schedule's fold, handed to the shortcut (CollCall::fold) so that both variants give the same bits.
    std::shared_ptr<const kernels::FoldOrder> fold;
  };
  /// See Decision. `call` and `args` describe the same call (args.rank is this rank). Where the shape is chosen
  /// online (lastOnlineChoice()), the variant the current call runs.
  const Decision& decide(const transport::CollCall& call, const sched::CollArgs& args, size_t elemSize);
  /// The online choice (comm/online_choice.h) of the shape decide() last answered for, or null when that shape is
  /// not chosen online: HOCCL_TUNE_ONLINE=0 or HOCCL_ALGO set, device buffers, ranks on several hosts (no arena to
  /// agree through), no runner-up of the other kind (algo::runnerUp), or, with HOCCL_TUNE_ONLINE=1, a call whose
  /// variants may give different bits (neither sameBitsEveryVariant nor a schedule's fold the shortcut follows).
  OnlineChoice* lastOnlineChoice() const { return lastTuned_ ? lastTuned_->online.get() : nullptr; }
  /// The schedule's fold that the shortcut of the shape decide() last answered for follows (Decision::fold), or null.
  std::shared_ptr<const kernels::FoldOrder> lastFold() const { return lastTuned_ ? lastTuned_->pick.fold : nullptr; }
  /// Replaces values[0..n) with their maximum over every rank, through the small shortcut (the online choice's
  /// agreement; only called where lastOnlineChoice() was not null).
  void agreeMax(double* values, int n);
  /// The collective shortcuts the transports offer on this communicator (transports/shortcut.h), in transport
  /// priority order; empty when none applies (e.g. ranks on several hosts).
  const std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts() const { return shortcuts_; }
  /// The host level of hierarchical all-reduce a transport offers among this host's ranks (transports/shortcut.h),
  /// or null (one host, a rank alone on its host, or no transport offers one).
  transport::HostLevel* hostLevel() const { return hostLevel_.get(); }
  /// Name used in messages: "comm <name> rank r/n".
  std::string describe() const;
  /// Aborted (hocclCommAbort, any thread) or failed somewhere in the job: every wait checks it (Health::check).
  Health& health() { return health_; }
  /// The first asynchronous error (hocclSuccess if none).
  std::atomic<int> asyncError{hocclSuccess};
  /// Number of executor runs using this communicator right now (hocclCommAbort waits for them to leave).
  std::atomic<int> inFlight{0};
  /// The buffers registered with this communicator (hocclCommRegister).
  kernels::Registrations& registrations() { return registrations_; }
  /// The sequence number of the next collective call (counts every collective enqueued on this communicator; the
  /// same on every rank that makes the same calls), then advances it.
  uint64_t nextSeq() { return collSeq_++; }
  /// The flight recorder of this communicator (flight_recorder.h).
  FlightRecorder& recorder() { return *recorder_; }
  /// The proxy that runs the stream-ordered (device-buffer) operations, made on first use on the process's device.
  Proxy& proxy();
  /// The proxy if one was made, else null.
  Proxy* proxyIfAny() const { return proxy_.get(); }
  /// The one-kernel all-reduce of small device-buffer calls (comm/one_shot.h), set up at init; null where it does
  /// not run (several hosts, no shm session, HOCCL_DEVICE_ONE_SHOT off on some rank, devices that cannot reach
  /// each other).
  OneShotAllReduce* oneShot() const { return oneShot_.get(); }
  /// The one-sided windows and signals (comm/one_sided.h), made on first use.
  OneSided& oneSided();
  /// Who lends this communicator its connections (ConnectionLender; empty owner: it has its own).
  const ConnectionLender& lender() const { return lender_; }
  /// While one exists, `comm` is the communicator using the connections it shares with others (a splitShare family:
  /// one owner and the communicators that borrow its channels). Another member starting to use them meanwhile gets
  /// hocclInvalidUsage naming both: the members of a family run one call at a time, as in NCCL. Nests; a
  /// communicator that shares nothing claims nothing that others could see.
  class SharedUse {
   public:
    /// Claims the family's connections for comm (throws hocclInvalidUsage when another member holds them).
    explicit SharedUse(Communicator& comm);
    ~SharedUse();
    SharedUse(const SharedUse&) = delete;
    SharedUse& operator=(const SharedUse&) = delete;
    SharedUse(SharedUse&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
    SharedUse& operator=(SharedUse&&) = delete;

   private:
    Communicator* comm_;
  };
  /// The link model the HOCCL_TUNE_PROBE=1 probe measured at init (the same on every rank), or null: the tuner
  /// then uses topo::LinkModel::fromParams().
  const topo::LinkModel* probedModel() const { return probedModel_ ? &*probedModel_ : nullptr; }
  /// The link model the tuner prices with: probedModel() or topo::LinkModel::fromParams(), with `cores` set to the
  /// cores the ranks of a host can run on (the fewest of any host: the union of the affinity masks of its ranks,
  /// carried in every rank's RankInfo, so the same on every rank; comm/host_cores.h), and on a one-host
  /// communicator the host's cache sizes from hwloc where the model has none (LinkModel::cacheBytes, llcBytes).
  topo::LinkModel tuningModel() const;
  /// How long rank 0's tuning probe took (the same on every rank; 0 without HOCCL_TUNE_PROBE=1).
  double probeSeconds() const { return probeSeconds_; }

 private:
  int rank_;
  int nranks_;
  Health health_;
  std::string name_;
  std::unique_ptr<boot::Bootstrap> bootstrap_;
  topo::Topology topology_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  [[noreturn]] void noChannel(int peer) const;
  ConnectionLender lender_;  // before the channels: borrowed channels point into the owner's
  struct ShareState {        // who uses a splitShare family's connections now (comm/connection_share.cc)
    std::mutex mutex;
    const Communicator* user = nullptr;  // the member whose runs hold the connections
    int depth = 0;                       // its nested claims
    int members = 1;                     // the owner and its live borrowers
    std::string broken;                  // why the connections are out of step (a member's call failed mid-way)
  };
  std::shared_ptr<ShareState> share_;
  void connectBorrowed(const std::vector<int>& peers);
  void joinShare();                       // at construction: the family's state (a new one without a lender)
  void leaveShare();                      // at destruction
  kernels::Registrations registrations_;  // before the shortcuts, which use it
  std::vector<std::unique_ptr<transport::Channel>> channels_;  // by rank; null until connected
  std::vector<int> transportIndexOf_;                          // by rank: index in transports_ (-1: this rank)
  bool lazy_ = false;
  int connectedCount_ = 0;
  // HOCCL_MAX_CONNS (comm/conn_limit.cc), by rank where a vector.
  int maxConns_ = 0;
  std::vector<uint8_t> closing_;  // a close request of this rank is unanswered: connect() waits for the answer
  std::vector<int> pinned_;       // runs in flight that use the peer
  std::vector<uint64_t> lastUse_;
  uint64_t useClock_ = 0;
  std::vector<int> closable_;  // connected peers whose channel takes part in the close handshake
  void requestIdleCloses(const std::vector<int>& peers);
  void waitForCloses(const std::vector<int>& peers);
  void dropChannel(int peer);
  std::map<int, std::unique_ptr<transport::Channel>> connectAnswering(size_t transport, const std::vector<int>& peers);
  transport::ConnectContext connectCtx_;  // kept: the shortcuts use it for the communicator's lifetime
  std::vector<std::unique_ptr<transport::Shortcut>> shortcuts_;
  std::unique_ptr<transport::HostLevel> hostLevel_;
  std::vector<std::string> transportOfPeer_;
  std::vector<char> scratch_;
  std::vector<std::unique_ptr<transport::DeviceChannel>> deviceChannels_;  // by rank; freed right after the proxy stops
  void* deviceScratch_ = nullptr;
  size_t deviceScratchBytes_ = 0;
  std::vector<void*> retiredScratch_;  // smaller scratch areas of earlier calls, freed with the communicator
  bool oversubscribed_ = false;
  std::optional<topo::LinkModel> probedModel_;  // HOCCL_TUNE_PROBE=1 (comm/tune_probe.h)
  double probeSeconds_ = 0;
  int hostCores_ = 0;              // cores the ranks of a host can run on (tuningModel()), the fewest of any host
  HostLoad hostLoad_;              // the policy's inputs but the load, fixed at init
  bool waitPolicyForced_ = false;  // HOCCL_WAIT_POLICY named one
  WaitPolicy forcedWaitPolicy_ = WaitPolicy::Spin;
  // The type and the op take part since the online choice depends on them (sameBitsEveryVariant).
  using DecisionKey = std::tuple<int, size_t, int, bool, size_t, size_t, int, int, int, int>;
  // What decide() keeps per call shape: the tuner's pick and, where the shape is chosen online, the runner-up, the
  // best schedule of another algorithm where every variant gives the same bits (algo::otherSchedule), and the online
  // state that says which of them runs.
  struct Tuned {
    Decision pick;
    std::unique_ptr<Decision> runnerUp;
    std::unique_ptr<Decision> third;
    std::unique_ptr<OnlineChoice> online;
    const Decision& active() const {
      const int v = online ? online->variant() : 0;
      return v == 1 ? *runnerUp : v == 2 ? *third : pick;
    }
  };
  std::map<DecisionKey, Tuned> decisions_;
  const DecisionKey* lastKey_ = nullptr;  // the most recent decision: repeated identical calls skip the map
  const Tuned* lastTuned_ = nullptr;
  transport::Shortcut* agreeShortcut_ = nullptr;  // the small shortcut, when it can run agreeMax's all-reduce
  Decision makeDecision(const algo::Choice& choice, const sched::CollArgs& args) const;
  // The fold of the schedule among a and b when the other is a shortcut that follows it (kernels/fold_order.h).
  std::shared_ptr<const kernels::FoldOrder> followedFold(const algo::Choice& a, const algo::Choice& b,
                                                         const sched::CollArgs& args) const;
  ByteCounters counters_;
  uint64_t collSeq_ = 0;
  std::unique_ptr<FlightRecorder> recorder_;
  std::unique_ptr<OneSided> oneSided_;  // after the registrations, which it uses
  std::unique_ptr<OneShotAllReduce> oneShot_;  // after the proxy stopped, before everything it uses
  std::unique_ptr<Proxy> proxy_;        // last: stopped first, while everything it uses still exists
};

/// Counts one running call in comm.inFlight for its lifetime, so that hocclCommAbort (another thread) can wait
/// until the call has left the communicator.
class InFlightGuard {
 public:
  /// Enters.
  explicit InFlightGuard(Communicator& comm) : count_(comm.inFlight) { ++count_; }
  /// Leaves.
  ~InFlightGuard() { --count_; }
  InFlightGuard(const InFlightGuard&) = delete;
  InFlightGuard& operator=(const InFlightGuard&) = delete;

 private:
  std::atomic<int>& count_;
};

}  // namespace hoccl

/// The C handle: the communicator plus a validity stamp. Destroyed handles keep their (small) memory with a dead
/// stamp, so that a use after destroy is reported instead of crashing.
struct hocclComm {
  static constexpr unsigned kAlive = 0x600DC033u;  ///< stamp of a live handle
  static constexpr unsigned kDead = 0xDEADC033u;   ///< stamp after destroy/abort
  std::atomic<unsigned> stamp{kAlive};             ///< kAlive while valid
  std::shared_ptr<hoccl::Communicator> impl;       ///< null while a non-blocking init runs; shared: ConnectionLender
  std::atomic<int> initResult{hocclSuccess};       ///< hocclInProgress while a non-blocking init runs
  std::string initError;                           ///< message of a failed non-blocking init (set before initResult)
  bool blocking = true;                            ///< config.blocking: split and finalize follow it
  std::atomic<int> pending{
      hocclSuccess};         ///< hocclInProgress while a non-blocking split / finalize runs, then its result
  std::string pendingError;  ///< message of a failed non-blocking split / finalize (set before pending)
  std::mutex life;           ///< a non-blocking init publishing impl against an abort
};
