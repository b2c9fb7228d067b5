/// @file launcher_env.h
/// Rank and size from the launcher's environment: HOCCL_RANK/HOCCL_WORLD_SIZE, then Open MPI
/// (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE), Slurm (SLURM_PROCID/SLURM_NTASKS).
#pragma once

#include <optional>
#include <string>

namespace hoccl {

/// Where the rank and size came from, and their values.
struct LauncherRank {
  int rank;            ///< this process's rank
  int size;            ///< number of ranks
  std::string source;  ///< e.g. "HOCCL_RANK/HOCCL_WORLD_SIZE"
};

/// The first complete pair found; nullopt if none. Throws InvalidArgument for malformed values.
std::optional<LauncherRank> launcherRank();

}  // namespace hoccl
