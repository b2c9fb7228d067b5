/// @file tuner.h
/// The one decision point: what runs a collective call — a transport's shortcut (transports/shortcut.h) or an
/// algorithm's schedule — chosen by predicted time: the shortcuts price themselves, the schedules of every rank are
/// predicted by the cost model (algo/predict.h). HOCCL_ALGO forces an algorithm or a shortcut by name.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "algo/registry.h"
#include "sched/cost_model.h"
#include "transports/shortcut.h"

namespace hoccl::algo {

/// What runs a call: exactly one of shortcut and algorithm is set.
struct Choice {
  transport::Shortcut* shortcut = nullptr;  ///< a transport's shortcut runs the whole call
  const Algorithm* algorithm = nullptr;     ///< else this algorithm's schedule runs on the executor
  double seconds = 0;                       ///< predicted time (0 when the cost model was not consulted)
  size_t chunkCount =
      0;  ///< pipelining chunk (elements) the schedule is made with; 0: the call's own (args.chunkCount)
  /// With an algorithm: a shortcut that runs the call instead when every rank's buffers turn out registered (its
  /// first round establishes that, the same on every rank: Shortcut::startIfRegistered); null when none is
  /// predicted faster than the algorithm on registered buffers.
  transport::Shortcut* ifRegistered = nullptr;
  double registeredSeconds = 0;  ///< ifRegistered's predicted time on registered buffers
  /// The name of what was chosen ("small", "single_copy", "ring", ...).
  const char* name() const { return shortcut ? shortcut->name() : algorithm->name; }
};

/// Pipelining chunks (bytes) the tuner tries for an algorithm whose schedule depends on the chunk, the default
/// (HOCCL_CHUNK_SIZE's built-in 1 MiB) first: another must be predicted more than kChunkMargin faster to replace it
/// (and, among those, a later one more than 1% faster than an earlier one).
constexpr size_t kChunkChoicesBytes[] = {size_t{1} << 20, size_t{256} << 10, size_t{4} << 20, size_t{16} << 20,
                                         size_t{64} << 10};

/// How much faster (a fraction) a chunk other than the default must be predicted to replace it. The model prices
/// pipelining across levels as free overlap; on the emulated cluster (docs/model.md, run j) the smaller chunks it
/// predicted 10-14% faster measured 0-17% slower, and at 16 MiB a predicted 2% gain measured 64% slower.
constexpr double kChunkMargin = 0.15;

/// Whether alg's schedule for coll depends on CollArgs::chunkCount (HO-Ring: every collective; the ring: its
/// broadcast and reduce chains).
bool chunkMatters(const Algorithm& alg, sched::Coll coll);

/// The fastest of `candidates` (non-empty) for args on topo with elements of elemSize bytes, with its predicted
/// time (algo/predict.h: every rank simulated up to kMaxFullSimRanks = 8 ranks, the fast model above), priced with
/// `model`, or topo::LinkModel::fromParams() when it is null. With `chooseChunk`, each candidate whose schedule
/// depends on the chunk (chunkMatters) is priced at every chunk of kChunkChoicesBytes (distinct for this call) and
/// keeps the default (the first) unless another is predicted more than kChunkMargin faster; the candidates then
/// compete with those chunks (Choice::chunkCount); otherwise args.chunkCount is used as given.
Choice tune(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
            const std::vector<const Algorithm*>& candidates, const topo::LinkModel* model = nullptr,
            bool chooseChunk = false);

/// Simulates `alg` for every rank of topo (args.rank is ignored) and predicts the operation.
topo::Prediction predictAlgorithm(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo,
                                  size_t elemSize, const topo::LinkModel& model);

/// What runs `call` (args: the same call as the schedules see it; `call.op` is hocclNumOps or above for PreMulSum,
/// which no shortcut takes). The pipelining chunk is chosen by prediction (tune's chooseChunk) unless
/// HOCCL_CHUNK_SIZE is set, which forces args.chunkCount. HOCCL_ALGO naming an algorithm forces it (shortcuts are
/// not considered; its chunk is still chosen); naming a shortcut forces it where it can run (else the schedules
/// compete); otherwise every shortcut that can run and may be chosen on ordinary buffers
/// (Shortcut::choosableOnOrdinaryBuffers) and the best schedule are compared by predicted time, with `model` (the
/// communicator's probed model, comm/tune_probe.h) or, when it is null, topo::LinkModel::fromParams(). When a schedule wins and a shortcut's path
/// for registered buffers (Shortcut::predictRegisteredSeconds) is predicted faster still, it becomes the choice's
/// ifRegistered: whether every rank registered is known only at run time, and a rank knows only its own buffers.
/// The same inputs give the same choice on every rank.
Choice decide(const transport::CollCall& call, const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
              const std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts,
              const topo::LinkModel* model = nullptr);

/// The runner-up of the other kind for `chosen` (decide's choice for the same call), for the online choice between
/// the two (comm/online_choice.h): when `chosen` is a schedule, the shortcut predicted fastest among those that can
/// run the call and are worth trying online (Shortcut::worthTryingOnline; choosableOnOrdinaryBuffers is not asked:
/// the measurement decides); when `chosen` is such a shortcut, the best schedule (with its chunk). Nullopt when
/// HOCCL_ALGO forces the choice, when `chosen` is a shortcut not worth trying online, or when there is no such
/// runner-up. The same on every rank for the same inputs.
std::optional<Choice> runnerUp(const transport::CollCall& call, const sched::CollArgs& args, const topo::Topology& topo,
                               size_t elemSize, const std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts,
                               const topo::LinkModel& model, const Choice& chosen);

/// The best schedule of another algorithm than `schedule`'s (its chunk chosen as tune() chooses it), for the online
/// choice's third variant: on one host the model prices the ring and HO-Ring close to each other, and what tells
/// them apart there is what it sees least (whether the ranks' cores share a last-level cache, which moves under a
/// running job on the build machines: docs/model.md, "The cache term"). Nullopt when HOCCL_ALGO forces the choice,
/// when `schedule` is not a schedule, or when no other algorithm implements the call. The same on every rank for the
/// same inputs.
std::optional<Choice> otherSchedule(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                                    const topo::LinkModel& model, const Choice& schedule);

/// Names of the shortcuts HOCCL_ALGO accepts ("small, single_copy").
std::string shortcutNames();
/// True when `name` is one of shortcutNames().
bool isShortcutName(const std::string& name);

}  // namespace hoccl::algo
