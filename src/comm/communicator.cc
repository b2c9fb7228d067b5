// Communicator set-up: bootstrap, topology, one channel per peer from the first transport that reaches it. Eager
// (HOCCL_CONNECT=eager): every peer is connected at init, collectively. Lazy (the default): at init each transport only
// publishes what its peers need to reach this rank later (prepare); a peer is connected the first time a call needs it
// (connect(), from the executor with every peer of the call's schedules at once, so that a transport can start every
// connection before it waits for any).
#include "comm/communicator.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <time.h>
#include <sched.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "comm/gpu_host.h"
#include "comm/host_cores.h"
#include "comm/launcher_env.h"
#include "comm/one_sided.h"
#include "comm/one_shot.h"
#include "comm/proxy.h"
#include "comm/topo_probe.h"
#include "comm/tune_probe.h"
#include "exec/device_channels.h"
#include "kernels/device/device.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "topology/host_hw.h"
#include "transports/registry.h"

namespace hoccl {
namespace {

// The host identity: HOCCL_HOSTID when set; else the launcher's index of this rank's node when it gives one
// (torchrun's GROUP_RANK, SLURM_NODEID), so that the ranks the launcher placed on one node form one host; else the
// host name and boot id (topo::localHostId).
std::string hostIdentity() {
  if (!params::HOSTID.isSet()) {
    try {
      auto info = detectLauncher();
      if (info && info->nodeIndex >= 0) return fmt::format("{}-node{}", info->launcher, info->nodeIndex);
    } catch (const Error& e) {
      HOCCL_INFO(kInit, "host identity: the launcher environment is not usable ({}); using the host name", e.what());
    }
  }
  return topo::localHostId();
}

boot::RankInfo describeSelf(const RankGpu& gpu) {
  boot::RankInfo self;
  self.pid = static_cast<int32_t>(getpid());
  std::string hostId = hostIdentity();
  std::string switchId = topo::localSwitchId(hostId);
  gethostname(self.hostname, sizeof(self.hostname) - 1);
  std::strncpy(self.hostId, hostId.c_str(), sizeof(self.hostId) - 1);
  std::strncpy(self.switchId, switchId.c_str(), sizeof(self.switchId) - 1);
  self.hostHash = topo::hashId(hostId);
  self.numaNode = topo::thisHost().currentNuma;
  // A rank on a GPU: its place in the host's GPU ring orders the host's ranks (topo::build), and its GPU's nearest
  // NIC becomes the NIC it prefers (topo::preferredNic, and the transports' ConnectContext::nic).
  self.gpuRing = gpu.place.ringPosition;
  if (!gpu.place.nicName.empty()) topo::setGpuNic(gpu.place.nicName);
  self.switchHash = switchId.empty() ? 0 : topo::hashId(switchId);
  self.cpus = usableCpuMask();  // every rank gets every mask with the rest: the host's cores (fewestHostCores)
  self.oneKernel = OneShotAllReduce::wanted() ? 1 : 0;  // no set-up round unless every rank wants it (comm/one_shot.h)
  return self;
}

// CPUs this process may run on (its affinity mask; all online CPUs when the mask cannot be read).
int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, get_nprocs());
}

// The host's runnable threads (/proc/loadavg), or -1 when it cannot be read.
int readRunnable() {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  return runnableFromLoadavg(text);
}

// readRunnable(), sampled at most every 100 ms by the whole process (the threads of a process share the sample; when
// two want a fresh one at once, one reads and the other keeps the previous value). Every call asks, so the time comes
// from the coarse clock (a kernel tick's resolution, a third of the fine clock's cost).
int runnableThreads() {
  static std::atomic<int64_t> nextSampleNs{0};
  static std::atomic<int> runnable{-1};
  constexpr int64_t kPeriodNs = 100'000'000;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const int64_t now = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  int64_t next = nextSampleNs.load(std::memory_order_relaxed);
  if (now < next || !nextSampleNs.compare_exchange_strong(next, now + kPeriodNs, std::memory_order_relaxed))
    return runnable.load(std::memory_order_relaxed);
  const int sample = readRunnable();
  runnable.store(sample, std::memory_order_relaxed);
  return sample;
}

}  // namespace

WaitPolicy Communicator::waitPolicy() const {
  if (waitPolicyForced_) return forcedWaitPolicy_;
  HostLoad load = hostLoad_;
  // Without room for every rank the load cannot change the answer: skip the sample.
  if (load.localRanks <= load.cores) load.runnable = runnableThreads();
  return chooseWaitPolicy(load);
}

