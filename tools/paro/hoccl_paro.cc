// hoccl-paro: the PaRO group-mapper on the command line. For a cluster shape (or a topology file), a model size and
// a strategy it prints which ranks hold which shard of P, G and OS, memory per rank, the collectives of a training
// step and the predicted step time; --rank-all ranks all 27 strategies that fit a memory budget.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <iostream>
#include <map>

#include "base/error.h"
#include "report.h"

namespace {

using namespace hoccl::paro;

// "7B", "1.3B", "350M", "125K", "7e9" -> a count (decimal suffixes K, M, B/G, T).
uint64_t parseCount(const std::string& text, const char* what) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    hoccl::throwInvalidArgument(fmt::format("{} '{}' is not a number (e.g. 7B, 350M, 125000)", what, text));
  }
  std::string suffix = text.substr(pos);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, double> mult = {{"", 1},    {"K", 1e3}, {"M", 1e6},
                                                     {"B", 1e9}, {"G", 1e9}, {"T", 1e12}};
  auto it = mult.find(suffix);
  if (it == mult.end() || v < 0)
    hoccl::throwInvalidArgument(fmt::format("{} '{}': use a number with K, M, B or T", what, text));
  return static_cast<uint64_t>(std::llround(v * it->second));
}

// "80GiB", "80GB", "80G" (= GiB), "512MiB" -> bytes.
double parseBytes(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    hoccl::throwInvalidArgument(fmt::format("memory '{}' is not a size (e.g. 80GiB)", text));
  }
  std::string s = text.substr(pos);
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, double> mult = {{"", 1},
                                                     {"B", 1},
                                                     {"K", 1024.0},
                                                     {"KIB", 1024.0},
                                                     {"KB", 1e3},
                                                     {"M", 1048576.0},
                                                     {"MIB", 1048576.0},
                                                     {"MB", 1e6},
                                                     {"G", 1073741824.0},
                                                     {"GIB", 1073741824.0},
                                                     {"GB", 1e9},
                                                     {"T", 1099511627776.0},
                                                     {"TIB", 1099511627776.0},
                                                     {"TB", 1e12}};
  auto it = mult.find(s);
  if (it == mult.end())
    hoccl::throwInvalidArgument(fmt::format("memory '{}': use B, KiB, MiB, GiB, TiB or KB..TB", text));
  return v * it->second;
}

// "50GB/s", "400Gbit", "25G" -> bytes per second (decimal; "bit"/"bps"/"b" = bits).
double parseBandwidth(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    hoccl::throwInvalidArgument(fmt::format("bandwidth '{}' is not a number (e.g. 50GB/s or 400Gbit)", text));
  }
  std::string s = text.substr(pos);
  if (s.size() >= 2 && s.substr(s.size() - 2) == "/s") s.resize(s.size() - 2);
  double scale = 1;
  if (!s.empty() && std::string("kKMGT").find(s[0]) != std::string::npos) {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    scale = c == 'K' ? 1e3 : c == 'M' ? 1e6 : c == 'G' ? 1e9 : 1e12;
    s = s.substr(1);
  }
  if (s == "bit" || s == "bps" || s == "b") scale /= 8;
  else if (!(s.empty() || s == "B" || s == "Bps"))
    hoccl::throwInvalidArgument(fmt::format("bandwidth '{}': unknown unit '{}' (use GB/s or Gbit)", text, s));
  return v * scale;
}

