/// @file plan.h
/// The PaRO mapper's arithmetic: memory per rank, the collectives of a training step (with their communicator, bytes
/// and frequency), the predicted communication time from link classes, and the ranking of all 27 strategies.
/// Pure functions of a Layout; nothing here talks to a communicator.
///
/// The step (our reading of PaRO-DP, A micro-steps of gradient accumulation; C = parameters, C' = trainable):
///   per micro-step  gather P twice (forward, backward) from its level up to N:
///                     I: intra all-gather;  G: inter all-gather then intra all-gather
///                   reduce the fresh full gradient down to G's level:
///                     N: nothing (accumulate locally);  I: intra reduce-scatter;  G: intra then inter reduce-scatter
///   per step        synchronise the accumulated gradient from G's level to OS's level, summed over all ranks:
///                     N->N global all-reduce; N->I intra RS + inter AR; N->G intra RS + inter RS;
///                     I->N inter AR + intra AG; I->I inter AR; I->G inter RS;
///                     G->N inter AG + intra AG; G->I inter AG; G->G nothing
///                   after the optimizer, rebuild P from the updated OS shard (trainable part):
///                     OS=G: P=G nothing, P=I inter AG, P=N inter AG + intra AG;  OS=I: P=N intra AG, else nothing;
///                     OS=N: nothing (every rank slices what it keeps)
/// So inter-group traffic happens once per step except where P or G is G-sharded (then every micro-step).
///
/// Bytes are counted as hoccl's ring algorithms move them (per rank, payload only): all-gather of sendcount c over n
/// ranks sends (n-1)*c elements, reduce-scatter of recvcount c sends (n-1)*c, all-reduce of c (a multiple of n)
/// sends 2*(n-1)*c/n. Collectives on one-rank communicators move nothing and are left out of the plan.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "paro/layout.h"
#include "paro/strategy.h"

namespace hoccl::paro {

/// The model being trained.
struct ModelSize {
  uint64_t params = 0;     ///< Psi: parameters
  uint64_t trainable = 0;  ///< Psi': trainable parameters (<= params)
  uint32_t bytesP = 2;     ///< bytes per parameter element (bf16)
  uint32_t bytesG = 2;     ///< bytes per gradient element
  uint32_t bytesOS = 12;   ///< bytes of optimizer state per trainable element (fp32 master, momentum, variance)
};

/// Model-state memory of one rank in bytes.
struct Memory {
  double p = 0;      ///< parameters: bytesP*Psi/d_P
  double g = 0;      ///< gradients: bytesG*Psi'/d_G
  double os = 0;     ///< optimizer states: bytesOS*Psi'/d_OS
  double total = 0;  ///< sum
};
/// Memory per rank: 2Psi/d_P + 2Psi'/d_G + 12Psi'/d_OS with d = 1, m, N for N, I, G (bytes per element from size).
Memory memoryPerRank(const Layout& layout, const Strategy& s, const ModelSize& size);

/// The collectives the plan uses.
enum class Coll : unsigned char { AllGather, ReduceScatter, AllReduce };
/// Which PaRO communicator a collective runs on.
enum class CommKind : unsigned char {
  Intra = 0,   ///< the m ranks of one group, ordered by local index
  Inter = 1,   ///< the ng ranks with one local index (a redundancy group), ordered by group
  Global = 2,  ///< all N ranks in rank order
};
/// When a collective happens.
enum class When : unsigned char { MicroStep, Step };
/// The four phases of a step, in order.
enum class Phase : unsigned char { GatherParams, ReduceGrads, SyncGrads, RebuildParams };

/// "AllGather", "ReduceScatter", "AllReduce".
const char* collName(Coll coll);
/// "intra", "inter", "global".
const char* commKindName(CommKind kind);
/// "gather params", "reduce grads", "sync grads", "rebuild params".
const char* phaseName(Phase phase);

/// One collective of the step.
struct PlanEntry {
  Phase phase;               ///< which phase
  Coll coll;                 ///< which collective
  CommKind comm;             ///< on which communicator
  int commSize = 0;          ///< ranks in that communicator
  State tensor;              ///< Params or Grads
  uint64_t count = 0;        ///< element count as the C API takes it (AG sendcount, RS recvcount, AR count)
  uint32_t elemBytes = 0;    ///< bytes per element
  uint64_t bytes = 0;        ///< bytes of the full buffer (n*count*e for AG and RS, count*e for AR)
  uint64_t sentPerRank = 0;  ///< bytes each rank sends in one call (ring)
  When when = When::Step;    ///< per micro-step or per step
  int perOccurrence = 1;     ///< calls per micro-step (2 for the forward and backward gathers) or per step
  uint64_t perStep = 0;      ///< calls per training step
};

/// The collectives of one training step.
struct Plan {
  Strategy strategy;               ///< the strategy
  int microSteps = 1;              ///< A
  std::vector<PlanEntry> entries;  ///< in execution order (micro-step entries first)
  /// Bytes each rank sends in one step.
  uint64_t sentPerRankPerStep() const;
  /// Bytes rank sends in one step, by link class, as hoccl's ring (algo::ringOrder) runs on each communicator.
  std::array<uint64_t, hocclNumLinkClasses> sentByClass(const Layout& layout, int rank) const;
};

/// The step plan of s on layout for A = microSteps (>= 1; else InvalidArgument).
Plan makePlan(const Layout& layout, const Strategy& s, const ModelSize& size, int microSteps);

/// Latency and bandwidth per link class. Bandwidth is per rank for IntraHost, per host (its NICs together) for
/// IntraSwitch, and per switch uplink for InterSwitch (0 = not limited); bytes per second.
struct LinkModel {
  std::array<double, hocclNumLinkClasses> alpha{};  ///< seconds per message
  std::array<double, hocclNumLinkClasses> bw{};     ///< bytes per second
  /// Defaults: intra-host 150 GB/s per rank, 2 us; host NIC 50 GB/s (400 Gb/s), 5 us; spine unlimited, 10 us.
  static LinkModel defaults();
};

/// Predicted time of one call of entry e (all its concurrent instances: ng intra rings or m inter rings):
/// ring steps * the worst latency on the ring + the most loaded link's bytes / its bandwidth.
double predictCallTime(const Layout& layout, const PlanEntry& e, const LinkModel& links);
/// Predicted communication time of a step (no overlap with compute).
double predictStepTime(const Layout& layout, const Plan& plan, const LinkModel& links);

/// One line of a ranking.
struct Ranked {
  Strategy strategy;         ///< the strategy
  Memory memory;             ///< memory per rank
  double seconds = 0;        ///< predicted step communication time
  uint64_t sentPerRank = 0;  ///< bytes per rank per step
  bool fits = true;          ///< memory.total <= budget
};
/// All 27 strategies: those that fit the budget (bytes, 0 = no limit) first, fastest first (then least memory);
/// then those that do not fit, least memory first.
std::vector<Ranked> rankStrategies(const Layout& layout, const ModelSize& size, int microSteps, double budget,
                                   const LinkModel& links);

}  // namespace hoccl::paro
