/// @file shm_single_copy.h
/// The shm shortcut for large collectives among processes of one host: after swapping buffer addresses and sizes
/// through the arena, each rank copies straight between its buffers and its peers' with process_vm_readv/writev
/// (Linux cross-memory attach), so a byte crosses memory once instead of twice (into a slot, out of it). See
/// shm_single_copy.cc for each collective's plan.
///
/// When every rank's buffers are registered memory of hocclMemAlloc (the address round carries where they lie in
/// shared memory, so every rank sees the same and takes the same path), the copies run over mappings of the peers'
/// buffers instead (shm_zero_copy.h): plain loads and stores, no system call.
///
/// Operating range: all-reduce, all-gather, reduce-scatter, broadcast and all-to-all (with a built-in op), host
/// memory, when every pair of ranks may read each other's memory (probed once at init), from a message size that is
/// the measured crossover against the slot schedules: HOCCL_CMA_MIN_BYTES when set (0 turns the shortcut off), else
/// all-gather from 32 KiB, broadcast from 128 KiB, all-reduce and reduce-scatter from 256 KiB, all-to-all from 16 MiB
/// (the larger buffer; docs/performance.md). A reduction adds its inputs in its own order (shm_single_copy.cc), or in a
/// schedule's when the call carries one (CollCall::fold), which gives that schedule's bits. On ordinary buffers (through the kernel) the tuner may choose it for
/// all-reduce, reduce-scatter and all-gather only from 4 MiB (choosableOnOrdinaryBuffers); forcing still runs it.
#pragma once

#include <memory>

#include "transports/shm/shm_peer_maps.h"
#include "transports/shm/shm_session.h"
#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// The single-copy shortcut ("single_copy").
class SingleCopyShortcut final : public Shortcut {
 public:
  /// Uses the session's arena (whose crossMemory() must be true).
  explicit SingleCopyShortcut(std::shared_ptr<ArenaSession> session);
  /// "single_copy".
  const char* name() const override { return "single_copy"; }
  /// See the operating range above.
  bool canRun(const CollCall& call) const override;
  /// All-reduce, reduce-scatter and all-gather from 4 MiB (the larger buffer), unless HOCCL_CMA_MIN_BYTES is set;
  /// every other call canRun accepts.
  bool choosableOnOrdinaryBuffers(const CollCall& call) const override;
  /// Two hand-offs around the copies of what crosses and the reduction, the copies through the kernel (shm_price.h:
  /// singleCopySeconds).
  double predictSeconds(const CollCall& call, const topo::LinkModel& model) const override;
  /// The same with the copies over mappings (zero copy), when the arena carries the shared descriptors.
  std::optional<double> predictRegisteredSeconds(const CollCall& call, const topo::LinkModel& model) const override;
  /// Yes: with CollCall::fold its all-reduce and reduce-scatter add every element in that order (a schedule's), over
  /// the kernel and over mappings alike.
  bool followsFold() const override { return true; }
  /// Starts the call: nothing happens until the first poll.
  std::unique_ptr<ShortcutOp> start(const CollCall& call) override;
  /// Starts the call for registered buffers only: declined after the address round unless every rank registered.
  std::unique_ptr<ShortcutOp> startIfRegistered(const CollCall& call) override;
  /// Unmaps the peers' registered buffers held in the cache.
  void releasePeerMemory() override { maps_->releaseAll(); }

 private:
  std::shared_ptr<ArenaSession> session_;
  std::unique_ptr<PeerMaps> maps_;  // the peers' registered buffers mapped here, cached per (peer, block)
  bool userThreshold_;              // HOCCL_CMA_MIN_BYTES was set: it applies to every collective
  size_t minBytes_;
};

}  // namespace hoccl::transport::shm
