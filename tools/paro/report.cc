// hoccl-paro output: text tables, JSON, and the gnuplot picture of the shard map.
#include "report.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "base/error.h"

namespace hoccl::paro::tool {

std::string bytesText(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string secondsText(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

namespace {

const char* levelWords(Level lv) {
  switch (lv) {
    case Level::N: return "not sharded";
    case Level::I: return "sharded inside the group";
    case Level::G: return "sharded over all ranks";
  }
  return "";
}

std::string rangeText(const Range& r) { return r.size() ? fmt::format("[{}, {})", r.begin, r.end) : "(empty)"; }

std::string ranksText(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "}";
}

uint64_t countOf(const Query& q, State st) { return st == State::Params ? q.size.params : q.size.trainable; }

void appendShardMap(std::string& out, const Query& q) {
  const Layout& l = q.layout;
  out += fmt::format("\nShard map (element ranges; P over {} parameters, G and OS over {} trainable):\n", q.size.params,
                     q.size.trainable);
  out += fmt::format("{:>5} {:>5} {:>5}  {:<28} {:<28} {:<28}\n", "rank", "group", "local",
                     fmt::format("P ({})", levelLetter(q.strategy.p)), fmt::format("G ({})", levelLetter(q.strategy.g)),
                     fmt::format("OS ({})", levelLetter(q.strategy.os)));
  for (int r = 0; r < l.nranks; ++r) {
    out += fmt::format("{:>5} {:>5} {:>5}", r, l.groupOf[r], l.localOf[r]);
    for (State st : {State::Params, State::Grads, State::Optim})
      out += fmt::format("  {:<28}", rangeText(shardRangeUnpadded(l, q.strategy.of(st), r, countOf(q, st))));
    out += "\n";
  }
  out += "\nRanks that hold the same shard:\n";
  for (State st : {State::Params, State::Grads, State::Optim}) {
    const Level lv = q.strategy.of(st);
    out += fmt::format("  {:<2} ({}, {}): ", stateName(st), levelLetter(lv), levelWords(lv));
    if (lv == Level::N) out += "every rank holds all of it\n";
    else if (lv == Level::G || l.ngroups == 1) out += "every rank holds its own shard, no redundancy\n";
    else {
      out += "redundancy groups (shard k on local index k of every group):";
      const auto groups = sameShardGroups(l, lv);
      for (size_t k = 0; k < groups.size(); ++k) out += fmt::format(" {}={}", k, ranksText(groups[k]));
      out += "\n";
    }
  }
}

}  // namespace

std::string strategyText(const Query& q) {
  const Layout& l = q.layout;
  std::string out;
  const std::string alias = q.strategy.alias();
  out += fmt::format(
      "PaRO {}{} on {} ranks: {} groups ({}) of {} ranks; {} parameters, {} trainable; A = {} "
      "micro-steps per step\n",
      q.strategy.name(), alias.empty() ? "" : " (" + alias + ")", l.nranks, l.ngroups,
      l.level == GroupLevel::Switch ? "switches" : "hosts", l.groupSize, q.size.params, q.size.trainable, q.microSteps);
  out += fmt::format("Topology: {} host{}, {} switch{}\n", l.topo.nhosts, l.topo.nhosts == 1 ? "" : "s",
                     l.topo.nswitches, l.topo.nswitches == 1 ? "" : "es");
  if (!l.note.empty()) out += "Note: " + l.note + "\n";
  appendShardMap(out, q);
  const Memory mem = memoryPerRank(l, q.strategy, q.size);
  out += fmt::format("\nMemory per rank (model states, {}*Psi/d_P + {}*Psi'/d_G + {}*Psi'/d_OS; d = 1, m={}, N={}):\n",
                     q.size.bytesP, q.size.bytesG, q.size.bytesOS, l.groupSize, l.nranks);
  out += fmt::format("  P {}  +  G {}  +  OS {}  =  {}  ({:.0f} bytes){}\n", bytesText(mem.p), bytesText(mem.g),
                     bytesText(mem.os), bytesText(mem.total), mem.total,
                     q.budget > 0 ? (mem.total <= q.budget ? "  fits " : "  DOES NOT FIT ") + bytesText(q.budget)
                                  : std::string());
  const Plan plan = makePlan(l, q.strategy, q.size, q.microSteps);
  out += "\nCollectives of one step (bytes as the ring moves them; n = ranks in the communicator):\n";
  out += fmt::format("  {:<15} {:<14} {:<7} {:>5} {:>13} {:>12} {:>12} {:<18} {:>7} {:>11}\n", "phase", "collective",
                     "comm", "n", "count", "buffer", "sent/rank", "when", "calls", "time/call");
  for (const auto& e : plan.entries) {
    const std::string when = e.when == When::MicroStep ? fmt::format("{} per micro-step", e.perOccurrence)
                                                       : fmt::format("{} per step", e.perOccurrence);
    out += fmt::format("  {:<15} {:<14} {:<7} {:>5} {:>13} {:>12} {:>12} {:<18} {:>7} {:>11}\n", phaseName(e.phase),
                       collName(e.coll), commKindName(e.comm), e.commSize, e.count, bytesText(double(e.bytes)),
                       bytesText(double(e.sentPerRank)), when, e.perStep, secondsText(predictCallTime(l, e, q.links)));
  }
  if (plan.entries.empty()) out += "  (none: nothing crosses a rank boundary)\n";
  const auto byClass = plan.sentByClass(l, 0);
  out += fmt::format("\nBytes per rank per step: {} (rank 0: intra-host {}, intra-switch {}, inter-switch {})\n",
                     bytesText(double(plan.sentPerRankPerStep())), bytesText(double(byClass[hocclLinkIntraHost])),
                     bytesText(double(byClass[hocclLinkIntraSwitch])),
                     bytesText(double(byClass[hocclLinkInterSwitch])));
  out += fmt::format(
      "Predicted step communication time: {} (intra-host {:.0f} GB/s per rank, host NIC {:.0f} GB/s, "
      "spine {})\n",
      secondsText(predictStepTime(l, plan, q.links)), q.links.bw[1] / 1e9, q.links.bw[2] / 1e9,
      q.links.bw[3] > 0 ? fmt::format("{:.0f} GB/s per switch", q.links.bw[3] / 1e9) : "unlimited");
  return out;
}

std::string rankingText(const Query& q) {
  const auto ranked = rankStrategies(q.layout, q.size, q.microSteps, q.budget, q.links);
  std::string out = fmt::format(
      "\nAll strategies, {} micro-steps, memory budget {} per rank (fastest first among "
      "those that fit):\n",
      q.microSteps, q.budget > 0 ? bytesText(q.budget) : "none");
  out += fmt::format("  {:>4}  {:<4} {:<10} {:>12} {:>14} {:>12} {:>9}  {}\n", "rank", "name", "alias", "memory",
                     "bytes/rank", "step time", "log(1/T)", "fits");
  int n = 0;
  for (const auto& r : ranked) {
    out += fmt::format("  {:>4}  {:<4} {:<10} {:>12} {:>14} {:>12} {:>9.3f}  {}\n", r.fits ? std::to_string(++n) : "-",
                       r.strategy.name(), r.strategy.alias(), bytesText(r.memory.total),
                       bytesText(double(r.sentPerRank)), secondsText(r.seconds),
                       r.seconds > 0 ? std::log(1.0 / r.seconds) : 0.0, r.fits ? "yes" : "no");
  }
  if (n == 0) out += "  No strategy fits the budget: add ranks, or train fewer parameters.\n";
  return out;
}

nlohmann::json toJson(const Query& q, bool rankAll) {
  using nlohmann::json;
  const Layout& l = q.layout;
  json j;
  j["strategy"] = q.strategy.name();
  j["alias"] = q.strategy.alias();
  j["ranks"] = l.nranks;
  j["groupLevel"] = groupLevelName(l.level);
  j["groupSize"] = l.groupSize;
  j["groups"] = l.ngroups;
  j["params"] = q.size.params;
  j["trainable"] = q.size.trainable;
  j["microSteps"] = q.microSteps;
  if (!l.note.empty()) j["note"] = l.note;
  for (State st : {State::Params, State::Grads, State::Optim}) {
    const Level lv = q.strategy.of(st);
    json s;
    s["level"] = std::string(1, levelLetter(lv));
    s["sameShard"] = sameShardGroups(l, lv);
    json shards = json::array();
    for (int r = 0; r < l.nranks; ++r) {
      const Range rg = shardRangeUnpadded(l, lv, r, countOf(q, st));
      shards.push_back({{"rank", r}, {"shard", shardIndex(l, lv, r)}, {"begin", rg.begin}, {"end", rg.end}});
    }
    s["shards"] = shards;
    j["states"][stateName(st)] = s;
  }
  const Memory mem = memoryPerRank(l, q.strategy, q.size);
  j["memoryPerRank"] = {{"P", mem.p}, {"G", mem.g}, {"OS", mem.os}, {"total", mem.total}};
  const Plan plan = makePlan(l, q.strategy, q.size, q.microSteps);
  json entries = json::array();
  for (const auto& e : plan.entries)
    entries.push_back({{"phase", phaseName(e.phase)},
                       {"collective", collName(e.coll)},
                       {"comm", commKindName(e.comm)},
                       {"commSize", e.commSize},
                       {"tensor", stateName(e.tensor)},
                       {"count", e.count},
                       {"bytes", e.bytes},
                       {"sentPerRank", e.sentPerRank},
                       {"when", e.when == When::MicroStep ? "micro-step" : "step"},
                       {"perOccurrence", e.perOccurrence},
                       {"perStep", e.perStep},
                       {"secondsPerCall", predictCallTime(l, e, q.links)}});
  j["plan"] = entries;
  j["bytesPerRankPerStep"] = plan.sentPerRankPerStep();
  j["predictedStepSeconds"] = predictStepTime(l, plan, q.links);
  if (rankAll) {
    json ranking = json::array();
    for (const auto& r : rankStrategies(l, q.size, q.microSteps, q.budget, q.links))
      ranking.push_back({{"strategy", r.strategy.name()},
                         {"memory", r.memory.total},
                         {"seconds", r.seconds},
                         {"bytesPerRank", r.sentPerRank},
                         {"fits", r.fits}});
    j["ranking"] = ranking;
  }
  return j;
}

void writePng(const Query& q, const std::string& path) {
  const Layout& l = q.layout;
  std::string script = fmt::format(
      "set terminal pngcairo size {},{} font ',10'\nset output '{}'\n"
      "set multiplot layout 1,3 title 'PaRO {}: {} {} x {} ranks (colour = shard; same colour = same bytes)'\n"
      "unset colorbox\nset palette defined (0 '#4e79a7', 1 '#f28e2b', 2 '#59a14f', 3 '#e15759', 4 '#76b7b2', "
      "5 '#edc948', 6 '#b07aa1', 7 '#ff9da7')\nset xlabel 'local index'\nset ylabel '{}'\n"
      "set xrange [-0.5:{}]\nset yrange [{}:-0.5]\nset xtics 1\nset ytics 1\nset tics scale 0\n",
      std::max(900, 300 * 3), 160 + 40 * l.ngroups, path, q.strategy.name(), l.ngroups,
      l.level == GroupLevel::Switch ? "switches" : "hosts", l.groupSize, groupLevelName(l.level), l.groupSize - 0.5,
      l.ngroups - 0.5);
  for (State st : {State::Params, State::Grads, State::Optim}) {
    const Level lv = q.strategy.of(st);
    const std::string block = fmt::format("$D{}", static_cast<int>(st));
    script += block + " << EOD\n";
    for (int g = 0; g < l.ngroups; ++g)
      for (int k = 0; k < l.groupSize; ++k)
        script += fmt::format("{} {} {}\n", k, g, shardIndex(l, lv, l.rankAt(g, k)));
    script += "EOD\n";
    script += fmt::format("set title '{} ({}): {} shard{}'\nset cbrange [0:{}]\n", stateName(st), levelLetter(lv),
                          shardCount(l, lv), shardCount(l, lv) > 1 ? "s" : "", std::max(1, shardCount(l, lv) - 1));
    script += fmt::format(
        "plot {0} using 1:2:3 with image notitle, {0} using 1:2:(sprintf('%d', $3)) with labels "
        "tc rgb 'white' notitle\n",
        block);
  }
  script += "unset multiplot\n";
  char tmpl[] = "/tmp/hoccl-paro-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throwInvalidArgument("hoccl-paro --png: cannot create a temporary file in /tmp");
  close(fd);
  { std::ofstream(tmpl) << script; }
  const int rc = std::system(fmt::format("gnuplot '{}'", tmpl).c_str());
  std::remove(tmpl);
  if (rc != 0)
    throwInvalidArgument(
        fmt::format("hoccl-paro --png: gnuplot failed (exit {}); is gnuplot installed "
                    "(apt-get install gnuplot-nox)?",
                    rc));
}

}  // namespace hoccl::paro::tool
