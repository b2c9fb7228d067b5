// The launchers' variables (src/comm/launcher_table.cc) and the job's root address and secret
// (src/comm/launcher_root.cc): every launcher's rank, size, local rank and size, node, root host and port rule, the
// order between launchers, and malformed or partial values (errors naming the variables).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "error_of.h"
#include "scoped_env.h"
#include "base/error.h"
#include "comm/launcher_env.h"
#include "comm/launcher_root.h"

using namespace hoccl;
using hoccl::test::errorOf;
using hoccl::test::ScopedEnv;

namespace {

/// A launcher environment for one scope: every variable any launcher reads is unset, then `set` ones are set.
class LauncherEnv {
 public:
  LauncherEnv(std::initializer_list<std::pair<const char*, const char*>> set) {
    static const char* const kAll[] = {"HOCCL_RANK",
                                       "HOCCL_WORLD_SIZE",
                                       "HOCCL_LOCAL_RANK",
                                       "HOCCL_LOCAL_SIZE",
                                       "HOCCL_COMM_ID",
                                       "HOCCL_AUTH_TOKEN",
                                       "HOCCL_PORT",
                                       "RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "GROUP_RANK",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "TORCHELASTIC_RUN_ID",
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "OMPI_MCA_ess_base_jobid",
                                       "PMIX_NAMESPACE",
                                       "PMIX_RANK",
                                       "PMI_RANK",
                                       "PMI_SIZE",
                                       "MPI_LOCALRANKID",
                                       "MPI_LOCALNRANKS",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "SLURM_NPROCS",
                                       "SLURM_LOCALID",
                                       "SLURM_NODEID",
                                       "SLURM_STEP_TASKS_PER_NODE",
                                       "SLURM_TASKS_PER_NODE",
                                       "SLURM_STEP_NODELIST",
                                       "SLURM_JOB_NODELIST",
                                       "SLURM_NODELIST",
                                       "SLURM_JOB_ID",
                                       "SLURM_STEP_ID"};
    for (const char* name : kAll) vars_.push_back(std::make_unique<ScopedEnv>(name, nullptr));
    for (const auto& [name, value] : set) vars_.push_back(std::make_unique<ScopedEnv>(name, value));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> vars_;
};

LauncherInfo detected() {
  auto info = detectLauncher();
  REQUIRE(info.has_value());
  return *info;
}

int portOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

}  // namespace

TEST_CASE("launchers: the table's order", "[launcher]") {
  std::vector<std::string> names;
  for (const auto& e : launcherTable()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"hoccl-run", "torchrun", "Open MPI", "PMIx", "MPICH/Hydra", "Slurm"});
  LauncherEnv env({});
  CHECK_FALSE(detectLauncher().has_value());
}

TEST_CASE("launchers: hoccl-run", "[launcher]") {
  LauncherEnv env(
      {{"HOCCL_RANK", "1"}, {"HOCCL_WORLD_SIZE", "3"}, {"HOCCL_LOCAL_RANK", "1"}, {"HOCCL_LOCAL_SIZE", "3"}});
  LauncherInfo info = detected();
  CHECK(info.launcher == "hoccl-run");
  CHECK(info.rank == 1);
  CHECK(info.size == 3);
  CHECK(info.localRank == 1);
  CHECK(info.localSize == 3);
  CHECK(info.nodeIndex == -1);
  // Every rank local, but no job id: a port is needed.
  std::string msg = errorOf([&] { launcherRootAddress(info); }, hocclInvalidUsage);
  CHECK_THAT(msg, Catch::Contains("rank 1 of 3 (started by hoccl-run)") && Catch::Contains("HOCCL_RANK=1") &&
                      Catch::Contains("HOCCL_COMM_ID (unset)") && Catch::Contains("HOCCL_PORT (unset)"));
  {
    ScopedEnv port("HOCCL_PORT", "23456");
    CHECK(launcherRootAddress(info) == "127.0.0.1:23456");
  }
  ScopedEnv id("HOCCL_COMM_ID", "10.1.2.3:4000");
  CHECK(launcherRootAddress(info) == "10.1.2.3:4000");
}

