/// @file model_tool.h
/// Shared pieces of hoccl-model (tools/model): size and shape parsing, the collectives it predicts, and the three
/// subcommands' entry points (predict in hoccl_model.cc, calibrate and validate in online.cc, plan in plan.cc); the
/// shared pieces are defined in model_tool.cc, below every subcommand.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sched/schedule.h"
#include "topology/link_model.h"
#include "topology/topology.h"

namespace hoccl::model_tool {

/// `text` as a positive number with an optional last letter (either case) from `units` (letter, upper case ->
/// multiplier). Throws std::runtime_error "empty WHAT" or "bad WHAT 'TEXT' (e.g. EXAMPLES)".
double parseWithUnit(const std::string& text, const std::vector<std::pair<char, double>>& units,
                     const std::string& what, const std::string& examples);
/// "8", "64K", "16M", "1G" (powers of 1024) -> bytes. Throws std::runtime_error on anything else.
size_t parseBytes(const std::string& text);
/// "8:1G" -> 8, 16, 32, ... 1 GiB (factor 2); "1M" -> {1 MiB}. Throws std::runtime_error on bad input.
std::vector<size_t> parseSizes(const std::string& text);
/// A cluster from --shape SxHxG or --topo FILE (with ranksPerHost). Throws std::runtime_error naming the problem.
topo::Topology offlineTopology(const std::string& shape, const std::string& topoFile, int ranksPerHost);
/// The link model: --model FILE, else HOCCL_MODEL_FILE / HOCCL_LINK_* / built-in (LinkModel::fromParams()).
topo::LinkModel linkModel(const std::string& modelFile);
/// "allreduce" -> Coll::AllReduce (also reducescatter, allgather, broadcast, reduce, alltoall). Throws on others.
sched::Coll parseColl(const std::string& name);
/// Element count for a size in bytes as nccl-tests reports it (the whole buffer for all-reduce, broadcast and
/// reduce; N blocks for all-gather, reduce-scatter and all-to-all), floats.
size_t countFor(sched::Coll coll, size_t bytes, int nranks);
/// nccl-tests' bus bandwidth factor for coll on n ranks.
double busFactor(sched::Coll coll, int n);

/// Online subcommands (run as every rank of a job).
struct CalibrateOptions {
  std::string out = "hoccl-model.json";  ///< model file to write (rank 0)
  int iterations = 200;                  ///< ping-pong round trips for the latency
};
/// `hoccl-model calibrate`: returns the exit status.
int calibrate(const CalibrateOptions& o);

/// What `validate` runs.
struct ValidateOptions {
  std::string coll = "allreduce";  ///< collective
  std::string sizes = "1M:64M";    ///< size range
  std::string modelFile;           ///< model to predict with ("" = fromParams)
  bool json = false;               ///< JSON output
};
/// `hoccl-model validate`: returns the exit status.
int validate(const ValidateOptions& o);

/// What `plan` ranks.
struct PlanOptions {
  int gpus = 0;                 ///< ranks
  std::string params = "1B";    ///< parameters ("80B", "7B", "350M")
  long hidden = 0, layers = 0;  ///< transformer shape
  long seq = 2048, batch = 0;   ///< sequence length, global batch in sequences
  int top = 10;                 ///< rows shown
  int microSteps = 1;           ///< PaRO gradient accumulation steps
  double memoryGiB = 0;         ///< memory budget per rank (0 = no limit)
  bool json = false;            ///< JSON output
};
/// `hoccl-model plan` on topo with model: returns the exit status.
int plan(const PlanOptions& o, const topo::Topology& topo, const topo::LinkModel& model);

}  // namespace hoccl::model_tool
