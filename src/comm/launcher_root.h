/// @file launcher_root.h
/// The bootstrap root of a launched job: the address rank 0 listens on and the job's secret, computed the same way
/// on every rank from HOCCL_COMM_ID / HOCCL_PORT / HOCCL_AUTH_TOKEN and the launcher's variables
/// (docs/launchers.md gives the rule).
#pragma once

#include <string>

#include "base/boot/bootstrap.h"
#include "comm/launcher_env.h"

namespace hoccl {

/// The first port of the range that a job's root port is drawn from when the launcher gives no port.
constexpr int kLauncherPortBase = 20000;
/// The number of ports in that range (20000..31999: below Linux's ephemeral ports, 32768 and up).
constexpr int kLauncherPortRange = 12000;
/// The first of Linux's ephemeral ports by default (net.ipv4.ip_local_port_range), which connect() and bind(0) hand
/// out: torchrun --standalone's store port is one, and the port above it may be taken by any outgoing connection.
constexpr int kFirstEphemeralPort = 32768;

/// host:port of the job's root: HOCCL_COMM_ID; else the launcher's root host (loopback when every rank is on this
/// host) and HOCCL_PORT, the launcher's port rule (torchrun: MASTER_PORT+1 below the ephemeral ports) or
/// kLauncherPortBase + a hash of the job key. Throws InvalidUsage naming every variable read when neither is known.
std::string launcherRootAddress(const LauncherInfo& info);

/// The job secret: HOCCL_AUTH_TOKEN, else one derived from the job key and the root address. A derived one keeps
/// jobs apart but is not secret (anyone who sees the environment can compute it).
std::string launcherToken(const LauncherInfo& info, const std::string& rootAddress);

/// The unique id of rank `rank` of `nranks` for launcher-style init (rank 0 starts serving it): HOCCL_COMM_ID and
/// HOCCL_AUTH_TOKEN when both are set, else derived from the launcher as above; a 1-rank job without a launcher
/// gets a private id. Refuses a 1-rank communicator under a launcher that started several processes.
boot::UniqueId launcherUniqueId(int rank, int nranks);

}  // namespace hoccl
