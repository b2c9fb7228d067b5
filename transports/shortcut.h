/// @file shortcut.h
/// Collective shortcuts: a transport may run a whole collective by a protocol of its own instead of a schedule of
/// sends and receives (shm: a one-shot exchange through a shared arena for small messages, and single copy between
/// the processes' buffers for large ones). The core asks each shortcut whether it can run a call and what it would
/// cost; the tuner (src/algo/tuner.h) compares that with the schedules' simulated times and chooses; the chosen
/// shortcut is then started and polled until done, inside or outside a group.
///
/// Rules every shortcut keeps:
/// - canRun() depends only on the call and the communicator, never on timing, so every rank answers the same;
/// - it never reads or writes a peer's memory without both sides having agreed on the call (collective, type,
///   count, op, root) and the buffer sizes; a disagreement is an error on every rank involved, naming both calls;
/// - its waits check the communicator's health (base/health.h) and the liveness of the peers they wait for, and
///   give up after HOCCL_TIMEOUT naming the silent peers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/health.h"
#include "base/wait.h"
#include "hoccl/hoccl.h"
#include "kernels/fold_order.h"
#include "kernels/memory.h"
#include "kernels/registrations.h"
#include "topology/link_model.h"
#include "topology/topology.h"
#include "transports/transport.h"