Communicator::Communicator(const boot::Contact& contact, int rank, int nranks, std::string name,
                           ConnectionLender lender)
    : rank_(rank), nranks_(nranks), name_(std::move(name)), lender_(std::move(lender)) {
  joinShare();
  log::setThreadRank(rank);
  // Parameters first: a bad value fails before this rank joins the bootstrap.
  const std::string policy = params::WAIT_POLICY.get();
  if (policy != "auto") {
    waitPolicyForced_ = true;
    if (policy == "spin") forcedWaitPolicy_ = WaitPolicy::Spin;
    else if (policy == "share") forcedWaitPolicy_ = WaitPolicy::Share;
    else if (policy == "block") forcedWaitPolicy_ = WaitPolicy::Block;
    else throwInvalidArgument(fmt::format("HOCCL_WAIT_POLICY={}: expected auto, spin, share or block", policy));
  }
  // How long each phase of init took, logged once at the end (HOCCL_DEBUG=INFO): where a slow start goes.
  std::string phases;
  auto phaseStart = std::chrono::steady_clock::now();
  auto phaseDone = [&](const char* phase) {
    const auto t = std::chrono::steady_clock::now();
    phases += fmt::format("{}{} {:.0f}", phases.empty() ? "" : ", ", phase,
                          std::chrono::duration<double, std::milli>(t - phaseStart).count());
    phaseStart = t;
  };
  const RankGpu gpu = rankGpu();
  const boot::RankInfo self = describeSelf(gpu);
  phaseDone("this host");
  bootstrap_ = std::make_unique<boot::Bootstrap>(contact, rank, nranks, self, &health_);
  phaseDone("bootstrap");
  topology_ = topo::build(bootstrap_->ranks());
  phaseDone("topology");
  transports_ = transport::makeTransports();
  // Ranks sharing this machine's CPUs: by real host name, so that emulated hosts (HOCCL_HOSTID) on one machine
  // count together.
  int local = 0;
  for (const auto& info : bootstrap_->ranks())
    local += std::strcmp(info.hostname, bootstrap_->ranks()[rank].hostname) == 0;
  hostLoad_.localRanks = local;
  hostLoad_.cores = usableCpus();
  hostLoad_.hostCpus = std::max(1, get_nprocs());
  oversubscribed_ = local > hostLoad_.cores;
  HOCCL_INFO(kInit, "{}: wait policy {} ({}; {} ranks on this host, {} usable of {} CPUs, {} runnable threads)",
             describe(), waitPolicyName(waitPolicy()), waitPolicyForced_ ? "HOCCL_WAIT_POLICY" : "auto", local,
             hostLoad_.cores, hostLoad_.hostCpus, runnableThreads());

  transport::ConnectContext& ctx = connectCtx_;
  ctx.bootstrap = bootstrap_.get();
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = bootstrap_->ranks();
  ctx.health = &health_;
  ctx.jobTag = fmt::format("{:016x}-{}", bootstrap_->commTag(), ctx.peers[0].pid);
  ctx.nic = gpu.place.nicNetdev;  // the network interface of this rank's GPU's nearest NIC ("" without a GPU)
  ctx.rdmaDevice = gpu.place.nicName;  // and its RDMA device
  recorder_ = std::make_unique<FlightRecorder>(static_cast<size_t>(params::TRACE_SIZE.get()), ctx.jobTag, name_, rank,
                                               nranks);

  // Which transport carries each peer (logged per peer, with the reason, at HOCCL_DEBUG=INFO).
  transport::PeerPlan plan = transport::assignPeers(transports_, ctx);
  transportOfPeer_ = plan.transportOf;
  const std::vector<std::vector<int>>& peersOf = plan.peersOf;
  const std::string mode = params::CONNECT.get();
  if (mode != "lazy" && mode != "eager")
    throwInvalidArgument(fmt::format("HOCCL_CONNECT={}: expected lazy or eager", mode));
  lazy_ = mode == "lazy";
  channels_.resize(static_cast<size_t>(nranks));
  closing_.assign(static_cast<size_t>(nranks), 0);  // HOCCL_MAX_CONNS (comm/conn_limit.cc)
  transportIndexOf_.assign(static_cast<size_t>(nranks), -1);
  if (lender_.owner) {  // borrowed connections (comm/connection_share.cc): the owner prepared and connects them
    lazy_ = lender_.owner->lazy_;
    std::vector<int> everyone;
    for (int p = 0; p < nranks; ++p)
      if (p != rank) everyone.push_back(p);
    if (!lazy_) connectBorrowed(everyone);  // the owner connected every peer at init
  }
  for (size_t t = 0; t < transports_.size() && !lender_.owner; ++t) {
    for (int p : peersOf[t]) transportIndexOf_[static_cast<size_t>(p)] = static_cast<int>(t);
    if (lazy_ && transports_[t]->connectsLazily()) {
      transports_[t]->prepare(ctx, peersOf[t]);
      continue;
    }
    auto channels = transports_[t]->connect(ctx, peersOf[t]);
    for (auto& [peer, ch] : channels) {
      channels_[static_cast<size_t>(peer)] = std::move(ch);
      ++connectedCount_;
    }
  }
  phaseDone(lender_.owner ? "transports (borrowed)"
            : lazy_       ? "transports (lazy: prepare)"
                          : "transports (eager: connect)");
  // The transports' collective shortcuts (every rank asks every transport, in the same order).
  transport::ShortcutContext sc;
  sc.connect = &connectCtx_;
  sc.topology = &topology_;
  sc.counters = &counters_;
  sc.health = &health_;
  sc.who = describe();
  sc.oversubscribed = oversubscribed_;
  sc.registrations = &registrations_;
  for (size_t t = 0; t < transports_.size(); ++t) {
    const bool reachesAll = static_cast<int>(peersOf[t].size()) == nranks - 1;
    for (auto& s : transports_[t]->shortcuts(sc, reachesAll)) shortcuts_.push_back(std::move(s));
    if (!hostLevel_) hostLevel_ = transports_[t]->hostLevel(sc, peersOf[t], reachesAll);
  }
  {  // the online choice's agreement (comm/online_choice.h): a max of up to 3 values through the small shortcut
    transport::CollCall agree;
    agree.coll = Coll::AllReduce;
    agree.dtype = hocclFloat64;
    agree.op = hocclMax;
    agree.count = OnlineChoice::kMaxVariants;
    for (auto& s : shortcuts_)
      if (!agreeShortcut_ && std::string(s->name()) == "small" && s->canRun(agree)) agreeShortcut_ = s.get();
  }
  phaseDone("shortcuts");
  oneShot_ = OneShotAllReduce::setUp(*this);  // collective where the shortcuts exist (the same on every rank)
  phaseDone("one-kernel all-reduce");
  // The probes use the connections: a borrower's are its family's (comm/connection_share.cc).
  std::optional<SharedUse> probing;
  // Switches by measurement (HOCCL_TOPO_PROBE=1) when no rank knows its switch; the same decision on every rank.
  if (topoProbeWanted(topology_, bootstrap_->ranks())) {
    probing.emplace(*this);
    topology_ = probeTopology(*this);
  }
  hostCores_ = fewestHostCores(bootstrap_->ranks(), topology_.hostOf);  // from the masks in RankInfo: no round
  // Link parameters by measurement (HOCCL_TUNE_PROBE=1), agreed on by every rank (comm/tune_probe.h).
  if (tuneProbeWanted(topology_)) {
    if (!probing) probing.emplace(*this);
    TuneProbeResult probe = probeLinkModel(*this);
    HOCCL_INFO(kTuning, "{}: tuning probe took {:.0f} ms ({}); model: {}", describe(), probe.seconds * 1e3,
               probe.summary, probe.model.describe());
    probedModel_ = probe.model;
    probeSeconds_ = probe.seconds;
  }
  phaseDone("probes");
  HOCCL_INFO(kInit, "{}: ready ({} hosts, {} switches); init phases in ms: {}", describe(), topology_.nhosts,
             topology_.nswitches, phases);
}

