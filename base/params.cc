// The parameter registry: every HOCCL_* variable hoccl reads, with its default and a line of documentation.
#include "base/params.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace hoccl::params {
namespace {

std::atomic<bool> ncclNames{false};

const Param* find(const char* name) {
  for (const auto& p : all())
    if (std::string(p.name) == name) return &p;
  return nullptr;
}

}  // namespace

const std::vector<Param>& all() {
  // Never destroyed: detached threads (the bootstrap root) may read parameters while the process exits.
  static const std::vector<Param>& table = *new std::vector<Param>{
      {"DEBUG", "", "Log level: VERSION, WARN, INFO or TRACE (default: nothing but errors returned to the caller)"},
      {"DEBUG_SUBSYS", "INIT,COLL,P2P,SHM,NET,BOOTSTRAP,TOPO,TUNING,ENV,PARO",
       "Subsystems to log, comma-separated; a leading ^ excludes the listed ones; ALL for everything"},
      {"DEBUG_FILE", "", "Write logs to this file instead of stderr (%h = host name, %p = pid)"},
      {"TIMEOUT", "300", "Seconds any wait may last before it fails naming the silent peer"},
      {"ALGO", "", "Force an algorithm for every collective: ring, ho_ring, direct (empty = the tuner decides)"},
      {"SHM_DISABLE", "0", "1 disables the shared-memory transport (same-host peers then use tcp)"},
      {"HOSTID", "", "Override the host identity (emulate several hosts on one machine)"},
      {"SWITCH_ID", "", "This rank's switch identity (ranks with equal ids share a switch)"},
      {"TOPO_FILE", "", "JSON (or Slurm topology.conf) file mapping switches to hosts"},
      {"TOPO_PROBE", "0", "1 clusters hosts into switches by a bandwidth probe when no other source says"},
      {"SOCKET_IFNAME", "", "Network interfaces to use: prefix list, ^ to exclude, = for exact names"},
      {"COMM_ID", "", "host:port of the bootstrap root for launcher-style init (rank 0 listens there)"},
      {"AUTH_TOKEN", "", "Job secret for launcher-style init (any text; hashed into the 128-bit secret)"},
      {"RANK", "", "This process's rank for launcher-style init (also OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"},
      {"WORLD_SIZE", "", "Number of ranks for launcher-style init (also OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)"},
      {"CHUNK_SIZE", "1048576", "Pipelining chunk in bytes for chained algorithms (broadcast, reduce)"},
      {"SHM_SLOT_SIZE", "524288", "Bytes per shared-memory ring slot"},
      {"SHM_SLOTS", "8", "Slots per shared-memory ring (per direction and peer)"},
      {"SHM_SINGLE_COPY_MIN", "0",
       "Shared-memory messages of at least this many bytes are read straight from the sender's buffer (process_vm_readv); 0 = never (default: measured slower here, see docs/performance.md)"},
      {"SMALL_MAX_BYTES", "32768",
       "Size of the shared arena of the one-shot path for small collectives when all ranks share a host: the largest per-rank payload it can take (calls also stay under 2 KiB x ranks); 0 = off"},
      {"CMA_MIN_BYTES", "262144",
       "Collectives of at least this many bytes among processes of one host copy straight between the ranks' buffers (process_vm_readv/writev, when permitted); 0 = never. Unset: all-reduce and reduce-scatter from this default, all-gather from 32 KiB, broadcast from 128 KiB"},
      {"TCP_CONNS", "2", "TCP connections per peer; large messages are striped across them"},
      {"TCP_STRIPE_SIZE", "524288", "Bytes per stripe when a tcp message is split across the connections of a peer"},
      {"NET", "", "Preferred network transport for different hosts; accepted for NCCL compatibility, tcp is the only one yet"},
      {"IB_DISABLE", "0", "1 disables the RDMA (ibverbs) transport; accepted, no RDMA transport exists yet"},
      // Cost model (topology/cost_model.h): the tuner's alpha-beta parameters per link class.
      {"LINK_BW_SELF", "10000", "Cost model: local copy/reduce rate, MB/s"},
      {"LINK_BW_INTRA_HOST", "8000", "Cost model: bandwidth between ranks of one host, MB/s per flow"},
      {"LINK_BW_INTRA_SWITCH", "1200", "Cost model: host NIC bandwidth (hosts under one switch), MB/s per direction"},
      {"LINK_BW_INTER_SWITCH", "1200", "Cost model: a switch's uplink to the spine, MB/s per direction"},
      {"LINK_LAT_SELF", "", "Cost model: cost of one local copy/reduce, whole microseconds (default 0.1)"},
      {"LINK_LAT_INTRA_HOST", "2", "Cost model: message latency inside a host, microseconds"},
      {"LINK_LAT_INTRA_SWITCH", "15", "Cost model: message latency between hosts of one switch, microseconds"},
      {"LINK_LAT_INTER_SWITCH", "20", "Cost model: message latency across switches, microseconds"},
  };
  return table;
}

std::optional<std::string> get(const char* name) {
  std::string key = std::string("HOCCL_") + name;
  if (const char* v = std::getenv(key.c_str()); v && *v) return std::string(v);
  if (ncclNames.load(std::memory_order_relaxed)) {
    std::string nccl = std::string("NCCL_") + name;
    if (const char* v = std::getenv(nccl.c_str()); v && *v) return std::string(v);
  }
  return std::nullopt;
}

std::string getString(const char* name) {
  if (auto v = get(name)) return *v;
  const Param* p = find(name);
  return p ? p->defaultValue : "";
}

int64_t getInt(const char* name) {
  std::string text = getString(name);
  if (text.empty()) return 0;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0')
    throwInvalidArgument("HOCCL_" + std::string(name) + "='" + text + "' is not an integer; unset it or give a number");
  return v;
}

void enableNcclNames() { ncclNames.store(true); }

}  // namespace hoccl::params