namespace hoccl::transport {

/// One collective call as a shortcut sees it (already validated by the API edge). Counts as the C API takes them.
struct CollCall {
  Coll coll = Coll::AllReduce;                               ///< which collective
  const void* sendbuf = nullptr;                             ///< input
  void* recvbuf = nullptr;                                   ///< output
  size_t count = 0;                                          ///< elements as the C API takes them
  hocclDataType_t dtype = hocclFloat;                        ///< element type
  hocclRedOp_t op = hocclSum;                                ///< sum, prod, max, min or avg (PreMulSum never takes one)
  int root = 0;                                              ///< root of a rooted collective
  kernels::MemoryKind sendKind = kernels::MemoryKind::Host;  ///< where the input lives
  kernels::MemoryKind recvKind = kernels::MemoryKind::Host;  ///< where the output lives
  /// When set (only for a shortcut whose followsFold() is true, on an all-reduce or reduce-scatter): the order in
  /// which every element must combine the ranks' inputs, over the elements of the input (a schedule's, so that the
  /// shortcut gives its bits). Null: the shortcut's own order.
  std::shared_ptr<const kernels::FoldOrder> fold;
  /// The collective's number on its communicator (1, 2, ...: the same on every rank for the same call), set once the
  /// call has started; 0 for a call the communicator makes for itself (the online choice's agreement).
  uint64_t number = 0;
};

/// "AllReduce(count=1024, float, sum)" or "Broadcast(count=8, int32, root 0)": how messages name a call.
std::string describeCall(const CollCall& call);
/// What `call` is, in one word that two ranks compare (the call board, shm_session.h; the call tag, comm/plan.h):
/// collective, type, op (reducing collectives only; every PreMulSum alike, its handles being numbered per rank),
/// host or device buffers (kShapeDeviceBit; host and shared host alike) and root (rooted collectives only). Two ranks
/// making the same call get the same word.
uint64_t callShape(const CollCall& call);
/// The bit of callShape that says the buffers are device memory.
inline constexpr uint64_t kShapeDeviceBit = uint64_t{1} << 24;
/// The call a callShape word describes, with `count` (no buffers; device buffers as Device, else Host).
CollCall callOfShape(uint64_t shape, uint64_t count);
/// Bytes of the input buffer of `call` on a communicator of `nranks` ranks.
size_t inputBytes(const CollCall& call, int nranks);
/// Bytes of the output buffer of `call` (on a rank that has an output).
size_t outputBytes(const CollCall& call, int nranks);

/// What the communicator lends its shortcuts; every pointer stays valid for the communicator's lifetime.
struct ShortcutContext {
  const ConnectContext* connect = nullptr;          ///< bootstrap, rank, ranks' info, job tag
  const topo::Topology* topology = nullptr;         ///< for the link class of each byte counted
  topo::ByteCounters* counters = nullptr;           ///< where moved bytes are counted
  const Health* health = nullptr;                   ///< checked by every wait
  std::string who;                                  ///< "comm 'x' rank 1/4 (pid 77)", for messages
  bool oversubscribed = false;                      ///< more ranks than cores on this host: yield early when waiting
  kernels::Registrations* registrations = nullptr;  ///< the communicator's registered buffers (may stay null)
};

/// One shortcut collective in flight on this rank. Never blocks.
class ShortcutOp {
 public:
  virtual ~ShortcutOp() = default;
  /// Advances as far as possible without waiting; true once this rank's part is over and no peer will touch its
  /// buffers any more. Throws hocclRemoteError naming a dead peer, hocclTimeout naming a silent one (HOCCL_TIMEOUT),
  /// hocclInvalidUsage on a mismatch or an abort.
  virtual bool poll() = 0;
  /// The peers it waits for now, for messages ("nobody" when none).
  virtual std::string missing() const = 0;
  /// After poll() returned true, for an op of Shortcut::startIfRegistered: true when some rank's buffers were not
  /// registered, so the op ended after agreeing on that (the same answer on every rank) without touching any
  /// peer's memory, and the call is still to be run another way.
  virtual bool declined() const { return false; }
};

/// A way a transport runs whole collectives on one communicator.
class Shortcut {
 public:
  virtual ~Shortcut() = default;
  /// The name HOCCL_ALGO forces it by and messages show ("small", "single_copy").
  virtual const char* name() const = 0;
  /// Whether it can run `call` (collective, op, memory kinds, size within its operating range). The same answer on
  /// every rank for the same call.
  virtual bool canRun(const CollCall& call) const = 0;
  /// Whether the tuner may choose it for `call` (canRun was true) on ordinary buffers: a shortcut whose price cannot
  /// see what makes the schedules faster in part of its range says no there (HOCCL_ALGO still forces it, and its
  /// registered path, predictRegisteredSeconds, is still weighed). The same answer on every rank. Default: yes.
  virtual bool choosableOnOrdinaryBuffers(const CollCall& /*call*/) const { return true; }
  /// Whether the online choice (src/comm/online_choice.h) may time it against the best schedule for `call` (canRun
  /// was true) and pick whichever measures faster. Default: yes.
  virtual bool worthTryingOnline(const CollCall& /*call*/) const { return true; }
  /// Whether its all-reduce and reduce-scatter honour CollCall::fold (fold every element in the order given).
  virtual bool followsFold() const { return false; }
  /// Predicted seconds for `call` with the link parameters `model` (the tuner compares it with schedules), on
  /// ordinary buffers.
  virtual double predictSeconds(const CollCall& call, const topo::LinkModel& model) const = 0;
  /// When buffers registered on every rank take a path of their own (shm single copy: over mappings instead of
  /// through the kernel), its predicted seconds for `call`; nullopt (the default) when registration changes nothing.
  /// The tuner may then choose "this shortcut if every rank registered, else a schedule" (algo/tuner.h).
  virtual std::optional<double> predictRegisteredSeconds(const CollCall& /*call*/,
                                                         const topo::LinkModel& /*model*/) const {
    return std::nullopt;
  }
  /// Starts `call` (canRun was true). The call's buffers must stay valid until the op is done.
  virtual std::unique_ptr<ShortcutOp> start(const CollCall& call) = 0;
  /// Starts `call` (canRun was true, predictRegisteredSeconds not nullopt) on condition that every rank's buffers
  /// are registered, which its first round establishes the same on every rank: otherwise the op ends there,
  /// declined(), having touched no peer's memory. Default: an internal error (no registered path).
  virtual std::unique_ptr<ShortcutOp> startIfRegistered(const CollCall& call);
  /// Runs `call` to completion on this thread, pausing with `backoff` between fruitless polls. The default starts an
  /// op and polls it; a shortcut may override it to keep its op on the stack (no allocation per call).
  virtual void run(const CollCall& call, Backoff& backoff) {
    std::unique_ptr<ShortcutOp> op = start(call);
    while (!op->poll()) backoff.pause();
  }
  /// A call of the communicator failed in a way that breaks it (a peer may have died): drop whatever of the peers'
  /// memory the shortcut keeps mapped, so a dead peer's memory is not held alive until the communicator goes. Called
  /// on the thread that made the failed call, with no op of the shortcut running. Default: nothing to drop.
  virtual void releasePeerMemory() {}
  /// This rank starts collective `call` (call.number set), by whatever path: this shortcut, another, or a schedule.
  /// A shortcut whose waits can read a record of it from the peers (shm: the arena's call board) writes it there, so
  /// that a peer waiting in the shortcut for a call this rank makes another way (device buffers here, host buffers
  /// there) learns it and fails at once instead of waiting for HOCCL_TIMEOUT. Cheap: called for every collective.
  /// Default: nothing.
  virtual void noteCall(const CollCall& /*call*/) {}
};

/// One piece of a rank's host-level share: `len` elements at element offset `off` of the host ranks' buffers (the
/// inputs it reduces from; the outputs it writes to), held at element offset `work` of this rank's working buffer
/// (all-reduce: its output, with work == off; reduce-scatter and all-gather: the schedule's scratch).
struct HostPiece {
  size_t off = 0;   ///< first element in the host ranks' input (reduction) or output (gather)
  size_t work = 0;  ///< first element in this rank's working buffer
  size_t len = 0;   ///< elements
};

/// The host level of one hierarchical collective (HO-Ring's level 0: all-reduce, reduce-scatter or all-gather) on
/// this rank, run by a transport instead of ring steps. Protocol: agree() until true (every rank of the host
/// published its buffers and made the same call); then, when mapped(), reduceScatter(work) once (all-reduce and
/// reduce-scatter), the algorithm's inter-host steps on this rank's pieces, and allGather(work) until true (every
/// collective: it ends with the closing round); when not mapped(), the algorithm runs its own host-level steps and
/// the op is done.
class HostLevelOp {
 public:
  virtual ~HostLevelOp() = default;
  /// Publishes this rank's buffers and waits (never blocks) until every rank of the host has done so for the same
  /// call: true then. Throws hocclRemoteError naming a dead peer, hocclTimeout naming a silent one (HOCCL_TIMEOUT),
  /// hocclInvalidUsage on a mismatch or an abort.
  virtual bool agree() = 0;
  /// After agree(): true when every rank of the host registered the buffers the others touch (all-reduce: input and
  /// output; reduce-scatter: input; all-gather: output) in memory the others can map. The same answer on every rank
  /// of the host.
  virtual bool mapped() const = 0;
  /// mapped(), all-reduce and reduce-scatter: reduces each piece from every host rank's input at piece.off (its
  /// own first) into `work` (this rank's working buffer) at piece.work.
  virtual void reduceScatter(char* work) = 0;
  /// mapped(), after the inter-host steps: all-reduce and all-gather copy each piece from `work` at piece.work into
  /// every host rank's output at piece.off (once; not onto itself); then it waits (never blocks) until every host
  /// rank has done the same: true then, and no peer touches this rank's buffers any more. Throws like agree().
  virtual bool allGather(const char* work) = 0;
  /// The peers it waits for now, for messages ("nobody" when none).
  virtual std::string missing() const = 0;
};

/// A transport's way to run the host level of a hierarchical collective (all-reduce, reduce-scatter, all-gather) among the ranks of this host (the shm
/// transport: through mappings of the buffers registered on every rank of the host).
class HostLevel {
 public:
  virtual ~HostLevel() = default;
  /// For messages ("shm host level").
  virtual const char* name() const = 0;
  /// The ranks of this host it groups, ascending, this rank included.
  virtual const std::vector<int>& ranks() const = 0;
  /// Whether it takes part in `call` (collective, op, memory kinds, size). The same answer on every rank of the host.
  virtual bool canRun(const CollCall& call) const = 0;
  /// Starts the host level of `call`; `mine`: the pieces this rank reduces and hands out (inside the buffers of
  /// `call`: inputBytes / outputBytes on every rank).
  virtual std::unique_ptr<HostLevelOp> start(const CollCall& call, std::vector<HostPiece> mine) = 0;
  /// Calls whose host level ran through mappings so far (tests check that the mapped path ran).
  virtual uint64_t mappedCalls() const = 0;
  /// See Shortcut::releasePeerMemory.
  virtual void releasePeerMemory() {}
};

}  // namespace hoccl::transport