Communicator::~Communicator() {
  proxy_.reset();
  leaveShare();
  deviceChannels_.clear();
  if (deviceScratch_) retiredScratch_.push_back(deviceScratch_);
  for (void* p : retiredScratch_) {
    try {
      device::current()->free(p);
    } catch (const Error& e) {
      HOCCL_WARN(kColl, "{}: freeing the device scratch: {}", describe(), e.what());
    }
  }
}

Proxy& Communicator::proxy() {
  if (!proxy_) proxy_ = std::make_unique<Proxy>(*this, device::require("a stream-ordered operation"));
  return *proxy_;
}

void Communicator::noChannel(int peer) const {
  throwInternalError(
      fmt::format("{}: no channel to rank {} (not connected: a call used a peer it did not connect "
                  "first; HOCCL_CONNECT=eager connects every peer at init)",
                  describe(), peer));
}

void Communicator::connect(const std::vector<int>& peers) {
  if (lender_.owner) return connectBorrowed(peers);
  waitForCloses(peers);  // a peer whose close was asked for (HOCCL_MAX_CONNS): settled, maybe dropped
  std::vector<std::vector<int>> byTransport(transports_.size());
  bool any = false;
  for (int p : peers) {
    if (p < 0 || p >= nranks_)
      throwInternalError(fmt::format("{}: asked to connect to rank {}, out of range", describe(), p));
    const int t = transportIndexOf_[static_cast<size_t>(p)];
    if (t < 0 || channels_[static_cast<size_t>(p)]) continue;
    std::vector<int>& list = byTransport[static_cast<size_t>(t)];
    if (std::find(list.begin(), list.end(), p) == list.end()) list.push_back(p);
    any = true;
  }
  if (!any) return;
  // Transport by transport, in priority order (every rank does the same), peers ascending.
  for (size_t t = 0; t < transports_.size(); ++t) {
    std::vector<int>& list = byTransport[t];
    if (list.empty()) continue;
    std::sort(list.begin(), list.end());
    auto channels = connectAnswering(t, list);
    for (auto& [peer, ch] : channels) {
      if (channels_[static_cast<size_t>(peer)]) continue;
      if (ch->closable()) closable_.push_back(peer);
      channels_[static_cast<size_t>(peer)] = std::move(ch);
      ++connectedCount_;
    }
    for (int p : list)
      if (!channels_[static_cast<size_t>(p)])
        throwInternalError(
            fmt::format("{}: the {} transport did not connect rank {}", describe(), transports_[t]->name(), p));
    HOCCL_INFO(kInit, "{}: connected {} more peer(s) over {} ({} in all)", describe(), list.size(),
               transports_[t]->name(), connectedCount_);
  }
}

