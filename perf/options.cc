/// @file options.cc
/// Command line of the perf tools: the flags of nccl-tests, parsed with CLI11, then validated so that an
/// unsupported value gets one clear line instead of a silently different benchmark.
#include "options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

namespace hoccl_perf {
namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string typeNames() {
  std::string s;
  for (const auto& t : allTypes()) s += std::string(s.empty() ? "" : " ") + t.name;
  return s;
}

/// Fills opts->types and opts->ops from their text; returns an error message or "".
std::string resolveLists(Options* o) {
  o->types.clear();
  if (o->typesText == "all") {
    for (const auto& t : allTypes()) o->types.push_back(t.type);
  } else {
    for (const auto& name : splitList(o->typesText)) {
      const TypeInfo* t = findType(name);
      if (t == nullptr) return fmt::format("unknown data type '{}' (-d): use one of {} or all", name, typeNames());
      o->types.push_back(t->type);
    }
  }
  o->ops.clear();
  if (o->opsText == "all") {
    o->ops = allOps();
  } else {
    for (const auto& name : splitList(o->opsText)) {
      OpKind k;
      if (!findOp(name, &k))
        return fmt::format("unknown reduction '{}' (-o): use sum, prod, max, min, avg, mulsum or all", name);
      o->ops.push_back(k);
    }
  }
  if (o->types.empty()) return "no data type given (-d)";
  if (o->ops.empty()) return "no reduction given (-o)";
  return "";
}

/// Range and support checks; returns an error message or "".
std::string validate(const Options& o) {
  if (o.nThreads < 1) return fmt::format("-t {}: need at least one thread", o.nThreads);
  if (o.nGpus != 1)
    return fmt::format("-g {}: hoccl perf tools run one rank per thread (host memory); use -t {} instead", o.nGpus,
                       o.nThreads * o.nGpus);
  if (o.minBytes > o.maxBytes) return fmt::format("-b {} is larger than -e {}", o.minBytes, o.maxBytes);
  if (o.stepFactor < 1) return "-f must be at least 1";
  if (o.stepFactor == 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes) return "-i 0 with -f 1 never ends";
  if (o.iters < 1) return fmt::format("-n {}: need at least one timed iteration", o.iters);
  if (o.warmupIters < 0) return "-w must be >= 0";
  if (o.aggIters < 1) return "-m must be >= 1";
  if (o.cycles < 0) return "-N must be >= 0 (0 repeats forever)";
  if (o.check < 0) return "-c must be >= 0";
  if (o.root < -1) return fmt::format("-r {}: the root is a rank number, or -1 for every root", o.root);
  if (o.blocking < 0 || o.blocking > 3) return fmt::format("-z {}: blocking mode is 0..3", o.blocking);
  if (o.average < 0 || o.average > 3)
    return fmt::format("-a {}: use 0 (rank 0), 1 (mean), 2 (min) or 3 (max)", o.average);
  if (o.timeoutSec < 0) return "-T must be >= 0";
  if (o.cpuTime < 0 || o.cpuTime > 1) return "-C is 0 or 1";
  if (o.misalign < 0) return "-u must be >= 0";
  if (o.registration < 0 || o.registration > 2)
    return fmt::format("-R {}: use 0 (none), 1 (hocclCommRegister) or 2 (symmetric: hoccl registers the same way)",
                       o.registration);
  return "";
}

double minBwFromEnv() {
  for (const char* name : {"HOCCL_TESTS_MIN_BW", "NCCL_TESTS_MIN_BW"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (end == v || *end != '\0') {
      fmt::print(stderr, "warning: ignoring {}='{}': not a number\n", name, v);
      continue;
    }
    return d;
  }
  return -1;
}

}  // namespace

int parseOptions(int argc, char** argv, const char* toolName, Options* o) {
  CLI::App app{fmt::format("{}: hoccl benchmark with the command line and output of nccl-tests", toolName), toolName};
  auto size = CLI::AsSizeValue(false);  // K/M/G suffixes are powers of 1024, as in nccl-tests
  app.add_option("-t,--nthreads", o->nThreads, "threads (ranks) per process");
  app.add_option("-g,--ngpus", o->nGpus, "GPUs per thread (only 1)");
  app.add_option("-b,--minbytes", o->minBytes, "minimum size in bytes (K/M/G suffixes)")->transform(size);
  app.add_option("-e,--maxbytes", o->maxBytes, "maximum size in bytes (K/M/G suffixes)")->transform(size);
  app.add_option("-i,--stepbytes", o->stepBytes, "size increment when -f is 1")->transform(size);
  app.add_option("-f,--stepfactor", o->stepFactor, "size multiplication factor");
  app.add_option("-n,--iters", o->iters, "timed iterations");
  app.add_option("-w,--warmup_iters", o->warmupIters, "warm-up iterations");
  app.add_option("-m,--agg_iters", o->aggIters, "operations aggregated per iteration (in one group)");
  app.add_option("-N,--run_cycles", o->cycles, "repeat the sweep N times (0 = forever)");
  app.add_option("-c,--check", o->check, "check iterations (0 = no check)");
  app.add_option("-o,--op", o->opsText, "sum, prod, max, min, avg, mulsum or all");
  app.add_option("-d,--datatype", o->typesText, typeNames() + " or all");
  app.add_option("-r,--root", o->root, "root rank, -1 = every root");
  app.add_option("-z,--blocking", o->blocking, "blocking mode 0..3 (host collectives always complete on return)");
  app.add_option("-a,--average", o->average, "combine times: 0 rank 0, 1 mean, 2 min, 3 max");
  app.add_option("-T,--timeout", o->timeoutSec, "fail when one test takes longer than this many seconds");
  app.add_option("-J,--output_file", o->jsonFile, "write the results as JSON to this file");
  app.add_option("-C,--report_cputime", o->cpuTime, "report thread CPU time instead of wall time");
  app.add_option("-u,--misalign", o->misalign, "misalign every buffer by this many elements");
  app.add_option(
      "-R,--local_register", o->registration,
      "buffer registration: 0 none, 1 register (buffers from hocclMemAlloc), 2 symmetric (the same in hoccl)");
  app.add_option("-G,--cudagraph", o->graphLaunches,
                 "CUDA graph launches per iteration (not supported: hoccl's device calls cannot be captured)");
  // Flags of nccl-tests that only make sense on GPUs: accepted when they ask for nothing.
  struct Unsupported {
    const char* flag;
    const char* what;
    int allowedMax;
    int value;
  };
  static Unsupported unsupported[] = {
      {"-y", "the null stream", 1, 0},          {"-x", "a CTA policy", 0, 0},    {"-D", "the device API", 0, 0},
      {"-V", "per-iteration statistics", 0, 0}, {"-I", "timestamps", 0, 0},      {"-K", "a memory report", 0, 0},
      {"-S", "per-iteration statistics", 0, 0}, {"-M", "a memory report", 0, 0}, {"-p", "parallel init", 1, 0},
  };
  for (auto& u : unsupported) app.add_option(u.flag, u.value, std::string("GPU-only option (") + u.what + ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help: the help text, exit code 0
    // An unknown flag, a missing or unconvertible value: CLI11's text names the flag and the value.
    fmt::print(stderr, "{}: {}; run `{} --help` for every flag\n", toolName, e.what(), toolName);
    return 2;
  }
  std::string err = validate(*o);
  if (err.empty() && o->graphLaunches < 0)
    err = fmt::format("-G {}: the number of CUDA graph launches must be 0 or more", o->graphLaunches);
  if (err.empty()) err = resolveLists(o);
  for (const auto& u : unsupported) {
    if (err.empty() && (u.value < 0 || u.value > u.allowedMax))
      err = fmt::format("{} {}: {} is not supported by hoccl's host-memory perf tools; leave it at 0", u.flag, u.value,
                        u.what);
  }
  if (!err.empty()) {
    fmt::print(stderr, "{}: {}\n", toolName, err);
    return 2;
  }
  o->minBusBw = minBwFromEnv();
  return -1;
}

std::string graphRefusal(const Options& opts, const char* deviceName) {
  if (opts.graphLaunches == 0) return "";
  const std::string device = deviceName ? deviceName : "";
  if (device.empty())
    return fmt::format("-G {}: graph capture needs a CUDA device; this process has none (host buffers). Leave -G at 0",
                       opts.graphLaunches);
  if (device.find("simulated") != std::string::npos)
    return fmt::format(
        "-G {}: graph capture needs a CUDA device; the simulated device does not capture graphs. "
        "Leave -G at 0",
        opts.graphLaunches);
  return fmt::format(
      "-G {}: hoccl's stream-ordered calls on {} cannot be captured into a CUDA graph: a host proxy thread runs "
      "each call when the stream reaches it, and a graph replay would run neither that thread's work nor its wait "
      "again (docs/cuda.md). Leave -G at 0",
      opts.graphLaunches, device);
}

}  // namespace hoccl_perf
