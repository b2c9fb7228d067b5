/// @file host_cores.h
/// The cores of a communicator's hosts, for the tuner's crowded-host pricing (LinkModel::cores): each rank's
/// affinity mask travels in its RankInfo (the bootstrap's all-gather at init), so every rank computes the same
/// answer from the same table, with no extra bootstrap round.
#pragma once

#include <sched.h>

#include <vector>

#include "base/boot/bootstrap.h"

namespace hoccl {

/// The CPUs this process may run on: its affinity mask (sched_getaffinity); every online CPU (up to CPU_SETSIZE)
/// when the mask cannot be read or is empty.
cpu_set_t usableCpuMask();

/// Cores the ranks of each host can run on: the union of the affinity masks (RankInfo::cpus) of the ranks that
/// hostOf puts on that host; the fewest of any host. Ranks beyond hostOf are ignored; a host whose union is empty
/// (every mask unknown) is skipped; 0 when no host has a known mask. Pure: the same on every rank.
int fewestHostCores(const std::vector<boot::RankInfo>& ranks, const std::vector<int>& hostOf);

}  // namespace hoccl
