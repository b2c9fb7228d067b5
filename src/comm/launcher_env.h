/// @file launcher_env.h
/// What the launcher that started this process says about the job: rank and size, the ranks of this host, where
/// rank 0 runs, and a job identity. One probe per launcher (src/comm/launcher_table.cc), tried in a fixed order:
/// hoccl-run (HOCCL_RANK), torchrun (RANK), Open MPI (OMPI_COMM_WORLD_RANK), PMIx (PMIX_RANK), MPICH/Hydra
/// (PMI_RANK), Slurm (SLURM_PROCID). docs/launchers.md lists every variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hoccl {

/// The launcher environment variables that one probe read, remembered for messages.
class LauncherVars {
 public:
  /// The text of `name`; nullopt when unset or empty.
  std::optional<std::string> text(const char* name);
  /// The integer in `name`, in [lo, hi]; nullopt when unset. Throws InvalidArgument naming the variable, its value
  /// and the range when it is not a decimal integer in range.
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi);
  /// Records a value read some other way (a hoccl parameter).
  void note(const std::string& name, const std::optional<std::string>& value);
  /// "NAME=value, OTHER (unset), ..." in the order read.
  std::string summary() const;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> read_;
};

/// One job as its launcher describes it.
struct LauncherInfo {
  std::string launcher;         ///< "hoccl-run", "torchrun", "Open MPI", "PMIx", "MPICH/Hydra", "Slurm"
  int rank = 0;                 ///< this process's rank
  int size = 0;                 ///< number of processes
  int localRank = -1;           ///< rank among the processes of this host, -1 unknown
  int localSize = -1;           ///< processes on this host, -1 unknown
  int nodeIndex = -1;           ///< the launcher's index of this host (torchrun GROUP_RANK, SLURM_NODEID), -1 unknown
  std::string rootHost;         ///< the host rank 0 runs on per the launcher ("" unknown)
  std::optional<int> rootPort;  ///< the root port the launcher's own rule gives (torchrun: MASTER_PORT+1 below 32768)
  std::string jobKey;           ///< the same on every rank of the job and different between jobs ("" unknown)
  std::string vars;             ///< the variables read, for messages ("RANK=1, WORLD_SIZE=2, MASTER_ADDR (unset)")
  std::string rootHint;         ///< what to set when the root address cannot be found
  /// Whether every process of the job runs on this host (the launcher's local size equals the size).
  bool allLocal() const { return localSize == size; }
};

/// A launcher's probe: nullopt when its variables are absent; throws InvalidArgument / InvalidUsage for malformed or
/// partial ones (naming the variables read).
using LauncherProbe = std::optional<LauncherInfo> (*)(LauncherVars& vars);

/// One entry of the table of launchers.
struct LauncherEntry {
  const char* name;     ///< the launcher's name
  const char* rankVar;  ///< the variable whose presence marks it (for the docs and messages)
  LauncherProbe probe;  ///< reads its variables
};

/// The launchers, in the order they are tried (src/comm/launcher_table.cc).
const std::vector<LauncherEntry>& launcherTable();

/// The first launcher of the table whose variables are present; nullopt when none is. Throws as the probes do.
std::optional<LauncherInfo> detectLauncher();

/// Where the rank and size came from, and their values.
struct LauncherRank {
  int rank;            ///< this process's rank
  int size;            ///< number of ranks
  std::string source;  ///< the launcher's name, e.g. "torchrun"
};

/// detectLauncher() reduced to rank and size.
std::optional<LauncherRank> launcherRank();

}  // namespace hoccl
