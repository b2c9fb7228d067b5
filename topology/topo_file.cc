// Topology files: which switch each host hangs off. Two formats are read:
//   JSON  {"switches": {"s1": ["h1", "h2"], "s2": ["h3"]}}  or  {"switches": [{"name": "s1", "hosts": [...]}]}
//         (host entries may use Slurm host-list syntax, e.g. "node[01-04]")
//   Slurm topology.conf lines "SwitchName=s1 Nodes=h[1-4]" (switches without Nodes= are upper levels, ignored)
// The format is chosen by the first non-blank character: '{' means JSON.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "topology/topology.h"

namespace hoccl::topo {
namespace {

// Most host names one host list may expand to: more than any cluster has, and a bound on what a few bytes of
// brackets can make ("n[0-99999]m[0-99999]" would be 10^10 names).
constexpr size_t kMaxHostNames = size_t{1} << 18;

// Expands one bracket expression body "1-4,07,9" into zero-padded numbers as text.
std::vector<std::string> expandRanges(const std::string& body, const std::string& whole) {
  std::vector<std::string> out;
  std::stringstream items(body);
  std::string item;
  while (std::getline(items, item, ',')) {
    auto dash = item.find('-');
    std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto isNum = [](const std::string& s) {
      return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
    };
    if (!isNum(lo) || !isNum(hi)) throwInvalidArgument("bad range '" + item + "' in host list '" + whole + "'");
    long a = std::stol(lo), b = std::stol(hi);
    if (b < a || b - a > 100000) throwInvalidArgument("bad range '" + item + "' in host list '" + whole + "'");
    for (long v = a; v <= b; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');
      out.push_back(num);
    }
  }
  return out;
}

// Expands one item that may hold several bracket groups ("rack[1-2]-n[1-3]").
void expandItem(const std::string& item, const std::string& whole, std::vector<std::string>& out) {
  auto open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) throwInvalidArgument("unbalanced ']' in host list '" + whole + "'");
    if (out.size() >= kMaxHostNames)
      throwInvalidArgument(fmt::format("host list '{}' names more than {} hosts", whole.substr(0, 200), kMaxHostNames));
    if (!item.empty()) out.push_back(item);
    return;
  }
  auto close = item.find(']', open);
  if (close == std::string::npos) throwInvalidArgument("unbalanced '[' in host list '" + whole + "'");
  std::string prefix = item.substr(0, open), rest = item.substr(close + 1);
  for (const auto& num : expandRanges(item.substr(open + 1, close - open - 1), whole))
    expandItem(prefix + num + rest, whole, out);
}

// Adds switch sw and its hosts; `seen` indexes the hosts already listed (host -> its switch).
void addHosts(SwitchMap& map, std::unordered_map<std::string, std::string>& seen, const std::string& sw,
              const std::vector<std::string>& hosts, const std::string& path) {
  if (std::find(map.switches.begin(), map.switches.end(), sw) != map.switches.end())
    throwInvalidArgument("topology file " + path + ": switch '" + sw + "' is listed twice");
  map.switches.push_back(sw);
  for (const auto& h : hosts) {
    auto [at, added] = seen.emplace(h, sw);
    if (!added)
      throwInvalidArgument("topology file " + path + ": host '" + h + "' is listed under switch '" + at->second +
                           "' and again under '" + sw + "'");
    map.hostSwitch.emplace_back(h, sw);
  }
}

