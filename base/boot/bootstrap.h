/// @file bootstrap.h
/// The bootstrap network: how ranks find each other before any transport exists. Every rank joins the root of its
/// unique id (proving the job secret) and opens a listener; the root tells each rank its parent in a gather tree
/// over the ranks (tree_shape.h), and all-gathers and barriers then go over that tree, rank to rank (gather_tree.h),
/// not through the root. Each rank keeps its connection to the root for the communicator's lifetime as the job's
/// side channel for failures: a rank that detects a failure reports it, the root picks one culprit for the whole
/// communicator and tells every rank (a Verdict, recorded in the communicator's Health), and a rank that aborts
/// releases all others. With several unique ids (hocclCommInitRankScalable) each id's root meets only its share of
/// the ranks. The protocol is described at the top of root_server.cc.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "hoccl/hoccl.h"
#include "base/health.h"
#include "base/socket.h"

namespace hoccl::boot {

/// What every rank tells the others at init.
struct RankInfo {
  int32_t rank = -1;        ///< rank in the communicator
  int32_t pid = 0;          ///< process id
  uint64_t hostHash = 0;    ///< host identity (topo::localHostId hashed, topology/topology.h), HOCCL_HOSTID overrides
  uint64_t switchHash = 0;  ///< switch identity (0 = unknown)
  char hostname[64] = {};   ///< for messages
  char hostId[64] = {};     ///< the host id string (hostname+boot id, or HOCCL_HOSTID)
  char switchId[64] = {};   ///< the switch id string ("" = unknown)
  int32_t numaNode = -1;    ///< NUMA node the rank runs on (hwloc; -1 = unknown): orders the ranks of a host
  int32_t gpuRing = -1;     ///< position of the rank's GPU in its host's GPU ring (topology/gpu_topology.h; -1 = none)
  /// 1 when the rank wants the one-kernel all-reduce (HOCCL_DEVICE_ONE_SHOT, src/comm/one_shot.h): its set-up rounds
  /// run only when every rank does, so a job where any rank does not pays no round for it.
  int32_t oneKernel = 0;
  int32_t reserved = 0;  ///< zero: no padding travels
  /// CPUs the rank may run on (its affinity mask; all online CPUs when the mask cannot be read; empty = unknown). The
  /// union over a host's ranks gives the host's cores for the tuner (comm/host_cores.h), with no extra round.
  cpu_set_t cpus = {};
};
// RankInfo travels as raw bytes (the join, the plan, the all-gather).
static_assert(std::is_trivially_copyable_v<RankInfo>, "RankInfo is sent as raw bytes");

/// The decoded contents of a hocclUniqueId.
struct UniqueId {
  uint32_t magic = 0;    ///< kUniqueIdMagic
  uint32_t version = 0;  ///< HOCCL_VERSION_CODE
  net::Address root;     ///< root's bootstrap listener
  net::Secret secret{};  ///< 128-bit job secret
  uint64_t nonce = 0;    ///< distinguishes communicators created from the same root process
};
/// Magic number at the start of a hocclUniqueId.
constexpr uint32_t kUniqueIdMagic = 0x484f4343;  // "HOCC"

/// Packs id into the 128-byte public form.
hocclUniqueId encode(const UniqueId& id);
/// Unpacks; throws InvalidArgument when the magic or version is wrong.
UniqueId decode(const hocclUniqueId& id);
/// Creates a unique id whose root is this process: starts a listener that serves the bootstrap of one communicator
/// (kept in a process-wide table until that communicator's init is complete or the process exits).
UniqueId createUniqueId();
/// The unique id for a launcher-style init: root HOCCL_COMM_ID (host:port), secret from HOCCL_AUTH_TOKEN (hex or
/// text, hashed) — rank 0 serves it. Throws InvalidUsage with advice when the variables are missing.
UniqueId uniqueIdFromEnvironment(int rank);
/// The unique id of a job whose root address (`commId`, host:port) and secret (`token`) every rank computed the same
/// way; rank 0 listens on commId and serves it. `origin` says where commId came from, for the log.
UniqueId uniqueIdFor(const std::string& commId, const std::string& token, int rank, const std::string& origin);

/// "rank r (host h, pid p)": how every failure message names a rank (the words of transport::describePeer).
std::string describeRank(const RankInfo& info);
/// The ranks that `text` names in the describeRank form ("rank N (host "), in order of first appearance, without
/// duplicates. The root reads a failure report's suspects this way.
std::vector<int> namedRanks(const std::string& text);

/// The root's one decision about a failed communicator, the same on every rank.
struct Verdict {
  /// What happened to the culprit.
  enum class Kind : uint32_t {
    Died = 0,      ///< its connection to the root closed without a goodbye while others needed it (killed, crashed)
    Aborted = 1,   ///< it called hocclCommAbort
    Left = 2,      ///< it had destroyed its communicator while others still waited for it (mismatched calls)
    Stalled = 3,   ///< alive and connected, but others gave up waiting for it (stopped, stuck, other operation)
    Reported = 4,  ///< it reported a failure of its own that names no peer
  };
  Kind kind = Kind::Reported;  ///< see Kind
  int culprit = -1;            ///< the rank blamed (-1: unknown, e.g. the root's process when it hosts no rank)
  int reporter = -1;           ///< the rank whose report led to it (-1: none)
  std::string text;            ///< for people; starts with describeRank(culprit) when the culprit is a rank
};

/// Which root a rank joins when a communicator has several unique ids (hocclCommInitRankScalable).
struct Share {
  int idIndex = 0;  ///< the id of this rank's root (0: the head root)
  int nIds = 1;     ///< ids in all
  int lo = 0;       ///< first rank that joins the same root
  int hi = 0;       ///< one past the last (0: nranks)
};
/// The share of `rank` among `nranks` ranks and `nIds` ids, as NCCL documents it: rank r joins id
/// floor(r * nIds / nranks), so every id serves a contiguous range of ranks and its first rank creates it.
Share shareOf(int rank, int nranks, int nIds);

/// Whom a rank contacts at init: the root of its share's id, and the first id (the job's secret and tag).
struct Contact {
  UniqueId root;  ///< the id whose root this rank joins
  UniqueId job;   ///< the first id: secret and tag of every rank-to-rank connection
  Share share;    ///< this rank's share (hi 0: every rank)
  /// A plain init: one id for everything.
  Contact(const UniqueId& id) : root(id), job(id) {}  // NOLINT(google-explicit-constructor): a plain init is an id
  /// Several ids: this rank's root, the first id, its share.
  Contact(const UniqueId& r, const UniqueId& j, const Share& s) : root(r), job(j), share(s) {}
};

/// A connected bootstrap for one communicator.
class Bootstrap {
 public:
  /// Connects rank `rank` of `nranks` to the root of `id`, links it into the gather tree and all-gathers every
  /// rank's RankInfo. Rank 0 of a HOCCL_COMM_ID init also hosts the root. Throws hocclTimeout when ranks are missing
  /// at HOCCL_TIMEOUT (naming them), InvalidUsage on a bad secret. Then watches the root connection from a background
  /// thread: the root's verdict, or the loss of the root, is recorded in `health` (when given) with Health::fail.
  Bootstrap(const UniqueId& id, int rank, int nranks, const RankInfo& self, Health* health = nullptr);
  /// The same for a communicator of several ids: joins contact.root (the id of this rank's share), and uses
  /// contact.job (the first id) for the secret and tag of every rank-to-rank connection. The first rank of a share other than the
  /// first must be the process that created its id (it hands that root the first id).
  Bootstrap(const Contact& contact, int rank, int nranks, const RankInfo& self, Health* health = nullptr);
  /// Says goodbye to the root (so that this rank is never blamed for leaving), stops the watcher and disconnects.
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int nranks() const { return nranks_; }
  /// Every rank's info, indexed by rank.
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  /// The job secret (transports use it to authenticate their own connections).
  const net::Secret& secret() const { return secret_; }
  /// A 64-bit tag unique to this communicator (for connection hellos and shared-memory names).
  uint64_t commTag() const { return commTag_; }
  /// All-gather over the gather tree: data holds nranks slots of `bytes` bytes; this rank's slot is filled in, the
  /// others are received. Collective; one at a time. Throws hocclTimeout when a neighbour gives no answer within
  /// HOCCL_TIMEOUT, hocclRemoteError on a failure (the root's verdict: the same culprit on every rank).
  void allGather(void* data, size_t bytes);
  /// Waits until every rank has called barrier().
  void barrier();

