// hoccl-model: the cost model as a tool (docs/model.md).
//   predict    offline: predicted time and bus bandwidth per algorithm over a size range, on a described cluster
//              (--shape SWITCHESxHOSTSxRANKS or --topo FILE) with a model file or the built-in/HOCCL_LINK_* model;
//   calibrate  inside a job: measures latency and bandwidth per link class, writes a model file (HOCCL_MODEL_FILE);
//   validate   inside a job: runs the real collective over a size range and prints predicted against measured;
//   plan       offline: ranks AxoNN-style 4D layouts and PaRO strategies by predicted communication time per step.
// Predictions: algo::predict (every rank simulated up to 64 ranks, the fast representative model above).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "algo/predict.h"
#include "algo/registry.h"
#include "algo/tuner.h"
#include "base/params.h"
#include "tools/model/model_tool.h"
#include "topology/topology.h"

namespace hoccl::model_tool {

namespace {

struct PredictOptions {
  std::string shape = "2x2x2", topoFile, modelFile, coll = "allreduce", sizes = "8:1G", png;
  int ranksPerHost = 1;
  bool json = false;
};

// One predicted point of `predict`.
struct Point {
  size_t bytes;
  std::string algorithm;
  double busbw;
};

// "1K", "64M": the size axis' labels.
std::string sizeLabel(size_t bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return fmt::format("{:g}{}", v, units[u]);
}

// --png: bus bandwidth against size, one curve per algorithm, drawn by gnuplot (the plotting tool the project
// already installs, tools/install-deps, and hoccl-paro uses) from a temporary script with inline data.
void writePng(const std::vector<Point>& points, const std::string& title, const std::string& path) {
  std::vector<std::string> algorithms;
  for (const Point& p : points)
    if (std::find(algorithms.begin(), algorithms.end(), p.algorithm) == algorithms.end())
      algorithms.push_back(p.algorithm);
  if (algorithms.empty()) throw std::runtime_error("--png: no prediction to draw (is the size range empty?)");
  if (path.find_first_of("'\\\n") != std::string::npos)
    throw std::runtime_error("--png: the file name may not contain quotes, backslashes or newlines");
  std::string script = fmt::format(
      "set terminal pngcairo size 900,560 font ',10'\nset output '{}'\nset title \"{}\" noenhanced\n"
      "set logscale x 2\nset xlabel 'size (bytes)'\nset ylabel 'predicted bus bandwidth (GB/s)'\n"
      "set key top left noenhanced\nset grid\nset yrange [0:*]\nset xtics (",
      path, title);
  size_t lo = points.front().bytes, hi = lo;
  for (const Point& p : points) lo = std::min(lo, p.bytes), hi = std::max(hi, p.bytes);
  size_t step = 1;  // at most about 12 labels
  for (size_t s = lo; s <= hi && s > 0; s *= 2) ++step;
  step = std::max<size_t>(1, (step + 11) / 12);
  size_t i = 0;
  for (size_t s = lo; s <= hi && s > 0; s *= 2, ++i)
    if (i % step == 0) script += fmt::format("{}'{}' {}", i ? ", " : "", sizeLabel(s), s);
  script += ")\n";
  for (size_t a = 0; a < algorithms.size(); ++a) {
    script += fmt::format("$D{} << EOD\n", a);
    for (const Point& p : points)
      if (p.algorithm == algorithms[a]) script += fmt::format("{} {:.9g}\n", p.bytes, p.busbw);
    script += "EOD\n";
  }
  script += "plot ";
  for (size_t a = 0; a < algorithms.size(); ++a)
    script += fmt::format("{}$D{} using 1:2 with linespoints lw 2 title '{}'", a ? ", " : "", a, algorithms[a]);
  script += "\n";
  char tmpl[] = "/tmp/hoccl-model-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("--png: cannot create a temporary file in /tmp");
  close(fd);
  { std::ofstream(tmpl) << script; }
  const int rc = std::system(fmt::format("gnuplot '{}'", tmpl).c_str());
  std::remove(tmpl);
  if (rc != 0)
    throw std::runtime_error(
        fmt::format("--png: gnuplot failed (exit status {}) writing '{}'; is gnuplot installed (tools/install-deps, or "
                    "apt-get install gnuplot-nox) and the folder writable?",
                    rc, path));
}

int predictCommand(const PredictOptions& o) {
  const topo::Topology t = offlineTopology(o.shape, o.topoFile, o.ranksPerHost);
  const topo::LinkModel model = linkModel(o.modelFile);
  const sched::Coll coll = parseColl(o.coll);
  const auto sizes = parseSizes(o.sizes);
  nlohmann::json out = nlohmann::json::array();
  std::vector<Point> points;
  if (!o.json) {
    fmt::print("{} ranks, {} hosts, {} switches; model: {}\n", t.nranks, t.nhosts, t.nswitches, model.describe());
    fmt::print("{:>12} {:>10} {:>14} {:>12} {:>9}\n", "bytes", "algorithm", "time (us)", "busbw (GB/s)", "model (s)");
  }
  for (size_t bytes : sizes) {
    // At the chunk a job would run each algorithm with: HOCCL_CHUNK_SIZE, or where it is unset the one the tuner
    // picks with this model (algo/tuner.h).
    sched::CollArgs args{coll,     0,
                         t.nranks, countFor(coll, bytes, t.nranks),
                         0,        std::max<size_t>(1, static_cast<size_t>(params::CHUNK_SIZE.get()) / 4)};
    if (args.count == 0) continue;
    for (const algo::Algorithm* a : algo::candidates(args, t)) {
      auto start = std::chrono::steady_clock::now();
      sched::CollArgs priced = args;
      if (!params::CHUNK_SIZE.isSet() && algo::chunkMatters(*a, coll))
        priced.chunkCount = algo::tune(args, t, 4, {a}, &model, true).chunkCount;
      topo::Prediction p = algo::predict(*a, priced, t, 4, model);
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double busbw = p.seconds > 0 ? static_cast<double>(bytes) * busFactor(coll, t.nranks) / p.seconds / 1e9 : 0;
      points.push_back({bytes, a->name, busbw});
      if (o.json)
        out.push_back({{"bytes", bytes},
                       {"algorithm", a->name},
                       {"chunk_bytes", algo::chunkMatters(*a, coll) ? priced.chunkCount * 4 : 0},
                       {"seconds", p.seconds},
                       {"busbw_GBps", busbw},
                       {"inter_switch_bytes", p.bytes[hocclLinkInterSwitch]},
                       {"messages", p.messages},
                       {"prediction_seconds", took}});
      else fmt::print("{:>12} {:>10} {:>14.1f} {:>12.3f} {:>9.2f}\n", bytes, a->name, p.seconds * 1e6, busbw, took);
    }
  }
  if (o.json)
    fmt::print("{}\n", nlohmann::json{{"ranks", t.nranks},
                                      {"hosts", t.nhosts},
                                      {"switches", t.nswitches},
                                      {"collective", o.coll},
                                      {"model", nlohmann::json::parse(model.toJson("used"))},
                                      {"predictions", out}}
                           .dump(2));
  if (!o.png.empty()) {
    writePng(points,
             fmt::format("hoccl-model predict: {} on {} ranks ({} hosts, {} switches)", o.coll, t.nranks, t.nhosts,
                         t.nswitches),
             o.png);
    if (!o.json) fmt::print("wrote {}\n", o.png);
  }
  return 0;
}

}  // namespace
}  // namespace hoccl::model_tool