// "intra=150GB/s,inter=50GB/s,spine=100GB/s" into links.bw.
void parseBandwidths(const std::string& text, LinkModel& links) {
  size_t p = 0;
  while (p < text.size()) {
    size_t q = text.find(',', p);
    if (q == std::string::npos) q = text.size();
    const std::string item = text.substr(p, q - p);
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      hoccl::throwInvalidArgument(fmt::format("--bandwidth item '{}': use intra=..., inter=..., spine=...", item));
    const std::string key = item.substr(0, eq);
    const double bw = parseBandwidth(item.substr(eq + 1));
    if (key == "intra") links.bw[hocclLinkIntraHost] = bw;
    else if (key == "inter") links.bw[hocclLinkIntraSwitch] = bw;
    else if (key == "spine") links.bw[hocclLinkInterSwitch] = bw;
    else hoccl::throwInvalidArgument(fmt::format("--bandwidth: unknown link '{}' (intra, inter or spine)", key));
    p = q + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hoccl-paro: the PaRO group-mapper (shard map, memory, step plan, predicted time, ranking)"};
  int ranks = 8, groupSize = 0, ranksPerHost = 0, hostsPerSwitch = 0, microSteps = 1;
  std::string strategy = "IIG", level = "host", params = "1B", trainable = "1", memory, bandwidth, topoFile, png;
  std::string bytesP = "2", bytesG = "2", bytesOS = "12";
  bool rankAll = false, json = false;
  app.add_option("--ranks,-n", ranks, "number of ranks N")->check(CLI::PositiveNumber);
  app.add_option("--group-size,-m", groupSize, "ranks per group m (default: all ranks of one host)");
  app.add_option("--level", level, "group level: host or switch")->capture_default_str();
  app.add_option("--ranks-per-host", ranksPerHost,
                 "ranks per host (default: the group size for --level host, "
                 "else 1)");
  app.add_option("--hosts-per-switch", hostsPerSwitch, "hosts per switch (default: one switch)");
  app.add_option("--topology", topoFile, "topology JSON (switches -> hosts) instead of --ranks and sizes");
  app.add_option("--strategy,-s", strategy, "three letters N/I/G for P, G, OS, or ddp, zero1, zero2, zero3, mics, hsdp")
      ->capture_default_str();
  app.add_option("--params,-p", params, "parameters, e.g. 7B, 350M")->capture_default_str();
  app.add_option("--trainable", trainable, "trainable parameters: a fraction (<= 1) or a count (e.g. 700M)")
      ->capture_default_str();
  app.add_option("--micro-steps,-A", microSteps, "gradient-accumulation micro-steps per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--memory", memory, "memory budget per rank for model states, e.g. 80GiB");
  app.add_option("--bandwidth", bandwidth,
                 "intra=..,inter=..,spine=.. (per rank, per host NIC, per switch uplink; "
                 "e.g. intra=150GB/s,inter=400Gbit)");
  app.add_option("--bytes-p", bytesP, "bytes per parameter element")->capture_default_str();
  app.add_option("--bytes-g", bytesG, "bytes per gradient element")->capture_default_str();
  app.add_option("--bytes-os", bytesOS, "bytes of optimizer state per trainable element")->capture_default_str();
  app.add_flag("--rank-all", rankAll, "rank all 27 strategies (those that fit --memory first, fastest first)");
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("--png", png, "draw the rank grid coloured by shard for P, G and OS (gnuplot)");
  CLI11_PARSE(app, argc, argv);
  try {
    tool::Query q;
    const GroupLevel lv = parseGroupLevel(level);
    if (!topoFile.empty()) {
      const int perHost = ranksPerHost > 0 ? ranksPerHost : (lv == GroupLevel::Host && groupSize > 0 ? groupSize : 1);
      q.layout = makeLayout(topologyFromFile(topoFile, perHost), lv);
    } else if (lv == GroupLevel::Host) {
      const int m = groupSize > 0 ? groupSize : (ranksPerHost > 0 ? ranksPerHost : ranks);
      if (ranksPerHost > 0 && ranksPerHost != m)
        hoccl::throwInvalidArgument("with --level host the group size is the ranks per host: give one of them");
      q.layout = makeLayout(regularTopology(ranks, m, hostsPerSwitch), lv);
    } else {
      const int perHost = ranksPerHost > 0 ? ranksPerHost : 1;
      const int m = groupSize > 0 ? groupSize : ranks;
      if (m % perHost != 0)
        hoccl::throwInvalidArgument(
            fmt::format("--group-size {} is not a multiple of --ranks-per-host {}", m, perHost));
      q.layout = makeLayout(regularTopology(ranks, perHost, m / perHost), lv);
    }
    q.strategy = parseStrategy(strategy);
    q.size.params = parseCount(params, "--params");
    const double tr = std::stod(trainable);
    q.size.trainable = tr <= 1.0 && trainable.find_first_of("KMBGTkmbgt") == std::string::npos
                           ? static_cast<uint64_t>(std::llround(tr * static_cast<double>(q.size.params)))
                           : parseCount(trainable, "--trainable");
    q.size.bytesP = static_cast<uint32_t>(parseCount(bytesP, "--bytes-p"));
    q.size.bytesG = static_cast<uint32_t>(parseCount(bytesG, "--bytes-g"));
    q.size.bytesOS = static_cast<uint32_t>(parseCount(bytesOS, "--bytes-os"));
    q.microSteps = microSteps;
    if (!memory.empty()) q.budget = parseBytes(memory);
    if (!bandwidth.empty()) parseBandwidths(bandwidth, q.links);
    if (q.size.trainable > q.size.params)
      hoccl::throwInvalidArgument(
          fmt::format("--trainable {} is more than --params {}", q.size.trainable, q.size.params));
    if (json) {
      std::cout << tool::toJson(q, rankAll).dump(2) << "\n";
    } else {
      std::cout << tool::strategyText(q);
      if (rankAll) std::cout << tool::rankingText(q);
    }
    if (!png.empty()) {
      tool::writePng(q, png);
      if (!json) std::cout << "\nWrote " << png << "\n";
    }
  } catch (const hoccl::Error& e) {
    std::cerr << "hoccl-paro: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "hoccl-paro: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