const std::string& Communicator::transportName(int peer) const { return transportOfPeer_.at(peer); }

void* Communicator::scratch(size_t bytes) {
  if (scratch_.size() < bytes) {
    scratch_.clear();
    scratch_.shrink_to_fit();
    scratch_.resize(bytes);
  }
  return scratch_.data();
}

void* Communicator::deviceScratch(size_t bytes) {
  if (deviceScratch_ && deviceScratchBytes_ >= bytes) return deviceScratch_;
  device::Device& dev = device::require("device scratch memory");
  const size_t grown = std::max(bytes, deviceScratchBytes_ * 2);
  void* p = dev.malloc(grown);
  // The old scratch is freed with the communicator, not now: this runs on the proxy while the caller's stream waits
  // for it, and cuMemFree may wait for the whole device (at most as much again as the largest scratch is kept).
  if (deviceScratch_) retiredScratch_.push_back(deviceScratch_);
  deviceScratch_ = p;
  deviceScratchBytes_ = grown;
  return p;
}

transport::DeviceChannel& Communicator::deviceChannel(int peer) {
  transport::Channel& wire = channel(peer);
  if (deviceChannels_.empty()) deviceChannels_.resize(static_cast<size_t>(nranks_));
  auto& slot = deviceChannels_[static_cast<size_t>(peer)];
  if (!slot || &slot->wire() != &wire)
    slot = exec::makeDeviceChannel(connectCtx_, peer, wire, device::require("device buffers to a peer"));
  return *slot;
}

topo::LinkModel Communicator::tuningModel() const {
  topo::LinkModel m = probedModel_ ? *probedModel_ : topo::LinkModel::fromParams();
  if (hostCores_ > 0) m.cores = hostCores_;
  // One host: every rank reads the same hardware, so the decisions the cache term moves stay the same everywhere
  // (across hosts the caches could differ, and nothing exchanges them).
  if (topology_.nhosts == 1 && m.cacheBytes <= 0 && m.llcBytes <= 0) {
    const topo::HostHardware& hw = topo::thisHost();
    m.cacheBytes = static_cast<double>(hw.l2BytesPerCore);
    m.llcBytes = static_cast<double>(hw.llcBytes);
  }
  return m;
}

Communicator::Decision Communicator::makeDecision(const algo::Choice& choice, const sched::CollArgs& args) const {
  Decision d;
  d.choice = choice;
  if (d.choice.algorithm) {
    sched::CollArgs chosen = args;  // with the chunk the tuner chose (algo/tuner.h)
    if (d.choice.chunkCount) chosen.chunkCount = d.choice.chunkCount;
    d.schedule = std::make_shared<const sched::Schedule>(d.choice.algorithm->generate(chosen, topology_));
  }
  return d;
}