TEST_CASE("launchers: torchrun", "[launcher]") {
  LauncherEnv env({{"RANK", "3"},
                   {"WORLD_SIZE", "4"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"GROUP_RANK", "1"},
                   {"MASTER_ADDR", "node7"},
                   {"MASTER_PORT", "29500"},
                   {"TORCHELASTIC_RUN_ID", "abc"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"}});
  LauncherInfo info = detected();
  CHECK(info.launcher == "torchrun");  // before Slurm's (inherited) variables
  CHECK(info.rank == 3);
  CHECK(info.size == 4);
  CHECK(info.localRank == 1);
  CHECK(info.localSize == 2);
  CHECK(info.nodeIndex == 1);
  CHECK(launcherRootAddress(info) == "node7:29501");  // never MASTER_PORT itself: torch's store owns it
  {
    ScopedEnv port("HOCCL_PORT", "30001");
    CHECK(launcherRootAddress(info) == "node7:30001");
  }
  {
    ScopedEnv addr("MASTER_ADDR", "::1");
    CHECK(launcherRootAddress(detected()) == "[::1]:29501");
  }
  {  // torchrun --standalone: an ephemeral store port; the port above it may be any connection's, so the job's own
    ScopedEnv port("MASTER_PORT", "45123");
    const std::string addr = launcherRootAddress(detected());
    const int chosen = std::stoi(addr.substr(addr.rfind(':') + 1));
    CHECK(addr.rfind("node7:", 0) == 0);
    CHECK(chosen >= kLauncherPortBase);
    CHECK(chosen < kLauncherPortBase + kLauncherPortRange);
    CHECK(launcherRootAddress(detected()) == addr);  // the same on every rank
    ScopedEnv other("MASTER_PORT", "45125");        // another job on the machine: most likely another port
    CHECK(launcherRootAddress(detected()) != addr);
    ScopedEnv edge("MASTER_PORT", "32766");         // 32767 is still below the ephemeral ports
    CHECK(launcherRootAddress(detected()) == "node7:32767");
  }
  SECTION("partial: no MASTER_ADDR") {
    ScopedEnv addr("MASTER_ADDR", nullptr);
    std::string msg = errorOf([&] { launcherRootAddress(detected()); }, hocclInvalidUsage);
    CHECK_THAT(msg, Catch::Contains("cannot find the job's root address") && Catch::Contains("RANK=3") &&
                        Catch::Contains("WORLD_SIZE=4") && Catch::Contains("MASTER_ADDR (unset)") &&
                        Catch::Contains("MASTER_PORT=29500"));
  }
  SECTION("partial: RANK without WORLD_SIZE, and the reverse") {
    ScopedEnv size("WORLD_SIZE", nullptr);
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidUsage),
               Catch::Contains("RANK is set but WORLD_SIZE is not"));
    ScopedEnv rank("RANK", nullptr), size2("WORLD_SIZE", "2");
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidUsage),
               Catch::Contains("WORLD_SIZE is set but RANK is not"));
  }
  SECTION("malformed values") {
    {
      ScopedEnv rank("RANK", "3x");
      CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("RANK='3x' is not valid"));
    }
    {
      ScopedEnv rank("RANK", "4");
      CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument),
                 Catch::Contains("RANK=4 is not below WORLD_SIZE=4"));
    }
    {
      ScopedEnv size("WORLD_SIZE", "0");
      CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("WORLD_SIZE='0'"));
    }
    {
      ScopedEnv lr("LOCAL_RANK", "2");
      CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument),
                 Catch::Contains("LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2 do not fit"));
    }
    {
      ScopedEnv port("MASTER_PORT", "70000");
      CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument),
                 Catch::Contains("MASTER_PORT='70000'") && Catch::Contains("[1, 65535]"));
    }
    {
      ScopedEnv port("MASTER_PORT", "-1");
      CHECK_THROWS_AS(detectLauncher(), Error);
    }
  }
}

