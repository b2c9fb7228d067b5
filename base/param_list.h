/// @file param_list.h
/// Every parameter hoccl reads, declared once. base/params.h turns each line into a typed object
/// (`params::TIMEOUT.get()`), `params::all()` lists them, and `hoccl-run --params` / the README table print them.
///
/// The list is an X-macro: `HOCCL_PARAM_LIST(INT, STRING)` expands `INT(NAME, default, lo, hi, doc)` for every
/// integer parameter and `STRING(NAME, default, doc)` for every text parameter. NAME is the variable without its
/// prefix (HOCCL_NAME; NCCL_NAME too once the NCCL shim enabled it). An integer's default is `std::nullopt` when it
/// has none; a text default of "" means none. Integers outside [lo, hi] are refused with an error naming the range.
/// A doc is one line for a person: what the value does today, with its unit; no promises of what it may do later.
#pragma once

#include <cstdint>
#include <optional>

/// The declaration list; see the file comment.
#define HOCCL_PARAM_LIST(INT, STRING)                                                                                  \
  /* Logging (base/log.cc) */                                                                                          \
  STRING(DEBUG, "",                                                                                                    \
         "Log level: VERSION, WARN, INFO or TRACE; unset or any other value logs nothing (errors still reach the "     \
         "caller)")                                                                                                    \
  STRING(DEBUG_SUBSYS, "INIT,COLL,P2P,SHM,NET,BOOTSTRAP,TOPO,TUNING,ENV,PARO",                                         \
         "Subsystems to log, comma-separated (also GRAPH, ALLOC, CALL); a leading ^ excludes the listed ones; ALL "    \
         "for everything")                                                                                             \
  STRING(DEBUG_FILE, "", "Write logs to this file instead of stderr (%h = host name, %p = pid)")                       \
  /* Waits (base/socket.cc, src/exec, src/comm, transports/shm) */                                                     \
  INT(TIMEOUT, 300, 1, 31536000, "Seconds any wait may last before it fails naming the silent peer")                   \
  /* Choice of algorithm or shortcut (src/algo, src/comm/plan.cc) */                                                   \
  STRING(ALGO, "",                                                                                                     \
         "Force a choice for every collective: a schedule (ring, ho_ring, direct) or a one-host shortcut (small, "     \
         "single_copy); a collective the forced one cannot run gets the tuner's schedule, without shortcuts. An "      \
         "unknown name is an error. Unset: the tuner compares schedules and shortcuts by predicted time")              \
  INT(CHUNK_SIZE, 1048576, 1, int64_t{1} << 30,                                                                        \
      "Pipelining chunk in bytes of the ring broadcast and reduce and of every HO-Ring collective")                    \
  /* Transports (transports/) */                                                                                       \
  INT(SHM_DISABLE, 0, 0, 1,                                                                                            \
      "1 turns the shared-memory transport off: peers on the same host then use the network transport (NET)")          \
  INT(SHM_SLOT_SIZE, 524288, 4096, int64_t{1} << 30,                                                                   \
      "Bytes per shared-memory ring slot (rounded up to a multiple of 4096)")                                          \
  INT(SHM_SLOTS, 8, 2, 64, "Slots per shared-memory ring (one ring per direction and peer)")                           \
  INT(SMALL_MAX_BYTES, 32768, 0, int64_t{1} << 24,                                                                     \
      "Bytes per rank and slot of the shared arena of the one-host shortcuts (made when every peer is reached "        \
      "through shared memory): the largest per-rank payload of the small shortcut, which also stays under 2 KiB x "    \
      "ranks; 0 = no arena, so neither the small nor the single_copy shortcut")                                        \
  INT(CMA_MIN_BYTES, 262144, 0, int64_t{1} << 50,                                                                      \
      "Smallest collective, in bytes, that the single_copy shortcut may take (copies straight between the ranks' "     \
      "buffers of one host with process_vm_readv/writev, when permitted; needs the arena of SMALL_MAX_BYTES); the "    \
      "tuner takes it when predicted faster; 0 = never. Unset: all-reduce and reduce-scatter from this default, "      \
      "all-gather from 32 KiB, broadcast from 128 KiB")                                                                \
  INT(TCP_CONNS, 2, 1, 16, "TCP connections per peer; large messages are striped across them")                         \
  INT(TCP_STRIPE_SIZE, 524288, 4096, int64_t{1} << 30,                                                                 \
      "Bytes per stripe when a tcp message is split across the connections of a peer (rounded up to a multiple of "    \
      "4096)")                                                                                                         \
  STRING(NET, "",                                                                                                     \
         "The network transport for peers that shared memory does not reach (all peers with SHM_DISABLE=1): tcp or "   \
         "ucx (when built with UCX), case-insensitive, socket = tcp; unset: tcp. An unknown or missing one fails "      \
         "init listing what the build has")                                                                            \
  INT(IB_DISABLE, 0, 0, 1,                                                                                             \
      "Accepted for NCCL compatibility and ignored: no effect, hoccl has no RDMA (ibverbs) transport")                 \
  STRING(SOCKET_IFNAME, "",                                                                                            \
         "IPv4 network interfaces to use: comma-separated name prefixes, a leading ^ excludes them, a leading = "      \
         "makes the names exact. Unset: the first interface up that is not loopback")                                  \
  /* Identity and topology (topology/, src/comm/topo_probe.cc) */                                                      \
  STRING(HOSTID, "", "Override the host identity (emulate several hosts on one machine)")                              \
  STRING(SWITCH_ID, "", "This rank's switch identity (ranks with equal ids share a switch)")                           \
  STRING(TOPO_FILE, "", "JSON (or Slurm topology.conf) file mapping switches to hosts")                                \
  INT(TOPO_PROBE, 0, 0, 1,                                                                                             \
      "1 groups hosts into switches by a bandwidth probe at init when no rank knows its switch (no TOPO_FILE, "        \
      "SWITCH_ID or SLURM_TOPOLOGY_ADDR) and there are at least 3 hosts")                                              \
  /* Launcher-style init (base/boot, src/comm/launcher_env.cc, src/shim) */                                            \
  STRING(COMM_ID, "", "host:port of the bootstrap root for launcher-style init (rank 0 listens there)")                \
  STRING(AUTH_TOKEN, "", "Job secret for launcher-style init (any text; hashed into the 128-bit secret)")              \
  INT(RANK, std::nullopt, 0, 16777215,                                                                                 \
      "This process's rank for launcher-style init (else OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID)")             \
  INT(WORLD_SIZE, std::nullopt, 1, 16777216,                                                                           \
      "Number of ranks for launcher-style init (else OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS)")                 \
  /* Cost model of the tuner (topology/link_model.cc): alpha-beta parameters per link class */                         \
  INT(LINK_BW_SELF, 10000, 1, 100000000, "Cost model: local copy/reduce rate, MB/s")                                   \
  INT(LINK_BW_INTRA_HOST, 4000, 1, 100000000,                                                                          \
      "Cost model: bandwidth between ranks of one host through the shared-memory slots, MB/s per flow (4000: "         \
      "2-rank ring all-reduce of 1 MiB measured at 260-430 us on the build machine)")                                  \
  INT(LINK_BW_INTRA_SWITCH, 1200, 1, 100000000,                                                                        \
      "Cost model: host NIC bandwidth (hosts under one switch), MB/s per direction")                                   \
  INT(LINK_BW_INTER_SWITCH, 1200, 1, 100000000, "Cost model: a switch's uplink to the spine, MB/s per direction")      \
  INT(LINK_LAT_SELF, std::nullopt, 1, 10000000,                                                                        \
      "Cost model: cost of one local copy/reduce, whole microseconds (unset: 0.1)")                                    \
  INT(LINK_LAT_INTRA_HOST, 2, 1, 10000000, "Cost model: message latency inside a host, microseconds")                  \
  INT(LINK_LAT_INTRA_SWITCH, 15, 1, 10000000, "Cost model: message latency between hosts of one switch, microseconds") \
  INT(LINK_LAT_INTER_SWITCH, 20, 1, 10000000, "Cost model: message latency across switches, microseconds")