  /// Tells every rank of the communicator, through the root, that a failure happened; `message` names the suspect
  /// rank(s) as describeRank does. The root weighs all reports (and the connections it saw close) and sends one
  /// Verdict naming one culprit to every rank; on each rank the first verdict wins. Never throws; does nothing once a
  /// verdict is known or the root is gone.
  /// `mismatch`: this rank compared the calls and found them different (the verdict then says so instead of blaming
  /// the rank it names for stalling).
  void reportFailure(const std::string& message, bool mismatch = false);
  /// Tells every rank that this rank aborted the communicator (hocclCommAbort): the root's verdict names this rank
  /// and releases every other rank's waits. Never throws.
  void reportAbort();
  /// For a rank whose operation failed with `message`: reports it (unless a verdict is already known) and waits up
  /// to `wait` for the root's verdict. Returns the verdict's text when the operation should fail with it instead of
  /// `message` (the job's culprit and what happened to it, the same words on every rank); "" when `message` is the
  /// verdict already, when the root chose this rank's own report (its message is the first-hand account), or when
  /// no verdict came.
  std::string shareFailure(const std::string& message, std::chrono::milliseconds wait = std::chrono::seconds(2),
                          bool mismatch = false);
  /// The verdict received from the root, or the loss of the root; nullopt while the communicator is healthy.
  std::optional<Verdict> verdict() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int rank_;
  int nranks_;
  [[noreturn]] void failExchange(int kind, int code, const std::string& text, const char* what);
  std::vector<RankInfo> ranks_;
  net::Secret secret_{};
  uint64_t commTag_ = 0;
};

}  // namespace hoccl::boot
