/// @file online_choice.h
/// The online choice between the tuner's pick and its runner-up of the other kind (a schedule over the shm slots
/// against the single copy through the kernel), and where every variant gives the same bits the best schedule of
/// another algorithm, for one call shape, from the times of the calls themselves.
///
/// Why: the cost model has one intra-host rate per host, but what the slots cost depends on whether the ranks' cores
/// share a last-level cache, and on the build machines that changes under a running job (docs/performance.md, "Near
/// and far cores": the slots 2-7x slower on far cores, the single copy unchanged). A per-shape choice from measured
/// times follows it; so does a host whose ranks are spread over CCDs or sockets.
///
/// How (every rank runs the same state machine on the same call count, so every rank runs the same variant):
///   1. the first kStartAfter - 1 calls run the tuner's pick: a shape called only a few times (a short benchmark, an
///      initialisation) gets the model's choice alone, and pays nothing for measuring;
///   2. exploration: a block of kBlock calls of the runner-up (then one of the third variant, where there is one).
///      Only the second half of a run of one variant is timed (the last kBlock / 2 calls of a block; the pick's calls
///      before it): a variant's first calls in a run are slower (on the build machine the ring's 2 MiB all-gather
///      took 8-10 calls of a run to come down from 2-3x its steady time), and a rank can leave a ring call while its
///      last messages still wait in the slots, so the next call of the other variant waits for them;
///   3. agreement at the end of the last block (inside the same API call on every rank, so no other call can come
///      between, nor can a mismatched call meet it): every rank's median of its recent timed calls per variant, the
///      maximum over the ranks (an all-reduce through the caller's `Agree`), so every rank decides alike;
///   4. the current winner stays unless another measures more than kSwitchMargin faster twice in a row: a first
///      such agreement clears every window and runs another kBlock calls of the winner, then another block of the
///      fastest challenger alone, then agrees again (a burst of slow calls in one window - another process, the
///      vCPUs moving - must not hand the shape to the slower variant for a whole interval);
///   5. re-check: after an interval sized so that the blocks of the losers and the slow first calls after each
///      cost under kOverheadShare of the interval's time, another block of each loser and an agreement against the
///      winner's recent median; the choice may flip either way.
/// The call count alone says when to explore, re-check and agree, never a clock, so a slow rank cannot make ranks
/// disagree. Pure logic: the caller measures the calls and provides the agreement.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/collective.h"
#include "hoccl/hoccl.h"

namespace hoccl {

/// Whether every way of running a call gives the same bits: collectives that only move data, min and max, integer
/// sums and products (wrap-around arithmetic: any order gives the same), and sums and products of two ranks (one
/// operation per element, and a + b == b + a). HOCCL_TUNE_ONLINE=1 tries these, and the other sums, products and
/// averages where the shortcut adds in the schedule's order (kernels/fold_order.h; Communicator::decide). Not
/// PreMulSum.
bool sameBitsEveryVariant(Coll coll, hocclDataType_t dtype, hocclRedOp_t op, int nranks);

/// Online choice between the variants of one call shape: 0 (the tuner's pick), 1 (the runner-up of the other kind)
/// and, where there is one, 2 (the best schedule of another algorithm; Communicator::decide). A re-check runs a
/// block of each variant other than the winner, one after the other, then agrees; a confirmation runs a block of
/// the challenger that won the last agreement only.
class OnlineChoice {
 public:
  /// Most variants of one shape.
  static constexpr int kMaxVariants = 3;
  /// A choice among `variants` (2 or 3; others are clamped to that range).
  explicit OnlineChoice(int variants = 2) : variants_(std::clamp(variants, 2, kMaxVariants)) {}
  /// How many variants it chooses among.
  int variants() const { return variants_; }

  /// Replaces `values[0..n)` with their maximum over every rank (the same on all afterwards).
  using Agree = std::function<void(double* values, int n)>;

  /// How much faster (a fraction) the other variant must measure to replace the current winner.
  static constexpr double kSwitchMargin = 0.05;
  /// The call of a shape that starts the exploration (the calls before it run the tuner's pick).
  static constexpr uint64_t kStartAfter = 64;
  /// Calls in a block of the runner-up or the loser (the last half of them timed).
  static constexpr int kBlock = 16;
  /// The loser's extra time over a re-check interval, as a share of the interval's calls.
  static constexpr double kOverheadShare = 0.02;
  /// The winner's untimed calls after a block of the other variant, counted as a re-check's cost at twice their time
  /// (a temporary per-call trace: the ring's first calls of a run took 2-3x its steady time).
  static constexpr int kSettleCalls = kBlock / 2;
  /// Fewest and most calls between re-checks (the most keeps the loser's share under kOverheadShare up to a ratio
  /// of about 1 + kMaxInterval x kOverheadShare / kBlock = 21.5 between the variants; beyond, it bounds how long a
  /// change goes unnoticed).
  static constexpr uint64_t kMinInterval = 64, kMaxInterval = 16384;
  /// Recent timed calls kept per variant (the median of these is this rank's estimate).
  static constexpr size_t kWindow = kBlock / 2;

  /// Before each call of the shape: sets the variant this call runs (variant()). Call exactly once per call, on
  /// every rank, in call order.
  void beforeCall();
  /// After the call ran to completion: this rank's time of it, seconds (ignored for untimed calls); then, when
  /// due, the agreement through `agree` and the decision for the calls to come. True when it agreed. Every rank that
  /// completed the call agrees here, inside the same API call, so no other call of any rank can come between.
  bool afterCall(double seconds, const Agree& agree);
  /// The variant the current call runs (0: the tuner's pick, 1: the runner-up, 2: the third variant).
  int variant() const { return running_; }
  /// Whether the current call is timed (in the second half of a run of its variant).
  bool timed() const { return timed_; }
  /// The variant that won the last agreement.
  int winner() const { return winner_; }
  /// Calls seen so far.
  uint64_t calls() const { return calls_; }
  /// The agreed estimates (seconds per call, the slowest rank's median), one per variant, of the last agreement; 0
  /// before the first and for a variant not timed since its samples were last cleared.
  const double* estimates() const { return estimate_; }
  /// Calls from the current one to the next re-check (for tests and logs).
  uint64_t nextCheck() const { return nextCheck_; }
  /// Number of agreements so far.
  int agreements() const { return agreements_; }
  /// "variant 1 wins (12.0 us against 40.1 us, ...), next re-check at call 90": one line for logs (with three
  /// variants, every estimate is named).
  std::string describe() const;

 private:
  void decide();
  void record(int variant, double seconds);
  double localEstimate(int variant) const;

  int variants_;
  uint64_t calls_ = 0;
  int running_ = 0;
  int run_ = 0;              // calls of running_ in a row, this one included
  bool timed_ = false;
  int winner_ = 0;
  int blockLeft_ = 0;        // calls left in the current block of a variant other than the winner
  std::vector<int> queue_;   // the variants whose blocks the current re-check runs, the running one first
  bool agreeAfter_ = false;  // the current call ends with an agreement
  uint64_t nextCheck_ = 0;   // call that starts the next re-check block (0: none planned)
  bool confirming_ = false;  // a challenger won the last agreement: the next one decides the switch
  int challenger_ = 1;       // that challenger
  int agreements_ = 0;
  double estimate_[kMaxVariants] = {};
  std::vector<double> samples_[kMaxVariants];
};

}  // namespace hoccl