SwitchMap parseJson(const std::string& text, const std::string& path) {
  SwitchMap map;
  std::unordered_map<std::string, std::string> seen;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throwInvalidArgument("topology file " + path + " is not valid JSON: " + e.what());
  }
  auto hostsOf = [&](const nlohmann::json& list, const std::string& sw) {
    if (!list.is_array())
      throwInvalidArgument("topology file " + path + ": hosts of switch '" + sw + "' must be a list");
    std::vector<std::string> hosts;
    for (const auto& h : list) {
      if (!h.is_string()) throwInvalidArgument("topology file " + path + ": host names must be strings");
      auto more = expandHostList(h.get<std::string>());
      hosts.insert(hosts.end(), more.begin(), more.end());
    }
    return hosts;
  };
  const auto it = doc.find("switches");
  if (!doc.is_object() || it == doc.end())
    throwInvalidArgument("topology file " + path +
                         ": expected an object with a \"switches\" member, e.g. "
                         "{\"switches\": {\"s1\": [\"h1\", \"h2\"]}}");
  if (it->is_object()) {
    for (const auto& [name, list] : it->items()) {
      addHosts(map, seen, name, hostsOf(list, name), path);
    }
  } else if (it->is_array()) {
    for (const auto& sw : *it) {
      if (!sw.is_object() || !sw.contains("name") || !sw["name"].is_string() || !sw.contains("hosts"))
        throwInvalidArgument("topology file " + path + ": each switch needs \"name\" (string) and \"hosts\" (list)");
      std::string name = sw["name"].get<std::string>();
      addHosts(map, seen, name, hostsOf(sw["hosts"], name), path);
    }
  } else {
    throwInvalidArgument("topology file " + path + ": \"switches\" must be an object or a list");
  }
  return map;
}

SwitchMap parseSlurm(const std::string& text, const std::string& path) {
  SwitchMap map;
  std::unordered_map<std::string, std::string> seen;
  std::stringstream lines(text);
  std::string line;
  int lineNo = 0;
  while (std::getline(lines, line)) {
    ++lineNo;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::stringstream words(line);
    std::string word, name, nodes;
    while (words >> word) {
      auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      for (auto& c : key) c = static_cast<char>(std::tolower(c));
      if (key == "switchname") name = value;
      else if (key == "nodes") nodes = value;
    }
    if (name.empty()) {
      if (!nodes.empty())
        throwInvalidArgument(fmt::format("topology file {} line {}: Nodes= without SwitchName=", path, lineNo));
      continue;
    }
    if (nodes.empty()) continue;  // an upper-level switch (Switches=...)
    addHosts(map, seen, name, expandHostList(nodes), path);
  }
  if (map.switches.empty())
    throwInvalidArgument("topology file " + path +
                         " lists no switch with hosts (expected JSON or lines like "
                         "'SwitchName=s1 Nodes=h[1-4]')");
  return map;
}

}  // namespace

std::vector<std::string> expandHostList(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throwInvalidArgument("unbalanced ']' in host list '" + list + "'");
    if (c == ',' && depth == 0) {
      expandItem(item, list, out);
      item.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      item += c;
    }
  }
  if (depth != 0) throwInvalidArgument("unbalanced '[' in host list '" + list + "'");
  expandItem(item, list, out);
  return out;
}

std::string SwitchMap::switchOf(const std::string& host) const {
  for (const auto& [h, s] : hostSwitch)
    if (h == host) return s;
  for (char sep : {':', '.'}) {
    auto cut = host.find(sep);
    if (cut == std::string::npos) continue;
    std::string shortName = host.substr(0, cut);
    for (const auto& [h, s] : hostSwitch)
      if (h == shortName) return s;
  }
  return "";
}

SwitchMap readTopologyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throwInvalidArgument("cannot read topology file '" + path + "' (HOCCL_TOPO_FILE): check the path");
  std::stringstream buf;
  buf << in.rdbuf();
  return parseTopologyText(buf.str(), path);
}

SwitchMap parseTopologyText(const std::string& text, const std::string& origin) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parseJson(text, origin);
  return parseSlurm(text, origin);
}

Topology fromSwitchMap(const SwitchMap& map, int ranksPerHost) {
  if (ranksPerHost <= 0) throwInvalidArgument("ranks per host must be positive");
  std::vector<std::vector<int>> counts;
  std::vector<std::string> hostNames, switchNames;
  for (const auto& sw : map.switches) {
    std::vector<int> hosts;
    for (const auto& [h, s] : map.hostSwitch)
      if (s == sw) {
        hosts.push_back(ranksPerHost);
        hostNames.push_back(h);
      }
    if (hosts.empty()) continue;
    counts.push_back(hosts);
    switchNames.push_back(sw);
  }
  if (counts.empty()) throwInvalidArgument("the topology file lists no hosts");
  Topology t = fromCounts(counts);
  t.hostNames = hostNames;
  t.switchNames = switchNames;
  return t;
}

}  // namespace hoccl::topo