TEST_CASE("launchers: Open MPI", "[launcher]") {
  LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"OMPI_MCA_ess_base_jobid", "1411121153"},
                   {"PMIX_RANK", "1"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"}});
  LauncherInfo info = detected();
  CHECK(info.launcher == "Open MPI");
  CHECK(info.rank == 1);
  CHECK(info.size == 2);
  CHECK(info.localRank == 1);
  CHECK(info.localSize == 2);
  const std::string root = launcherRootAddress(info);
  CHECK(root.rfind("127.0.0.1:", 0) == 0);  // every rank on this host
  const int port = portOf(root);
  CHECK(port >= kLauncherPortBase);
  CHECK(port < kLauncherPortBase + kLauncherPortRange);
  {
    // Rank 0 of the same job computes the same address and secret; another job another secret.
    ScopedEnv r("OMPI_COMM_WORLD_RANK", "0"), lr("OMPI_COMM_WORLD_LOCAL_RANK", "0"), pr("PMIX_RANK", "0");
    LauncherInfo zero = detected();
    CHECK(launcherRootAddress(zero) == root);
    CHECK(launcherToken(zero, root) == launcherToken(info, root));
    ScopedEnv job("OMPI_MCA_ess_base_jobid", "1411121154");
    CHECK(launcherToken(detected(), root) != launcherToken(info, root));
    ScopedEnv token("HOCCL_AUTH_TOKEN", "s3cret");
    CHECK(launcherToken(detected(), root) == "s3cret");
  }
  {
    ScopedEnv ls("OMPI_COMM_WORLD_LOCAL_SIZE", "1"), lr("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    std::string msg = errorOf([] { launcherRootAddress(detected()); }, hocclInvalidUsage);
    CHECK_THAT(msg, Catch::Contains("OMPI_COMM_WORLD_LOCAL_SIZE=1") && Catch::Contains("HOCCL_COMM_ID (unset)") &&
                        Catch::Contains("-x HOCCL_COMM_ID"));
  }
  {
    ScopedEnv s("OMPI_COMM_WORLD_SIZE", "zwei");
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("OMPI_COMM_WORLD_SIZE='zwei'"));
  }
  // Asking for a 1-rank communicator under a launcher of 2 processes is refused: no silent 1-rank jobs.
  CHECK_THAT(errorOf([] { launcherUniqueId(0, 1); }, hocclInvalidUsage),
             Catch::Contains("a 1-rank communicator") && Catch::Contains("Open MPI started 2 processes"));
}

TEST_CASE("launchers: Slurm", "[launcher]") {
  LauncherEnv env({{"SLURM_PROCID", "5"},
                   {"SLURM_NTASKS", "8"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "2"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x3),2"},
                   {"SLURM_STEP_NODELIST", "n[07-10]"},
                   {"SLURM_JOB_NODELIST", "other[1-9]"},
                   {"SLURM_JOB_ID", "123"},
                   {"SLURM_STEP_ID", "0"}});
  LauncherInfo info = detected();
  CHECK(info.launcher == "Slurm");
  CHECK(info.rank == 5);
  CHECK(info.size == 8);
  CHECK(info.localRank == 1);
  CHECK(info.localSize == 2);
  CHECK(info.nodeIndex == 2);
  CHECK(info.rootHost == "n07");  // the step's first node
  const std::string root = launcherRootAddress(info);
  CHECK(root.rfind("n07:", 0) == 0);
  {
    ScopedEnv r("SLURM_PROCID", "0"), n("SLURM_NODEID", "0"), l("SLURM_LOCALID", "0");
    CHECK(launcherRootAddress(detected()) == root);
    ScopedEnv step("SLURM_STEP_ID", "1");
    CHECK(launcherRootAddress(detected()) != root);  // another step, another port (equal with 1/12000 odds)
  }
  {
    ScopedEnv s("SLURM_STEP_NODELIST", nullptr);
    CHECK(detected().rootHost == "other1");
  }
  {
    ScopedEnv s("SLURM_NTASKS", nullptr), p("SLURM_NPROCS", "8");
    CHECK(detected().size == 8);
  }
  {
    ScopedEnv t("SLURM_STEP_TASKS_PER_NODE", "3");  // node 2 is beyond a 1-node list
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument),
               Catch::Contains("SLURM_STEP_TASKS_PER_NODE='3'"));
    ScopedEnv t2("SLURM_STEP_TASKS_PER_NODE", "2(x3");
    CHECK_THROWS_AS(detectLauncher(), Error);
    ScopedEnv t3("SLURM_STEP_TASKS_PER_NODE", "2x,2,2,2");
    CHECK_THROWS_AS(detectLauncher(), Error);
  }
  {
    ScopedEnv s("SLURM_STEP_NODELIST", "n[07-");
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("SLURM_STEP_NODELIST='n[07-'"));
  }
  {
    ScopedEnv s("SLURM_STEP_NODELIST", nullptr), j("SLURM_JOB_NODELIST", nullptr);
    std::string msg = errorOf([] { launcherRootAddress(detected()); }, hocclInvalidUsage);
    CHECK_THAT(msg, Catch::Contains("SLURM_STEP_NODELIST (unset)") && Catch::Contains("SLURM_NODELIST (unset)") &&
                        Catch::Contains("SLURM_PROCID=5"));
  }
}

