/// @file report.cc
/// The nccl-tests text format (as nccl-tests prints it: columns separated by two spaces, time squeezed into 7
/// characters and bandwidths into 6) and the JSON report.
#include "report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace hoccl_perf {

std::string squeeze(double v, int width) {
  for (int decimals = 2; decimals > 0; --decimals) {
    std::string s = fmt::format("{:.{}f}", v, decimals);
    if (static_cast<int>(s.size()) <= width) return fmt::format("{:>{}}", s, width);
  }
  return fmt::format("{:>{}.0f}", v, width);
}

namespace {

std::string formatMeasure(const Measure& m) {
  std::string wrong = m.checked ? std::to_string(m.wrong) : "N/A";
  return fmt::format("  {}  {}  {}  {:>6}", squeeze(m.timeUs, 7), squeeze(m.algBw, 6), squeeze(m.busBw, 6), wrong);
}

nlohmann::json measureJson(const Measure& m) {
  nlohmann::json j = {{"time_us", m.timeUs}, {"algbw_gbs", m.algBw}, {"busbw_gbs", m.busBw}};
  j["wrong"] = m.checked ? nlohmann::json(m.wrong) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

std::string formatRow(const Row& r) {
  return fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", r.bytes, r.count, r.type, r.redop, r.root) +
         formatMeasure(r.oop) + formatMeasure(r.ip);
}

Report::Report(std::string tool, const Options& opts, int nranks)
    : tool_(std::move(tool)), opts_(opts), nranks_(nranks) {}

void Report::printPreamble(const std::vector<RankDesc>& ranks) {
  ranks_ = ranks;
  int version = 0;
  hocclGetVersion(&version);
  fmt::print("# hoccl-tests version {}.{}.{} hoccl-headers={} hoccl-library={}\n", HOCCL_MAJOR, HOCCL_MINOR,
             HOCCL_PATCH, HOCCL_VERSION_CODE, version);
  fmt::print("# Collective test starting: {}\n", tool_);
  std::string step = opts_.stepFactor > 1 ? fmt::format("{}(factor)", opts_.stepFactor)
                                          : fmt::format("{}(bytes)", opts_.stepBytes);
  fmt::print(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: {} "
      "validation: {} graph: 0\n",
      opts_.nThreads, opts_.nGpus, opts_.minBytes, opts_.maxBytes, step, opts_.warmupIters, opts_.iters, opts_.aggIters,
      opts_.check);
  fmt::print("#\n# Using devices\n");
  const char* device = nullptr;  // every rank runs the same build and environment: the printer's device is theirs
  hocclDeviceName(&device);
  for (const auto& r : ranks_) {
    if (device)
      fmt::print("#  Rank {:2} Group  0 Pid {:6} on {:>10} device  0 [{}] device memory\n", r.rank, r.pid, r.host,
                 device);
    else fmt::print("#  Rank {:2} Group  0 Pid {:6} on {:>10} device -1 [host] host memory\n", r.rank, r.pid, r.host);
  }
  fmt::print("#\n# Transports to the peers\n");
  for (const auto& r : ranks_) fmt::print("#  Rank {:2} {}\n", r.rank, r.transports.empty() ? "-" : r.transports);
  std::fflush(stdout);
}

void Report::printHeader() const {
  fmt::print("#\n");
  fmt::print(
      "#                                                              out-of-place                       in-place\n");
  fmt::print(
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
  fmt::print(
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n");
  std::fflush(stdout);
}

void Report::addRow(const Row& r) {
  rows_.push_back(r);
  fmt::print("{}\n", formatRow(r));
  std::fflush(stdout);
}

double Report::averageBusBw() const {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows_) {
    sum += r.oop.busBw + r.ip.busBw;
    n += 2;
  }
  return n > 0 ? sum / n : 0;
}

bool Report::finish(long long outOfBounds, long long wrong) {
  double avg = averageBusBw();
  bool bwOk = opts_.minBusBw < 0 || avg >= 0.9 * opts_.minBusBw;
  fmt::print("# Out of bounds values : {} {}\n", outOfBounds, outOfBounds ? "FAILED" : "OK");
  fmt::print("# Avg bus bandwidth    : {:g} {}\n", avg, opts_.minBusBw < 0 ? "" : (bwOk ? "OK" : "FAILED"));
  if (!bwOk)
    fmt::print("# Average bus bandwidth {:g} GB/s is below 0.9 x NCCL_TESTS_MIN_BW ({:g} GB/s)\n", avg, opts_.minBusBw);
  if (wrong > 0) fmt::print("# {} wrong values in total: FAILED\n", wrong);
  fmt::print("#\n# Collective test concluded: {}\n", tool_);
  std::fflush(stdout);
  bool jsonOk = opts_.jsonFile.empty() || writeJson(outOfBounds, wrong, avg);
  return bwOk && jsonOk;
}

bool Report::writeJson(long long outOfBounds, long long wrong, double avgBw) const {
  nlohmann::json j;
  j["tool"] = tool_;
  j["hoccl_version"] = HOCCL_VERSION_CODE;
  j["config"] = {{"nranks", nranks_},
                 {"nthreads", opts_.nThreads},
                 {"ngpus", opts_.nGpus},
                 {"minbytes", opts_.minBytes},
                 {"maxbytes", opts_.maxBytes},
                 {"stepbytes", opts_.stepBytes},
                 {"stepfactor", opts_.stepFactor},
                 {"iters", opts_.iters},
                 {"warmup_iters", opts_.warmupIters},
                 {"agg_iters", opts_.aggIters},
                 {"run_cycles", opts_.cycles},
                 {"check", opts_.check},
                 {"op", opts_.opsText},
                 {"datatype", opts_.typesText},
                 {"root", opts_.root},
                 {"blocking", opts_.blocking},
                 {"average", opts_.average},
                 {"timeout_s", opts_.timeoutSec},
                 {"report_cputime", opts_.cpuTime},
                 {"misalign", opts_.misalign}};
  for (const auto& r : ranks_) j["ranks"].push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}});
  j["results"] = nlohmann::json::array();
  for (const auto& r : rows_) {
    j["results"].push_back({{"size", r.bytes},
                            {"count", r.count},
                            {"type", r.type},
                            {"redop", r.redop},
                            {"root", r.root},
                            {"out_of_place", measureJson(r.oop)},
                            {"in_place", measureJson(r.ip)}});
  }
  j["avg_bus_bandwidth_gbs"] = avgBw;
  j["min_bus_bandwidth_gbs"] = opts_.minBusBw < 0 ? nlohmann::json(nullptr) : nlohmann::json(opts_.minBusBw);
  j["out_of_bounds"] = outOfBounds;
  j["wrong"] = wrong;
  std::ofstream f(opts_.jsonFile);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) {
    fmt::print(stderr, "{}: cannot write the JSON report to '{}' (-J): check the directory exists and is writable\n",
               tool_, opts_.jsonFile);
    return false;
  }
  return true;
}

}  // namespace hoccl_perf
