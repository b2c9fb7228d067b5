// The table of launchers: one probe per launcher, reading only that launcher's variables. Order matters where
// launchers nest: torchrun and Open MPI before Slurm (mpirun inside an allocation inherits SLURM_PROCID=0 from the
// batch step), PMIx and MPICH/Hydra hand over to Slurm when srun started the rank (SLURM_PROCID equal to their rank),
// so that Slurm's node list gives the root host.
#include <fmt/format.h>

#include <charconv>
#include <string>

#include "base/error.h"
#include "base/params.h"
#include "comm/launcher_env.h"
#include "comm/launcher_root.h"
#include "topology/topology.h"

namespace hoccl {
namespace {

constexpr int64_t kMaxRank = 16777215;
constexpr int64_t kMaxSize = 16777216;

/// Rank and size from a pair of variables: nullopt when neither is set; an error naming both when only one is, or
/// when the rank is not below the size.
std::optional<std::pair<int, int>> rankAndSize(LauncherVars& vars, const char* rankVar, const char* sizeVar) {
  auto rank = vars.integer(rankVar, 0, kMaxRank);
  auto size = vars.integer(sizeVar, 1, kMaxSize);
  if (!rank && !size) return std::nullopt;
  if (!rank || !size)
    throwInvalidUsage(fmt::format("{} is set but {} is not: the launcher environment is incomplete (read: {})",
                                  rank ? rankVar : sizeVar, rank ? sizeVar : rankVar, vars.summary()));
  if (*rank >= *size)
    throwInvalidArgument(
        fmt::format("{}={} is not below {}={} (read: {})", rankVar, *rank, sizeVar, *size, vars.summary()));
  return std::make_pair(static_cast<int>(*rank), static_cast<int>(*size));
}

/// Local rank and size, both or neither; the local rank must be below the local size, the local size at most the
/// size.
void localRankAndSize(LauncherVars& vars, const char* rankVar, const char* sizeVar, LauncherInfo* info) {
  auto lr = vars.integer(rankVar, 0, kMaxRank);
  auto ls = vars.integer(sizeVar, 1, kMaxSize);
  if (!lr || !ls) return;  // partial local information is ignored: it only groups ranks
  if (*lr >= *ls || *ls > info->size)
    throwInvalidArgument(fmt::format("{}={} and {}={} do not fit a job of {} ranks (read: {})", rankVar, *lr, sizeVar,
                                     *ls, info->size, vars.summary()));
  info->localRank = static_cast<int>(*lr);
  info->localSize = static_cast<int>(*ls);
}

LauncherInfo fromPair(std::pair<int, int> rs) {
  LauncherInfo info;
  info.rank = rs.first;
  info.size = rs.second;
  return info;
}

/// hoccl-run (or a job script): HOCCL_RANK, HOCCL_WORLD_SIZE, HOCCL_LOCAL_RANK, HOCCL_LOCAL_SIZE; the root is
/// HOCCL_COMM_ID, which hoccl-run sets.
std::optional<LauncherInfo> probeHoccl(LauncherVars& vars) {
  // HOCCL_WORLD_SIZE alone is the job size for PMIx (which exports none): not a partial hoccl-run environment.
  if (!vars.text("HOCCL_RANK") && vars.text("PMIX_RANK")) return std::nullopt;
  auto rs = rankAndSize(vars, "HOCCL_RANK", "HOCCL_WORLD_SIZE");
  if (!rs) return std::nullopt;
  LauncherInfo info = fromPair(*rs);
  localRankAndSize(vars, "HOCCL_LOCAL_RANK", "HOCCL_LOCAL_SIZE", &info);
  info.rootHint = "hoccl-run sets HOCCL_COMM_ID; when setting HOCCL_RANK by hand, set HOCCL_COMM_ID=host:port too";
  return info;
}

/// torchrun (torch.distributed.run): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node),
/// MASTER_ADDR; the root port is MASTER_PORT+1 (torch's TCPStore owns MASTER_PORT itself) unless that is an ephemeral
/// port (--standalone's store port is one, from bind(0), and any outgoing connection may hold the port above it: a
/// launch failed so once): then the job key's port in 20000-31999, as for the other launchers.
std::optional<LauncherInfo> probeTorchrun(LauncherVars& vars) {
  auto rs = rankAndSize(vars, "RANK", "WORLD_SIZE");
  if (!rs) return std::nullopt;
  LauncherInfo info = fromPair(*rs);
  localRankAndSize(vars, "LOCAL_RANK", "LOCAL_WORLD_SIZE", &info);
  if (auto node = vars.integer("GROUP_RANK", 0, kMaxRank)) info.nodeIndex = static_cast<int>(*node);
  auto addr = vars.text("MASTER_ADDR");
  auto port = vars.integer("MASTER_PORT", 1, 65535);
  if (addr) info.rootHost = *addr;
  if (port && *port + 1 < kFirstEphemeralPort) info.rootPort = static_cast<int>(*port + 1);
  auto runId = vars.text("TORCHELASTIC_RUN_ID");
  if (addr && port) info.jobKey = fmt::format("torchrun {} {}:{}", runId.value_or(""), *addr, *port);
  info.rootHint =
      "torchrun sets MASTER_ADDR and MASTER_PORT (hoccl's root listens on MASTER_PORT+1, or on a port of the job's "
      "below 32000 when MASTER_PORT is an ephemeral one); set them when setting "
      "RANK/WORLD_SIZE by hand, or set HOCCL_COMM_ID=host:port";
  return info;
}

/// Open MPI's mpirun: OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; the job id from OMPI_MCA_ess_base_jobid
/// (Open MPI 4) or PMIX_NAMESPACE (Open MPI 5).
std::optional<LauncherInfo> probeOpenMpi(LauncherVars& vars) {
  auto rs = rankAndSize(vars, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  if (!rs) return std::nullopt;
  LauncherInfo info = fromPair(*rs);
  localRankAndSize(vars, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", &info);
  auto job = vars.text("OMPI_MCA_ess_base_jobid");
  if (!job) job = vars.text("PMIX_NAMESPACE");
  if (job) info.jobKey = "ompi " + *job;
  info.rootHint =
      "on several hosts Open MPI does not say where rank 0 runs: pass -x HOCCL_COMM_ID=<host of rank 0>:<port> to "
      "mpirun";
  return info;
}

std::optional<LauncherInfo> probeSlurm(LauncherVars& vars);

/// Whether srun started this rank: SLURM_PROCID equals `rank` (PMIx or PMI under srun --mpi=...).
std::optional<LauncherInfo> slurmStepOf(LauncherVars& vars, int rank) {
  auto procId = vars.integer("SLURM_PROCID", 0, kMaxRank);
  if (!procId || *procId != rank) return std::nullopt;
  return probeSlurm(vars);
}

/// PMIx (prterun, srun --mpi=pmix): PMIX_RANK and PMIX_NAMESPACE; PMIx puts no job size in the environment, so the
/// size comes from Slurm when srun started the rank, else from HOCCL_WORLD_SIZE.
std::optional<LauncherInfo> probePmix(LauncherVars& vars) {
  auto rank = vars.integer("PMIX_RANK", 0, kMaxRank);
  if (!rank) return std::nullopt;
  if (auto slurm = slurmStepOf(vars, static_cast<int>(*rank))) {
    slurm->launcher = "Slurm (PMIx)";
    return slurm;
  }
  auto size = vars.integer("HOCCL_WORLD_SIZE", 1, kMaxSize);
  if (!size)
    throwInvalidUsage(
        fmt::format("PMIX_RANK is set but the job size is unknown (PMIx does not export it): set "
                    "HOCCL_WORLD_SIZE for every rank (read: {})",
                    vars.summary()));
  auto rs = rankAndSize(vars, "PMIX_RANK", "HOCCL_WORLD_SIZE");
  LauncherInfo info = fromPair(*rs);
  if (auto ns = vars.text("PMIX_NAMESPACE")) info.jobKey = "pmix " + *ns;
  info.rootHint = "set HOCCL_COMM_ID=<host of rank 0>:<port> for every rank";
  return info;
}

/// MPICH's Hydra (mpiexec): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS. Hydra exports no job id, so the
/// root port is HOCCL_PORT (or HOCCL_COMM_ID).
std::optional<LauncherInfo> probeHydra(LauncherVars& vars) {
  auto rs = rankAndSize(vars, "PMI_RANK", "PMI_SIZE");
  if (!rs) return std::nullopt;
  if (auto slurm = slurmStepOf(vars, rs->first); slurm && slurm->size == rs->second) {
    slurm->launcher = "Slurm (PMI)";
    return slurm;
  }
  LauncherInfo info = fromPair(*rs);
  localRankAndSize(vars, "MPI_LOCALRANKID", "MPI_LOCALNRANKS", &info);
  info.rootHint =
      "MPICH exports no job id: pass -genv HOCCL_PORT <port> (one host) or -genv HOCCL_COMM_ID <host of rank 0>:<port> "
      "to mpiexec";
  return info;
}

/// Tasks on node `node` from Slurm's "2(x3),1" form (counts, each repeated x times); -1 when malformed or too short.
int tasksOnNode(const std::string& list, int node) {
  const char* p = list.data();
  const char* end = p + list.size();
  int index = 0;
  while (p < end) {
    int count = 0, repeat = 1;
    auto r = std::from_chars(p, end, count);
    if (r.ec != std::errc() || count < 1) return -1;
    p = r.ptr;
    if (end - p >= 2 && p[0] == '(' && p[1] == 'x') {
      r = std::from_chars(p + 2, end, repeat);
      if (r.ec != std::errc() || repeat < 1 || r.ptr == end || *r.ptr != ')') return -1;
      p = r.ptr + 1;
    }
    if (p < end && *p++ != ',') return -1;
    if (node < index + repeat) return count;
    index += repeat;
  }
  return -1;
}

/// Slurm's srun: SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS), SLURM_LOCALID, SLURM_NODEID with
/// SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE) for the local size, the root host from the first node of
/// SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, SLURM_NODELIST), the job key from SLURM_JOB_ID.SLURM_STEP_ID.
std::optional<LauncherInfo> probeSlurm(LauncherVars& vars) {
  const char* sizeVar = vars.text("SLURM_NTASKS") || !vars.text("SLURM_NPROCS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  auto rs = rankAndSize(vars, "SLURM_PROCID", sizeVar);
  if (!rs) return std::nullopt;
  LauncherInfo info = fromPair(*rs);
  auto localId = vars.integer("SLURM_LOCALID", 0, kMaxRank);
  auto nodeId = vars.integer("SLURM_NODEID", 0, kMaxRank);
  if (nodeId) info.nodeIndex = static_cast<int>(*nodeId);
  auto perNode = vars.text("SLURM_STEP_TASKS_PER_NODE");
  const char* perNodeVar = "SLURM_STEP_TASKS_PER_NODE";
  if (!perNode) {
    perNode = vars.text("SLURM_TASKS_PER_NODE");
    perNodeVar = "SLURM_TASKS_PER_NODE";
  }
  if (localId && nodeId && perNode) {
    int local = tasksOnNode(*perNode, info.nodeIndex);
    if (local < 1 || *localId >= local || local > info.size)
      throwInvalidArgument(
          fmt::format("{}='{}' does not give a task count for SLURM_NODEID={} above "
                      "SLURM_LOCALID={} (read: {})",
                      perNodeVar, *perNode, *nodeId, *localId, vars.summary()));
    info.localRank = static_cast<int>(*localId);
    info.localSize = local;
  }
  for (const char* listVar : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    auto list = vars.text(listVar);
    if (!list) continue;
    std::vector<std::string> hosts;
    try {
      hosts = topo::expandHostList(*list);
    } catch (const Error& e) {
      throwInvalidArgument(fmt::format("{}='{}': {} (read: {})", listVar, *list, e.what(), vars.summary()));
    }
    if (!hosts.empty()) info.rootHost = hosts.front();
    break;
  }
  auto job = vars.text("SLURM_JOB_ID");
  auto step = vars.text("SLURM_STEP_ID");
  if (job) info.jobKey = fmt::format("slurm {}.{}", *job, step.value_or(""));
  info.rootHint =
      "srun sets SLURM_STEP_NODELIST (rank 0 runs on its first node) and SLURM_JOB_ID; set HOCCL_COMM_ID=host:port "
      "when they are missing";
  return info;
}

}  // namespace

const std::vector<LauncherEntry>& launcherTable() {
  static const std::vector<LauncherEntry> table = {
      {"hoccl-run", "HOCCL_RANK", probeHoccl},
      {"torchrun", "RANK", probeTorchrun},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", probeOpenMpi},
      {"PMIx", "PMIX_RANK", probePmix},
      {"MPICH/Hydra", "PMI_RANK", probeHydra},
      {"Slurm", "SLURM_PROCID", probeSlurm},
  };
  return table;
}

}  // namespace hoccl