TEST_CASE("launchers: PMIx", "[launcher]") {
  LauncherEnv env({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}});
  CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidUsage),
             Catch::Contains("PMIX_RANK is set but the job size is unknown") && Catch::Contains("HOCCL_WORLD_SIZE"));
  {
    ScopedEnv size("HOCCL_WORLD_SIZE", "4");
    LauncherInfo info = detected();
    CHECK(info.launcher == "PMIx");
    CHECK(info.rank == 2);
    CHECK(info.size == 4);
    CHECK_THAT(errorOf([&] { launcherRootAddress(info); }, hocclInvalidUsage), Catch::Contains("PMIX_RANK=2"));
    ScopedEnv id("HOCCL_COMM_ID", "h:1");
    CHECK(launcherRootAddress(info) == "h:1");
  }
  // Under srun --mpi=pmix: Slurm's variables give the size and the root host.
  ScopedEnv a("SLURM_PROCID", "2"), b("SLURM_NTASKS", "3"), c("SLURM_STEP_NODELIST", "c[1-3]"), d("SLURM_JOB_ID", "9");
  LauncherInfo info = detected();
  CHECK(info.launcher == "Slurm (PMIx)");
  CHECK(info.size == 3);
  CHECK(info.rootHost == "c1");
  ScopedEnv bad("PMIX_RANK", "-2");
  CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("PMIX_RANK='-2'"));
}

TEST_CASE("launchers: MPICH/Hydra", "[launcher]") {
  LauncherEnv env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  LauncherInfo info = detected();
  CHECK(info.launcher == "MPICH/Hydra");
  CHECK(info.localSize == 2);
  CHECK_THAT(errorOf([&] { launcherRootAddress(info); }, hocclInvalidUsage),
             Catch::Contains("PMI_RANK=1") && Catch::Contains("MPI_LOCALNRANKS=2") && Catch::Contains("HOCCL_PORT"));
  {
    ScopedEnv port("HOCCL_PORT", "24000");
    CHECK(launcherRootAddress(info) == "127.0.0.1:24000");
  }
  {
    ScopedEnv s("PMI_SIZE", "");  // empty counts as unset
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidUsage), Catch::Contains("PMI_RANK is set but PMI_SIZE"));
  }
  {
    ScopedEnv s("PMI_SIZE", "2 ");
    CHECK_THAT(errorOf([] { detectLauncher(); }, hocclInvalidArgument), Catch::Contains("PMI_SIZE='2 '"));
  }
  // Under srun --mpi=pmi2 (SLURM_PROCID equal to PMI_RANK, the same size): Slurm's node list gives the root.
  ScopedEnv a("SLURM_PROCID", "1"), b("SLURM_NTASKS", "2"), c("SLURM_STEP_NODELIST", "h1,h2");
  CHECK(detected().launcher == "Slurm (PMI)");
  CHECK(detected().rootHost == "h1");
}
