// The pieces of hoccl-model that its subcommands share (see model_tool.h): size, shape and collective parsing, the
// link model it predicts with, nccl-tests' counts and bus factors.
#include "tools/model/model_tool.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "topology/topology.h"

namespace hoccl::model_tool {

double parseWithUnit(const std::string& text, const std::vector<std::pair<char, double>>& units,
                     const std::string& what, const std::string& examples) {
  if (text.empty()) throw std::runtime_error("empty " + what);
  std::string num = text;
  double mult = 1;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(num.back())));
  for (const auto& [letter, factor] : units)
    if (last == letter) {
      mult = factor;
      num.pop_back();
      break;
    }
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(num, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != num.size() || !(v > 0))
    throw std::runtime_error("bad " + what + " '" + text + "' (e.g. " + examples + ")");
  return v * mult;
}

size_t parseBytes(const std::string& text) {
  const double bytes = parseWithUnit(text, {{'K', 1024.0}, {'M', 1048576.0}, {'G', 1073741824.0}}, "size",
                                     "8, 64K, 16M, 1G");
  return static_cast<size_t>(std::llround(bytes));
}

std::vector<size_t> parseSizes(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos) return {parseBytes(text)};
  size_t lo = parseBytes(text.substr(0, colon)), hi = parseBytes(text.substr(colon + 1));
  if (lo > hi) throw std::runtime_error("bad size range '" + text + "': the first size is larger than the last");
  std::vector<size_t> out;
  for (size_t s = lo; s <= hi; s *= 2) out.push_back(s);
  return out;
}

topo::Topology offlineTopology(const std::string& shape, const std::string& topoFile, int ranksPerHost) {
  if (!topoFile.empty()) return topo::fromSwitchMap(topo::readTopologyFile(topoFile), ranksPerHost);
  std::vector<int> v;
  std::stringstream in(shape);
  std::string item;
  while (std::getline(in, item, 'x')) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n <= 0) throw std::runtime_error("bad --shape '" + shape + "'");
    v.push_back(n);
  }
  if (v.size() != 3) throw std::runtime_error("--shape wants SWITCHESxHOSTSxRANKS, e.g. 64x32x8");
  return topo::fromShape(v[0], v[1], v[2]);
}

topo::LinkModel linkModel(const std::string& modelFile) {
  return modelFile.empty() ? topo::LinkModel::fromParams() : topo::LinkModel::load(modelFile);
}

sched::Coll parseColl(const std::string& name) {
  for (sched::Coll c : {sched::Coll::AllReduce, sched::Coll::ReduceScatter, sched::Coll::AllGather,
                        sched::Coll::Broadcast, sched::Coll::Reduce, sched::Coll::AlltoAll}) {
    std::string n = sched::collName(c);
    std::string lower;
    for (char ch : n) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == name) return c;
  }
  throw std::runtime_error("unknown collective '" + name +
                           "' (allreduce, reducescatter, allgather, broadcast, reduce, alltoall)");
}

size_t countFor(sched::Coll coll, size_t bytes, int nranks) {
  const size_t elems = bytes / 4;
  if (coll == sched::Coll::AllGather || coll == sched::Coll::ReduceScatter || coll == sched::Coll::AlltoAll)
    return elems / static_cast<size_t>(nranks);
  return elems;
}

double busFactor(sched::Coll coll, int n) {
  switch (coll) {
    case sched::Coll::AllReduce: return 2.0 * (n - 1) / n;
    case sched::Coll::AllGather:
    case sched::Coll::ReduceScatter:
    case sched::Coll::AlltoAll: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace hoccl::model_tool
