// hoccl-topo: shows the topology hoccl sees, with the rings of every HO-Ring level.
//   offline:  hoccl-topo --shape 2x2x2 | --hosts "2,2;2,2,2" | --topology FILE [--ranks-per-host G]
//   online:   run as every rank of a job (hoccl-run, tools/cluster/run, mpirun, Slurm): the ranks create a
//             communicator from the launcher environment and rank 0 prints what was detected.
//   default (no shape, no launcher): this host alone, with its hardware.
// Output: text (default), --json, --dot, --png FILE (Graphviz dot); --predict COLL:SIZE compares ring and HO-Ring
// with the cost model (HOCCL_LINK_* parameters; the fast model above 64 ranks, --full for the reference).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "algo/predict.h"
#include "algo/tuner.h"
#include "comm/communicator.h"
#include "comm/gpu_host.h"
#include "kernels/cuda/gpu_query.h"
#include "sched/cost_model.h"
#include "topology/dump.h"
#include "topology/gpu_topology.h"
#include <nlohmann/json.hpp>
#include "hoccl/hoccl.h"

using namespace hoccl;

namespace {

struct Options {
  std::string shape, hosts, topologyFile, png, predict, gpuFile;
  int ranksPerHost = 1;
  bool json = false, dot = false, hw = false, online = false, full = false;
};

std::vector<int> splitInts(const std::string& text, char sep, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw std::runtime_error(
          fmt::format("bad {} '{}': expected positive integers separated by '{}'", what, text, sep));
    }
  }
  return out;
}

topo::Topology offlineTopology(const Options& o) {
  if (!o.shape.empty()) {
    auto v = splitInts(o.shape, 'x', "--shape");
    if (v.size() != 3) throw std::runtime_error("--shape wants SWITCHESxHOSTSxRANKS, e.g. 2x2x2");
    return topo::fromShape(v[0], v[1], v[2]);
  }
  if (!o.hosts.empty()) {
    std::vector<std::vector<int>> counts;
    std::stringstream in(o.hosts);
    std::string sw;
    while (std::getline(in, sw, ';')) counts.push_back(splitInts(sw, ',', "--hosts"));
    return topo::fromCounts(counts);
  }
  return topo::fromSwitchMap(topo::readTopologyFile(o.topologyFile), o.ranksPerHost);
}

// Runs `dot -Tpng` on text; returns an error message or "".
std::string renderPng(const std::string& dotText, const std::string& file) {
  std::string cmd = "dot -Tpng -o '" + file + "'";
  if (file.find('\'') != std::string::npos) return "the PNG file name must not contain a quote";
  FILE* pipe = popen(cmd.c_str(), "w");
  if (!pipe) return "cannot start Graphviz dot";
  fwrite(dotText.data(), 1, dotText.size(), pipe);
  int status = pclose(pipe);
  if (status != 0)
    return "Graphviz 'dot' failed (exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
           "); install it with: apt-get install graphviz";
  return "";
}

std::string predictText(const topo::Topology& t, const std::string& spec, bool full) {
  auto colon = spec.find(':');
  std::string coll = spec.substr(0, colon), size = colon == std::string::npos ? "16M" : spec.substr(colon + 1);
  double mult = 1;
  if (!size.empty() && (size.back() == 'K' || size.back() == 'M' || size.back() == 'G')) {
    mult = size.back() == 'K' ? 1024.0 : size.back() == 'M' ? 1048576.0 : 1073741824.0;
    size.pop_back();
  }
  size_t bytes = static_cast<size_t>(std::stod(size) * mult);
  sched::Coll c;
  if (coll == "allreduce") c = sched::Coll::AllReduce;
  else if (coll == "reducescatter") c = sched::Coll::ReduceScatter;
  else if (coll == "allgather") c = sched::Coll::AllGather;
  else throw std::runtime_error("--predict wants allreduce|reducescatter|allgather:SIZE, e.g. allreduce:16M");
  // Sizes as nccl-tests reports them: the whole buffer (AR) or the output/input of N blocks (RS/AG), floats.
  size_t count = c == sched::Coll::AllReduce ? bytes / 4 : bytes / 4 / t.nranks;
  auto model = topo::LinkModel::fromParams();
  std::string out = fmt::format("cost model ({}):\n", model.describe());
  for (const char* name : {"ring", "ho_ring"}) {
    const sched::CollArgs args{c, 0, t.nranks, count, 0, 0};
    auto p = full ? algo::predictAlgorithm(algo::byName(name), args, t, 4, model)
                  : algo::predict(algo::byName(name), args, t, 4, model);
    double factor = c == sched::Coll::AllReduce ? 2.0 * (t.nranks - 1) / t.nranks : double(t.nranks - 1) / t.nranks;
    out += fmt::format("  {:8s} {} {} B: {:10.1f} us, busbw {:7.3f} GB/s, inter-switch {:.0f} B, {} messages\n", name,
                       coll, bytes, p.seconds * 1e6, p.seconds > 0 ? bytes * factor / p.seconds / 1e9 : 0.0,
                       p.bytes[hocclLinkInterSwitch], p.messages);
  }
  return out;
}

int emit(const topo::Topology& t, const Options& o, const topo::HostHardware* hw) {
  if (o.json) fmt::print("{}\n", topo::toJson(t, hw).dump(2));
  else if (o.dot) fmt::print("{}", topo::toDot(t));
  else fmt::print("{}", topo::toText(t, hw));
  if (!o.predict.empty()) fmt::print("{}", predictText(t, o.predict, o.full));
  if (!o.png.empty()) {
    std::string err = renderPng(topo::toDot(t), o.png);
    if (!err.empty()) {
      fmt::print(stderr, "hoccl-topo: {}\n", err);
      return 1;
    }
    fmt::print(stderr, "hoccl-topo: wrote {}\n", o.png);
  }
  return 0;
}

