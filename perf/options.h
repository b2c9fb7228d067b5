/// @file options.h
/// The nccl-tests command line of the perf tools (parsed with CLI11).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "data.h"

namespace hoccl_perf {

/// Every command-line setting, with nccl-tests' meaning and defaults.
struct Options {
  int nThreads = 1;                                  ///< -t: ranks (threads) per process
  int nGpus = 1;                                     ///< -g: GPUs per thread (only 1: host ranks are one per thread)
  size_t minBytes = 32u << 20;                       ///< -b
  size_t maxBytes = 32u << 20;                       ///< -e
  size_t stepBytes = 1u << 20;                       ///< -i: increment when stepFactor is 1
  size_t stepFactor = 1;                             ///< -f
  int iters = 20;                                    ///< -n: timed iterations
  int warmupIters = 1;                               ///< -w
  int aggIters = 1;                                  ///< -m: operations per iteration, inside one group
  int cycles = 1;                                    ///< -N: repeat the whole sweep (0 = forever)
  int check = 1;                                     ///< -c: check iterations (0 = no check, N/A in #wrong)
  std::vector<OpKind> ops{OpKind::Sum};              ///< -o
  std::vector<hocclDataType_t> types{hocclFloat32};  ///< -d
  int root = 0;                                      ///< -r (-1 = every root)
  int blocking = 0;                                  ///< -z
  int average = 1;                                   ///< -a: 0 rank 0, 1 mean, 2 min, 3 max
  double timeoutSec = 0;                             ///< -T (0 = none)
  std::string jsonFile;                              ///< -J
  int cpuTime = 0;                                   ///< -C: report thread CPU time instead of wall time
  int misalign = 0;                                  ///< -u: elements of misalignment of every buffer
  int registration = 0;                              ///< -R: 1 and 2 take buffers from hocclMemAlloc, registered
  int graphLaunches = 0;                             ///< -G: CUDA graph launches per iteration (refused: graphRefusal)
  std::string opsText = "sum";                       ///< -o as given
  std::string typesText = "float";                   ///< -d as given
  double minBusBw = -1;                              ///< NCCL_TESTS_MIN_BW / HOCCL_TESTS_MIN_BW (-1 = unset)
};

/// Why -G (CUDA graph capture) cannot run in this process, or "" when it was not asked for. It is always refused
/// today: without a device there is nothing to capture, the simulated device does not capture graphs, and on a CUDA
/// device hoccl's stream-ordered calls are run by a host proxy thread that a graph replay would not run again
/// (docs/cuda.md). `deviceName` is hocclDeviceName's answer (null: no device).
std::string graphRefusal(const Options& opts, const char* deviceName);

/// Parses argv into opts. Returns -1 to go on, or the exit code to return at once (0 after --help, 2 after an
/// error, which it prints to stderr with the tool name).
int parseOptions(int argc, char** argv, const char* toolName, Options* opts);

}  // namespace hoccl_perf