int main(int argc, char** argv) {
  using namespace hoccl::model_tool;
  CLI::App app{"hoccl-model: predict collectives on any cluster, calibrate the model, validate it, plan layouts"};
  app.require_subcommand(1);

  PredictOptions po;
  auto* pred = app.add_subcommand("predict", "predicted time and bus bandwidth per algorithm over a size range");
  auto* shape = pred->add_option("--shape", po.shape, "SWITCHESxHOSTSxRANKS (default 2x2x2)");
  pred->add_option("--topo", po.topoFile, "topology file (JSON or Slurm topology.conf) instead of --shape")
      ->excludes(shape);
  pred->add_option("--ranks-per-host", po.ranksPerHost, "ranks on every host of --topo")->check(CLI::PositiveNumber);
  pred->add_option("--model", po.modelFile,
                   "model file (hoccl-model calibrate); default: HOCCL_MODEL_FILE or built-in");
  pred->add_option("--collective", po.coll,
                   "allreduce (default), reducescatter, allgather, broadcast, reduce, alltoall");
  pred->add_option("--sizes", po.sizes, "bytes, or a range LO:HI doubling (default 8:1G)");
  pred->add_flag("--json", po.json, "print JSON");
  pred->add_option("--png", po.png, "also draw bus bandwidth against size, one curve per algorithm, into this PNG");

  CalibrateOptions co;
  auto* cal = app.add_subcommand("calibrate",
                                 "inside a job: measure latency and bandwidth per link class, write a model");
  cal->add_option("--out", co.out, "model file to write (default hoccl-model.json)");
  cal->add_option("--iterations", co.iterations, "ping-pong round trips per latency probe (default 200)")
      ->check(CLI::Range(10, 100000));

  ValidateOptions vo;
  auto* val = app.add_subcommand("validate", "inside a job: predicted against measured time of a collective");
  val->add_option("--collective", vo.coll, "allreduce (default), reducescatter, allgather, broadcast, reduce");
  val->add_option("--sizes", vo.sizes, "bytes, or a range LO:HI doubling (default 1M:64M)");
  val->add_option("--model", vo.modelFile, "model file; default: HOCCL_MODEL_FILE or built-in");
  val->add_flag("--json", vo.json, "print JSON");

  PlanOptions lo;
  std::string planShape, planTopo, planModel;
  int planRanksPerHost = 8;
  auto* pl = app.add_subcommand("plan",
                                "rank 4D tensor x data parallel layouts and PaRO strategies by communication time");
  pl->add_option("--gpus", lo.gpus, "ranks (GPUs)")->required()->check(CLI::PositiveNumber);
  pl->add_option("--params", lo.params, "model parameters, e.g. 80B, 7B, 350M")->required();
  pl->add_option("--hidden", lo.hidden, "hidden size")->required()->check(CLI::PositiveNumber);
  pl->add_option("--layers", lo.layers, "transformer layers")->required()->check(CLI::PositiveNumber);
  pl->add_option("--seq", lo.seq, "sequence length (default 2048)")->check(CLI::PositiveNumber);
  pl->add_option("--batch", lo.batch, "global batch in sequences")->required()->check(CLI::PositiveNumber);
  pl->add_option("--top", lo.top, "rows to show (default 10)")->check(CLI::PositiveNumber);
  pl->add_option("--micro-steps", lo.microSteps, "PaRO gradient accumulation steps (default 1)")
      ->check(CLI::PositiveNumber);
  pl->add_option("--memory", lo.memoryGiB, "memory per rank in GiB for model states (0: no limit)");
  auto* plShape = pl->add_option("--shape", planShape,
                                 "SWITCHESxHOSTSxRANKS (default: GPUS/ranks-per-host hosts, 32 a switch)");
  pl->add_option("--topo", planTopo, "topology file instead of --shape")->excludes(plShape);
  pl->add_option("--ranks-per-host", planRanksPerHost, "GPUs per host (default 8)")->check(CLI::PositiveNumber);
  pl->add_option("--model", planModel, "model file; default: HOCCL_MODEL_FILE or built-in");
  pl->add_flag("--json", lo.json, "print JSON");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*pred) return predictCommand(po);
    if (*cal) return calibrate(co);
    if (*val) return validate(vo);
    if (*pl) {
      hoccl::topo::Topology t;
      if (!planShape.empty() || !planTopo.empty()) {
        t = offlineTopology(planShape, planTopo, planRanksPerHost);
      } else {
        if (lo.gpus % planRanksPerHost)
          throw std::runtime_error("--gpus must be a multiple of --ranks-per-host (or give --shape)");
        int hosts = lo.gpus / planRanksPerHost, perSwitch = std::min(hosts, 32);
        if (hosts % perSwitch) throw std::runtime_error("hosts do not fill switches of 32: give --shape");
        t = hoccl::topo::fromShape(hosts / perSwitch, perSwitch, planRanksPerHost);
      }
      if (t.nranks != lo.gpus)
        throw std::runtime_error(fmt::format("the cluster has {} ranks, --gpus says {}", t.nranks, lo.gpus));
      return plan(lo, t, linkModel(planModel));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "hoccl-model: {}\n", e.what());
    return 1;
  }
  return 0;
}
