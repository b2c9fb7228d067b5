/// @file shm_small.h
/// The shm shortcut for small collectives among ranks that share a host: one arena round (shm_session.h) per call,
/// so an 8-byte all-reduce costs about one cache-line round trip instead of a trip through planning, the executor
/// and the slot channels. See shm_small.cc for what each collective publishes and computes.
///
/// Operating range: all-reduce, reduce, broadcast, all-gather and reduce-scatter with a built-in op, host memory,
/// and a per-rank payload of at most min(arena, 2 KiB x ranks) — the measured crossover against the slot schedules
/// (docs/performance.md). Parameter: HOCCL_SMALL_MAX_BYTES (the arena's payload per rank; 0 turns the arena off).
#pragma once

#include <memory>

#include "transports/shm/shm_session.h"
#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// The small one-shot shortcut ("small").
class SmallShortcut final : public Shortcut {
 public:
  /// Uses the session's arena.
  explicit SmallShortcut(std::shared_ptr<ArenaSession> session) : session_(std::move(session)) {}
  /// "small".
  const char* name() const override { return "small"; }
  /// See the operating range above.
  bool canRun(const CollCall& call) const override;
  /// One hand-off plus every rank combining every payload locally (shm_price.h: smallSeconds).
  /// No: its calls take about a microsecond, where two clock reads are a good part of them, and it hands cache
  /// lines between the cores as the schedules' slots do, so far cores slow both (docs/performance.md, "Near and
  /// far cores").
  bool worthTryingOnline(const CollCall& /*call*/) const override { return false; }
  double predictSeconds(const CollCall& call, const topo::LinkModel& model) const override;
  /// Starts the call's arena round.
  std::unique_ptr<ShortcutOp> start(const CollCall& call) override;
  /// Runs the call with its op on the stack.
  void run(const CollCall& call, Backoff& backoff) override;
  /// Writes the call on this rank's call board in the arena (shm_session.h), which the single-copy shortcut's
  /// waits read too (they share the session).
  void noteCall(const CollCall& call) override { session_->noteCall(call); }

 private:
  std::shared_ptr<ArenaSession> session_;
};

}  // namespace hoccl::transport::shm
