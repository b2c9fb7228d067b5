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
  STRING(WAIT_POLICY, "auto",                                                                                         \
         "How a rank waits for a late peer (base/wait.h): spin (poll about 1 ms, then yield, then block), share (a "   \
         "few polls and yields, then block), block (block at once), or auto: spin when this host has a core for "      \
         "every local rank and its run queue leaves them room, block with more than 8 local ranks per core, else "    \
         "share")                                                                                                      \
  /* Reliability (src/comm/call_check.cc, src/comm/flight_recorder.cc) */                                              \
  INT(CHECK_MISMATCH, 1, 0, 2,                                                                                         \
      "Mismatch check: ranks compare a fingerprint of each call (collective, count, type, op, root, algorithm) "       \
      "before it runs and fail with hocclInvalidUsage naming the differing calls. 0 = off, 1 = the first 16 calls "    \
      "of a communicator and every call of 1 MiB or more, 2 = every call")                                             \
  STRING(CHECK_EXCHANGE, "auto",                                                                                       \
         "How the mismatch check compares the calls: doubling = ceil(log2 N) rounds, each with the 2 peers r +- 2^k, " \
         "whose error names rank 0's call and the lowest rank whose call differs; all = every fingerprint reaches "    \
         "every rank (one round with every peer, or N-1 steps round a ring with lazy connections), whose error lists " \
         "every rank's call; auto = doubling, or all with lazy connections above 4 ranks or under HOCCL_MAX_CONNS "    \
         "(it connects only the ring neighbours). Use the same value on every rank")                                   \
  INT(TRACE_SIZE, 64, 0, 1048576,                                                                                      \
      "Flight recorder: operations kept per communicator (sequence, collective, bytes, algorithm, state, timings); "   \
      "0 = off")                                                                                                       \
  STRING(TRACE_DUMP, "",                                                                                               \
         "Flight recorder: JSON file written on an error, a timeout and SIGUSR1 (%r = rank, %p = pid), read by "        \
         "hoccl-trace. Unset: nothing is written and SIGUSR1 is left alone")                                           \
  /* Choice of algorithm or shortcut (src/algo, src/comm/plan.cc) */                                                   \
  STRING(ALGO, "",                                                                                                     \
         "Force a choice for every collective: a schedule (ring, ho_ring, direct) or a one-host shortcut (small, "     \
         "single_copy); a collective the forced one cannot run gets the tuner's schedule, without shortcuts. An "      \
         "unknown name is an error. Unset: the tuner compares schedules and shortcuts by predicted time")              \
  INT(CHUNK_SIZE, 1048576, 1, int64_t{1} << 30,                                                                        \
      "Pipelining chunk in bytes of the ring broadcast and reduce and of every HO-Ring collective")                    \
  INT(OVERLAP_TWO_LEVEL, 1, 0, 1,                                                                                      \
      "1: hocclAllGatherOverlap / hocclReduceScatterOverlap use the two-level schedule (inter-host pieces beside "     \
      "the intra-host ring) where every host has the same number (>= 2) of ranks; 0: always the flat ring")            \
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
      "all-gather from 32 KiB, broadcast from 128 KiB; on buffers not registered on every rank, the tuner takes "      \
      "all-reduce, reduce-scatter and all-gather from 4 MiB only")                                                     \
  INT(TCP_CONNS, 2, 1, 16, "TCP connections per peer; large messages are striped across them")                         \
  INT(TCP_STRIPE_SIZE, 524288, 4096, int64_t{1} << 30,                                                                 \
      "Bytes per stripe when a tcp message is split across the connections of a peer (rounded up to a multiple of "    \
      "4096)")                                                                                                         \
  STRING(NET, "",                                                                                                     \
         "The network transport for peers that shared memory does not reach (all peers with SHM_DISABLE=1): tcp, "     \
         "ucx (when built with UCX) or ib (ibverbs, when built), case-insensitive, socket = tcp; unset: ibverbs where " \
         "both ranks have an RDMA port, else tcp. An unknown or missing one fails init listing what the build has")    \
  STRING(UCX_PLUGIN, "",                                                                                               \
         "Path of the UCX transport's plugin (libhoccl-ucx.so, loaded when HOCCL_NET=ucx needs it). Unset: next to "   \
         "libhoccl, then the library search path")                                                                     \
  /* scale (issue 19): lazy connections */                                                                          \
  STRING(CONNECT, "lazy",                                                                                             \
         "When a rank connects to its peers: lazy = the first time a call needs the peer (a ring touches 2), eager = " \
         "every peer at init. Every rank of a job must use the same. Transports that cannot connect lazily (ucx, ib) " \
         "connect at init either way")                                                                                 \
  INT(MAX_CONNS, 0, 0, 1 << 20,                                                                                        \
      "With lazy connections: the most peers a rank keeps connected over a transport that can close idle connections " \
      "(tcp, shm); past it, connections no call in flight uses are closed, least recently used first, through a "    \
      "handshake with the peer (shm: their slots unmapped and freed), and reconnected on their next use. 0 = no "     \
      "limit. Use the same value on every rank")                                                                       \
  INT(COMM_SPLIT_SHARE_RESOURCES, 0, 0, 1,                                                                             \
      "1: a split communicator uses its parent's connections (the parent's own lender's, for a split of a split) "     \
      "instead of making its own, when config.splitShare does not say otherwise and every member of the new "          \
      "communicator agrees and sets no HOCCL_MAX_CONNS; the parent and its sharing children then run one call at "     \
      "a time (a second one fails with hocclInvalidUsage). 0 = every communicator connects its own peers")             \
  /* RDMA verbs transport (transports/ibverbs) */                                                                      \
  INT(IB_DISABLE, 0, 0, 1,                                                                                             \
      "1 turns the ibverbs (RDMA) transport off; without it, or without a usable RDMA device, peers on other hosts "   \
      "use tcp")                                                                                                       \
  STRING(IB_HCA, "",                                                                                                   \
         "RDMA devices and ports the ibverbs transport may use: comma-separated device[:port] name prefixes "         \
         "(mlx5_0:1,mlx5_1), a leading ^ excludes them, a leading = makes the names exact. Unset: every active port") \
  INT(IB_GID_INDEX, std::nullopt, 0, 255,                                                                              \
      "GID table index for RoCE ports. Unset: the first RoCE v2 GID (an IPv4-mapped one if any), else index 0; "      \
      "InfiniBand ports route by LID")                                                                                 \
  INT(IB_TIMEOUT, 20, 1, 31, "ibverbs queue pairs' ACK timeout: 4.096 us x 2^value before a packet is retried")       \
  INT(IB_RETRY_CNT, 7, 0, 7, "ibverbs queue pairs' retries before a send fails (then the peer is reported lost)")     \
  INT(IB_ADAPTIVE_ROUTING, 0, 0, 1,                                                                                    \
      "1 posts each ibverbs chunk as an RDMA write followed by an empty write with immediate, for fabrics with "       \
      "adaptive routing; 0 sends one write with immediate per chunk")                                                  \
  INT(IB_SLOTS, 8, 2, 64, "ibverbs bounce buffers per peer and direction (the flow-control credits)")                 \
  INT(IB_SLOT_SIZE, 524288, 4096, int64_t{1} << 30,                                                                    \
      "Bytes per ibverbs bounce buffer, the largest chunk of a message (rounded up to a multiple of 4096)")            \
  STRING(SOCKET_IFNAME, "",                                                                                            \
         "IPv4 network interfaces to use: comma-separated name prefixes, a leading ^ excludes them, a leading = "      \
         "makes the names exact. Unset: the first interface up that is not loopback")                                  \
  /* Device (kernels/device) */                                                                                        \
  STRING(DEVICE, "",                                                                                                   \
         "Device for device buffers: sim (the simulated device: CPU memory tagged as device memory, streams as "       \
         "threads; for tests), cuda or none. Unset: CUDA when the driver finds a GPU (the device current on the "      \
         "thread that first needs one, as cudaSetDevice left it, else device 0), else none")                           \
  INT(SIM_HOST_ACCESS, 0, 0, 1,                                                                                        \
      "Simulated device only: 1 lets host code read and write its device memory directly (a GPU's host cannot); "      \
      "0 (strict, as a GPU) maps device memory with no host access, so a direct host access faults")                   \
  INT(SIM_LAZY_LOADING, 0, 0, 1,                                                                                       \
      "Simulated device only, a test aid: 1 starts with no kernel loaded, as CUDA's lazy loading, and fails the "      \
      "first launch of a kernel while a stream waits for a host flag (on a GPU it deadlocks); 0 preloads them all")    \
  INT(STAGING_CHUNK, 1048576, 4096, int64_t{1} << 30,                                                                  \
      "Bytes per piece when device buffers are staged through pinned host memory (a GPU with the shm or tcp "          \
      "transport); rounded down to a multiple of 64. Must be the same on every rank")                                  \
  INT(STAGING_SLOTS, 4, 2, 64, "Pinned host staging buffers per peer and direction (of STAGING_CHUNK bytes each)")     \
  INT(DEVICE_ONE_SHOT, 2, 0, 2,                                                                                        \
      "Small all-reduces (up to 64 KiB) on device buffers of 2-8 ranks of one host run as one kernel on the caller's " \
      "stream that reads the peers' inputs through IPC mappings, without the proxy thread: 1 on, 0 off, 2 (auto) on "  \
      "for the simulated device and off on a GPU until tools/gpu-check has run it there (docs/cuda.md). Set at "       \
      "init; the ranks agree")                                                                                         \
  INT(DEVICE_P2P, 1, 0, 1,                                                                                             \
      "Device buffers of ranks on one host go directly between their devices (CUDA IPC; the simulated device's "       \
      "shared mappings), into STAGING_SLOTS slots of STAGING_CHUNK bytes on the receiver, when both devices reach "    \
      "each other; 0 stages them through pinned host memory. The two ranks of a pair agree on first use")              \
  STRING(IPC_HANDLE, "auto",                                                                                          \
         "How a rank's device receive area is shared with a peer on its host for the direct path: fd (cuMem memory, "  \
         "its POSIX file descriptor passed over a Unix socket), legacy (cudaIpcMemHandle), or auto: fd when the "     \
         "device can export cuMem memory (the simulated device always can), else legacy")                             \
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
      "This process's rank for launcher-style init (else torchrun's, Open MPI's, PMIx's, MPICH's or Slurm's)")         \
  INT(WORLD_SIZE, std::nullopt, 1, 16777216,                                                                           \
      "Number of ranks for launcher-style init (else torchrun's, Open MPI's, PMIx's, MPICH's or Slurm's)")             \
  /* Launchers (track launch: src/comm/launcher_*.cc, docs/launchers.md) */                                            \
  INT(LOCAL_RANK, std::nullopt, 0, 16777215, "This process's rank among the ranks of its host (set by hoccl-run)")     \
  INT(LOCAL_SIZE, std::nullopt, 1, 16777216, "Number of ranks on this process's host (set by hoccl-run)")              \
  INT(PORT, std::nullopt, 1, 65535,                                                                                    \
      "Bootstrap root port under a launcher when HOCCL_COMM_ID is unset (unset: MASTER_PORT+1 under torchrun when it " \
      "is below 32768, else 20000 + a hash of the launcher's job id mod 12000; docs/launchers.md)")                    \
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
  INT(LINK_LAT_INTRA_HOST, std::nullopt, 1, 10000000,                                                                 \
      "Cost model: message latency inside a host, whole microseconds (unset: 0.5, measured, docs/model.md)")           \
  INT(LINK_LAT_INTRA_SWITCH, 15, 1, 10000000, "Cost model: message latency between hosts of one switch, microseconds") \
  INT(LINK_LAT_INTER_SWITCH, 20, 1, 10000000, "Cost model: message latency across switches, microseconds")            \
  /* Cost model file (track model, issue 17) */                                                                        \
  STRING(MODEL_FILE, "",                                                                                               \
         "Cost model file (JSON, written by hoccl-model calibrate): replaces the built-in link parameters; "          \
         "HOCCL_LINK_* still override")                                                                                \
  INT(TUNE_ONLINE, 1, 0, 2,                                                                                            \
      "Online choice on one host (src/comm/online_choice.h): from the 64th call of a shape, the tuner's pick is "      \
      "timed against its runner-up (the single copy, or the best schedule) and, where every variant gives the same "  \
      "bits, the best schedule of another algorithm, in blocks of 16 calls, and the fastest kept, re-checked so "      \
      "that the losers cost under 2%. 0: off; 1: where every variant gives the same bits (no "                         \
      "reduction, min/max, integers, 2 ranks, or a float sum/product/average the single copy adds in the "            \
      "schedule's order, kernels/fold_order.h); 2: every shape (results may then vary in the last bits)")            \
  INT(TUNE_PROBE, 0, 0, 1,                                                                                             \
      "1: at init rank 0 measures latency and bandwidth to one peer per link class (short probes that stop 0.5 s "     \
      "after the start) and every rank's tuner uses that model, agreed through the bootstrap; HOCCL_LINK_* override")