bool launched() {
  for (const char* v : {"HOCCL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return std::getenv("HOCCL_COMM_ID") != nullptr;
  return false;
}

int online(const Options& o) {
  hocclComm_t comm = nullptr;
  int rank = -1, nranks = 0;
  hocclResult_t r = hocclCommInitFromEnv(&comm, &rank, &nranks);
  if (r != hocclSuccess) {
    fmt::print(stderr, "hoccl-topo: creating the communicator from the launcher environment failed: {} ({})\n",
               hocclGetErrorString(r), hocclGetLastError(nullptr));
    return 1;
  }
  int rc = 0;
  if (rank == 0) {
    topo::HostHardware hw = topo::discoverHost();
    rc = emit(comm->impl->topology(), o, o.hw ? &hw : nullptr);
  }
  // Every rank finishes init before any destroys the communicator (rank 0 also hosts the bootstrap root).
  float token = 0;
  hocclAllReduce(&token, &token, 1, hocclFloat, hocclSum, comm, nullptr);
  hocclCommDestroy(comm);
  return rc;
}

// --gpus live: this host's GPU topology (CUDA driver, NVML, hwloc) and where CUDA device 0 of this process sits.
// No driver or no GPU is not an error: it says so and exits 0.
int liveGpus(bool json) {
  std::vector<std::string> notes;
  const topo::GpuTopology gpus = discoverHostGpus(&notes);
  const std::string bus = cuda::cudaBusId(0);
  const topo::GpuPlacement place = topo::placeGpu(gpus, bus);
  if (json) {
    nlohmann::json doc = nlohmann::json::parse(topo::gpuTopologyJson(gpus));
    doc["notes"] = notes;
    if (place.gpu >= 0)
      doc["this_process"] = {{"bus_id", bus},
                             {"gpu", place.gpu},
                             {"ring_position", place.ringPosition},
                             {"nic", place.nicName.empty() ? nlohmann::json() : nlohmann::json(place.nicName)}};
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  for (const auto& n : notes) fmt::print("INFO: {}\n", n);
  if (gpus.gpus.empty()) {
    fmt::print("INFO: no GPU found on this host: the GPU topology is empty\n");
    return 0;
  }
  fmt::print("{}", topo::describeGpuTopology(gpus));
  if (place.gpu >= 0)
    fmt::print("this process: CUDA device 0 is GPU{} ({}), position {} of the ring, NIC {}\n", place.gpu, bus,
               place.ringPosition, place.nicName.empty() ? "none" : place.nicName);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hoccl-topo: the topology hoccl sees (switches, hosts, ranks) and the rings of every HO-Ring level"};
  Options o;
  auto* shape = app.add_option("--shape", o.shape, "offline: a regular SWITCHESxHOSTSxRANKS cluster, e.g. 2x2x2");
  auto* hosts = app.add_option("--hosts", o.hosts,
                               "offline: ranks per host, hosts by ',', switches by ';' "
                               "(e.g. \"2,2;2,2,2\")");
  auto* file = app.add_option("--topology", o.topologyFile, "offline: a topology file (JSON or Slurm topology.conf)");
  app.add_option("--ranks-per-host", o.ranksPerHost, "ranks on every host of --topology")->check(CLI::PositiveNumber);
  app.add_flag("--json", o.json, "print JSON");
  app.add_flag("--dot", o.dot, "print Graphviz DOT");
  app.add_option("--png", o.png, "render the DOT graph to this PNG file (needs graphviz)");
  app.add_flag("--hw", o.hw, "include this host's hardware (hwloc)");
  app.add_option("--predict", o.predict, "compare ring and HO-Ring with the cost model, e.g. allreduce:16M");
  app.add_flag("--full", o.full,
               "--predict simulates every rank (the reference; slow above a few thousand ranks) instead of using the "
               "fast model above 64 ranks");
  app.add_flag("--online", o.online, "force online mode (run as a rank of a job)");
  app.add_option("--gpus", o.gpuFile,
                 "a recorded GPU topology of one host (JSON, docs/cuda.md), or 'live' for this host's (CUDA driver, "
                 "NVML, hwloc): the links, the ring order over the GPUs and each GPU's NIC");
  shape->excludes(hosts)->excludes(file);
  hosts->excludes(file);
  CLI11_PARSE(app, argc, argv);
  if (o.json && o.dot) {
    fmt::print(stderr, "hoccl-topo: choose one of --json and --dot\n");
    return 2;
  }
  try {
    if (!o.gpuFile.empty()) {
      if (o.gpuFile == "live") return liveGpus(o.json);
      const topo::GpuTopology gpus = topo::loadGpuTopology(o.gpuFile);
      fmt::print("{}", o.json ? topo::gpuTopologyJson(gpus) : topo::describeGpuTopology(gpus));
      return 0;
    }
    if (o.shape.empty() && o.hosts.empty() && o.topologyFile.empty()) {
      if (o.online || launched()) return online(o);
      // This host alone.
      boot::RankInfo self;
      self.rank = 0;
      std::snprintf(self.hostId, sizeof(self.hostId), "%s", topo::localHostId().c_str());
      std::snprintf(self.switchId, sizeof(self.switchId), "%s", topo::localSwitchId(self.hostId).c_str());
      topo::HostHardware hw = topo::discoverHost();
      return emit(topo::build({self}), o, &hw);
    }
    topo::HostHardware hw;
    if (o.hw) hw = topo::discoverHost();
    return emit(offlineTopology(o), o, o.hw ? &hw : nullptr);
  } catch (const std::exception& e) {
    fmt::print(stderr, "hoccl-topo: {}\n", e.what());
    return 1;
  }
}
