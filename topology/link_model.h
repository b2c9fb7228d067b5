/// @file link_model.h
/// What a link of each class costs: the alpha-beta parameters per link class (self, intra-host, intra-switch,
/// inter-switch) and the shared capacities of a host's NIC and a switch's uplink. The cost model (src/sched) prices
/// schedules with it; the transports' collective shortcuts price themselves with it.
#pragma once

#include <atomic>
#include <string>

#include "hoccl/hoccl.h"

namespace hoccl::topo {

/// Link parameters. Bandwidths in bytes per second, latencies in seconds.
struct LinkModel {
  /// Per message start-up cost, by link class (Self: per local copy/reduce prim). Intra-host 0.5 us: half the
  /// round trip of an 8-byte hocclSend/hocclRecv ping-pong between two ranks of one host (`hoccl-model calibrate`:
  /// 0.63-0.72 us on the 2-core build machine under load, 0.4 us quoted in issue 17 on a quieter one; it was 2 us,
  /// never measured). The network classes are assumptions (no network here): calibrate them (docs/model.md).
  double alpha[hocclNumLinkClasses] = {0.1e-6, 0.5e-6, 15e-6, 20e-6};
  /// Peak rate of one flow, by link class (Self: local copy/reduce rate).
  double beta[hocclNumLinkClasses] = {10e9, 4e9, 1.2e9, 1.2e9};
  /// Per-step cost, by link class: what one message of a step costs beyond alpha when every rank of the job runs
  /// its steps at once (the executor's and the transport's per-message work and the wake-ups a step needs, which a
  /// lone ping-pong does not see). Added to alpha for every message of the class by both simulators. 0 unless
  /// measured: `hoccl-model calibrate` fits it from series of steps of 2-3 sizes and lengths (docs/model.md).
  double step[hocclNumLinkClasses] = {0, 0, 0, 0};
  /// Capacity of one host's NIC per direction, shared by all flows leaving (or entering) the host.
  double nic = 1.2e9;
  /// Capacity of one switch's uplink per direction, shared by all flows leaving (or entering) the switch.
  double spine = 1.2e9;
  /// Burst of a shaped uplink, bytes per direction: a token bucket of this size, refilled at `spine`, that lets a
  /// flow across the spine run faster than `spine` while it holds tokens (tc tbf, which tools/cluster/run shapes the
  /// emulated spine with: burst = rate / 100, 250 kB at 200 mbit). 0 (the default): an unshaped uplink, a steady
  /// `spine`. Only the reference simulation (sched/cost_model.h: jobs up to 8 ranks, ring chains) prices it; the
  /// fast path prices the steady rate. `hoccl-model calibrate` measures it (docs/model.md).
  double spineBurst = 0;
  /// The shm shortcuts' per-call cost (transports/shm): one arena hand-off among the ranks of a host (a cache line
  /// written by one core and read by the others), seconds, at a core per rank. 0 (the default): alpha[intra-host]
  /// / 4. A hand-off is one flag a polling peer sees, where a schedule's 8-byte message also passes the executor
  /// and the slot protocol: calibrate measured 0.22 us against 1.68 us (session 14) and 0.26 against 1.54 us
  /// (session 13) on 2 ranks here. `hoccl-model calibrate` measures it (the small shortcut's 8-byte all-reduce with
  /// every rank of the host, docs/model.md).
  double shmHandoff = 0;
  /// The rate at which one rank copies across processes through the kernel (the single-copy shortcut on ordinary
  /// buffers: process_vm_readv/writev), bytes per second, at a core per rank. 0 (the default): 1.5 x
  /// beta[intra-host]. The tuner weighs it on ordinary buffers only from 4 MiB (shm single copy's
  /// choosableOnOrdinaryBuffers), where a message's two copies through the slots stream from and to memory and one
  /// kernel copy per byte keeps its rate better: 2-rank all-gather of 8 and 32 MiB per rank, 4.0 / 3.9 GB/s pulled
  /// against 3.4 / 2.5 GB/s for the ring's message (ratios 1.2 and 1.6; docs/performance.md, "The wait policy on
  /// 4-8 ranks per core"). At 512 KiB-4 MiB per rank the two rates are close (5.65 against 5.41 GB/s, 2 ranks).
  /// `hoccl-model calibrate` measures it (the single-copy all-gather at two sizes on ordinary buffers, every rank at
  /// once).
  double shmCopy = 0;
  /// The rate at which one rank copies across processes over mapped memory (the single-copy shortcut when every
  /// rank's buffers are registered hocclMemAlloc memory: plain loads and stores), bytes per second, at a core per
  /// rank. 0 (the default): 2 x beta[intra-host], since a byte crosses memory once instead of into and out of a slot.
  /// `hoccl-model calibrate` measures it (the same all-gather on registered buffers).
  double shmMappedCopy = 0;
  /// The rate at which one rank reduces a piece it pulled from a peer into its output (the single-copy shortcut's
  /// all-reduce and reduce-scatter), bytes per second, at a core per rank. 0 (the default): beta[self].
  /// `hoccl-model calibrate` measures it (the single-copy all-reduce on ordinary buffers, against the copy rate
  /// through the kernel).
  double shmReduce = 0;
  /// The level-2 cache of one core, bytes (crowded() divides it among the ranks that take turns on the core).
  /// With llcBytes, it prices data that is still in a rank's cache (streamedBytes). 0 (the default): no cache term;
  /// the communicator of a one-host job fills it in from hwloc (topo::thisHost) where the model file leaves it 0.
  double cacheBytes = 0;
  /// The host's last-level cache, bytes: a call whose buffers on the host (every rank's input and output) take at
  /// most half of it runs from that cache whatever its schedule does, so forCall() turns the cache term off for it
  /// (half: the slots, the rest of the processes and other tenants share it; 32 MiB of buffers on this machine's
  /// 32 MiB L3 showed the full effect: 4 ranks, 4 MiB all-reduce, ring 1.70x HO-Ring at 512 KiB chunks).
  double llcBytes = 0;
  /// How much faster an intra-host message moves when its sender wrote the data in its previous step and it fits
  /// the rank's cache share with room for three more of its size (the source, the slot it passes, the receiver's
  /// destination, the next piece): its bytes count 1 / cacheGain (streamedBytes). 1.5: between the 1.3 and 1.7
  /// that the ring against HO-Ring at cache-sized chunks fit on 2 and 4 ranks (16 MiB all-reduce, docs/model.md,
  /// "The cache term"). `hoccl-model calibrate` fits it on one host (the ring against HO-Ring at the chunk the term
  /// favours, an all-reduce over twice the LLC) and writes it with the cache sizes; HOCCL_TUNE_PROBE does not.
  double cacheGain = 1.5;
  /// Cores the ranks of one host can run on (the union of their affinity masks; the communicator fills it in,
  /// the same on every rank). 0: unknown, a core per rank. With more ranks on a host than cores, what a rank's
  /// CPU does takes longer (crowded()).
  int cores = 0;
  /// The arena hand-off: shmHandoff, or alpha[intra-host] / 4 when it is 0.
  double handoff() const { return shmHandoff > 0 ? shmHandoff : alpha[hocclLinkIntraHost] / 4; }
  /// The cross-process copy rate through the kernel: shmCopy, or 1.5 x beta[intra-host] when it is 0.
  double kernelCopy() const { return shmCopy > 0 ? shmCopy : 1.5 * beta[hocclLinkIntraHost]; }
  /// The cross-process copy rate over mapped memory: shmMappedCopy, or 2 x beta[intra-host] when it is 0.
  double mappedCopy() const { return shmMappedCopy > 0 ? shmMappedCopy : 2 * beta[hocclLinkIntraHost]; }
  /// The single copy's reduction rate: shmReduce, or beta[self] when it is 0.
  double reduceRate() const { return shmReduce > 0 ? shmReduce : beta[hocclLinkSelf]; }
  /// The bytes a message costs at the link's rate: `bytes` / cacheGain for an intra-host message whose sender wrote
  /// its data in the step before (`fresh`) and whose 4 x bytes fit cacheBytes; `bytes` otherwise (and always when
  /// cacheBytes is 0).
  double streamedBytes(double bytes, hocclLinkClass_t cls, bool fresh) const {
    return fresh && cls == hocclLinkIntraHost && cacheBytes > 0 && 4 * bytes <= cacheBytes ? bytes / cacheGain : bytes;
  }
  /// This model for one call whose buffers take `hostBytes` on its busiest host (its ranks' inputs and outputs):
  /// without the cache term (cacheBytes 0) when they take at most half of llcBytes, or when llcBytes is unknown.
  LinkModel forCall(double hostBytes) const {
    LinkModel m = *this;
    if (llcBytes <= 0 || hostBytes <= llcBytes / 2) m.cacheBytes = 0;
    return m;
  }
  /// Ranks per core on a host of `ranksOnHost` ranks: max(1, ranksOnHost / cores); 1 when cores is 0.
  double crowding(int ranksOnHost) const {
    return cores > 0 && ranksOnHost > cores ? static_cast<double>(ranksOnHost) / cores : 1.0;
  }
  /// The model a host of `ranksOnHost` ranks on `cores` cores sees: every cost paid by a rank's CPU (the self and
  /// intra-host classes' latency, per-step cost and rate; the shm hand-off, copy and reduction) takes crowding()
  /// times longer, since the ranks take turns on the cores, and a rank has 1 / crowding() of a core's cache. The
  /// network classes are unchanged. The result has cores = 0 (and the derived shm values made explicit), so
  /// applying it twice changes nothing.
  LinkModel crowded(int ranksOnHost) const;
  /// The defaults, replaced by the model file HOCCL_MODEL_FILE names (if set), then overridden by HOCCL_LINK_BW_{SELF,INTRA_HOST,INTRA_SWITCH,INTER_SWITCH} (MB/s) and
  /// HOCCL_LINK_LAT_{SELF,INTRA_HOST,INTRA_SWITCH,INTER_SWITCH} (microseconds). The NIC takes the intra-switch
  /// bandwidth, the spine uplink the inter-switch bandwidth. Throws InvalidArgument on a non-positive value.
  static LinkModel fromParams();
  /// What a message of class c costs before its bytes flow: alpha[c] + step[c].
  double startup(int c) const { return alpha[c] + step[c]; }
  /// One line for logs: "self 10.0 GB/s 1.0 us, intra-host ..." (with "+ S us/step" where a step cost is set).
  std::string describe() const;
  /// The model as a JSON document: {"latency_us": {"self": .., "intra-host": .., "intra-switch": ..,
  /// "inter-switch": ..}, "bandwidth_GBps": {same keys}, "step_us": {same keys}, "nic_GBps": .., "spine_GBps": ..,
  /// "spine_burst_bytes": .., "shm": {"handoff_us": .., "copy_GBps": .., "reduce_GBps": ..}, "cache": {"l2_bytes": ..,
  /// "llc_bytes": .., "gain": ..}, "cores_per_host": .., "source": ..}
  /// (shm values and cores 0: derived / unknown, as the fields say).
  std::string toJson(const std::string& source) const;
  /// A model from such a document; keys left out keep the built-in defaults (nic and spine default to the
  /// intra-switch and inter-switch bandwidths; step_us and spine_burst_bytes to 0, as in files written before they
  /// existed; shm, cache sizes and cores_per_host to 0, the cache gain to 1.5). Throws InvalidArgument naming
  /// `origin` on bad JSON, a latency, bandwidth or cache gain that is not a positive number, or a step cost, burst,
  /// shm value, cache size or core count that is negative.
  static LinkModel fromJson(const std::string& text, const std::string& origin);
  /// Reads a model file (fromJson). Throws InvalidArgument naming the file when it cannot be read or parsed.
  static LinkModel load(const std::string& path);
};

/// Bytes moved by link class (atomics: read from any thread).
struct ByteCounters {
  std::atomic<unsigned long long> sent[hocclNumLinkClasses] = {};      ///< bytes sent
  std::atomic<unsigned long long> received[hocclNumLinkClasses] = {};  ///< bytes received
  /// Counts one exchange with a peer over link class cls.
  void count(hocclLinkClass_t cls, size_t sentBytes, size_t receivedBytes) {
    sent[cls] += sentBytes;
    received[cls] += receivedBytes;
  }
};

/// Name of a link class ("self", "intra-host", "intra-switch", "inter-switch").
const char* linkClassName(hocclLinkClass_t c);

}  // namespace hoccl::topo