std::shared_ptr<const kernels::FoldOrder> Communicator::followedFold(const algo::Choice& a, const algo::Choice& b,
                                                                     const sched::CollArgs& args) const {
  const algo::Choice& schedule = a.algorithm ? a : b;
  const algo::Choice& shortcut = a.algorithm ? b : a;
  if (!schedule.algorithm || !schedule.algorithm->fold || !shortcut.shortcut || !shortcut.shortcut->followsFold())
    return nullptr;
  sched::CollArgs chosen = args;  // the chunk the schedule is made with (makeDecision)
  if (schedule.chunkCount) chosen.chunkCount = schedule.chunkCount;
  std::optional<kernels::FoldOrder> fold = schedule.algorithm->fold(chosen, topology_);
  return fold ? std::make_shared<const kernels::FoldOrder>(std::move(*fold)) : nullptr;
}

const Communicator::Decision& Communicator::decide(const transport::CollCall& call, const sched::CollArgs& args,
                                                   size_t elemSize) {
  const DecisionKey key{static_cast<int>(args.coll),
                        args.count,
                        args.root,
                        args.inPlace,
                        args.chunkCount,
                        elemSize,
                        static_cast<int>(call.dtype),
                        static_cast<int>(call.op),
                        static_cast<int>(call.sendKind),
                        static_cast<int>(call.recvKind)};
  if (lastKey_ && *lastKey_ == key) return lastTuned_->active();
  auto it = decisions_.find(key);
  if (it == decisions_.end()) {
    if (decisions_.size() >= 256) {  // bounded: a job rarely uses more distinct call shapes
      decisions_.clear();
      lastKey_ = nullptr;
      lastTuned_ = nullptr;
    }
    Tuned t;
    const topo::LinkModel model = tuningModel();
    t.pick = makeDecision(algo::decide(call, args, topology_, elemSize, shortcuts_, &model), args);
    static const int online = static_cast<int>(params::TUNE_ONLINE.get());
    const bool onHost = kernels::isHostKind(call.sendKind) && kernels::isHostKind(call.recvKind);
    if (online > 0 && agreeShortcut_ && onHost && call.op < hocclNumOps) {
      if (std::optional<algo::Choice> other =
              algo::runnerUp(call, args, topology_, elemSize, shortcuts_, model, t.pick.choice)) {
        // A sum or product whose bits depend on the order: both variants give the same bits when the shortcut
        // follows the schedule's fold.
        const bool sameBits = sameBitsEveryVariant(call.coll, call.dtype, call.op, nranks_);
        std::shared_ptr<const kernels::FoldOrder> fold;
        if (!sameBits) fold = followedFold(t.pick.choice, *other, args);
        if (online == 2 || fold || sameBits) {
          t.runnerUp = std::make_unique<Decision>(makeDecision(*other, args));
          t.pick.fold = fold;
          t.runnerUp->fold = fold;
          // A third variant: the best schedule of another algorithm. It adds in another order, so only where every
          // order gives the same bits (or HOCCL_TUNE_ONLINE=2 lets them change).
          std::optional<algo::Choice> third;
          if (online == 2 || sameBits)
            third = algo::otherSchedule(args, topology_, elemSize, model,
                                        t.pick.choice.algorithm ? t.pick.choice : *other);
          if (third) t.third = std::make_unique<Decision>(makeDecision(*third, args));
          t.online = std::make_unique<OnlineChoice>(third ? 3 : 2);
          HOCCL_INFO(kTuning, "{}: {} chosen online between {} and {}{}{}", describe(), transport::describeCall(call),
                     t.pick.choice.name(), other->name(),
                     third ? fmt::format(" and {}", third->name()) : std::string(),
                     fold ? " (the shortcut adds in the schedule's order)" : "");
        }
      }
    }
    it = decisions_.emplace(key, std::move(t)).first;
  }
  lastKey_ = &it->first;
  lastTuned_ = &it->second;
  return it->second.active();
}

void Communicator::agreeMax(double* values, int n) {
  if (!agreeShortcut_) throwInternalError(describe() + ": the online choice has no shortcut to agree through");
  std::vector<double> out(static_cast<size_t>(n));
  transport::CollCall c;
  c.coll = Coll::AllReduce;
  c.dtype = hocclFloat64;
  c.op = hocclMax;
  c.count = static_cast<size_t>(n);
  c.sendbuf = values;
  c.recvbuf = out.data();
  Backoff backoff(waitPolicy());
  agreeShortcut_->run(c, backoff);
  std::copy(out.begin(), out.end(), values);
}

std::string Communicator::describe() const {
  return fmt::format("{}rank {}/{} (pid {})", name_.empty() ? "" : "comm '" + name_ + "' ", rank_, nranks_, getpid());
}

}  // namespace hoccl
