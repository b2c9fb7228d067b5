// The GPU topology of a host (topology/gpu_topology.h) on recorded topologies, since no GPU is here: the file's
// checks, the ring order against a brute force over every order (the reference: fewest hops of the worst class, then
// of the next, and so on), and the NIC each GPU gets on DGX-like and two-socket PCIe machines.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "topology/gpu_topology.h"

using namespace hoccl;
using namespace hoccl::topo;

namespace {

/// A recorded topology from a link function over (gpus + nics) devices.
template <typename LinkFn>
std::string record(int gpus, const std::vector<std::string>& nics, const std::vector<int>& numa, LinkFn link) {
  nlohmann::json doc;
  for (int g = 0; g < gpus; ++g)
    doc["gpus"].push_back({{"bus_id", "0000:0" + std::to_string(g) + ":00.0"}, {"numa", numa[g]}});
  for (auto& n : nics) doc["nics"].push_back({{"name", n}, {"numa", 0}});
  const int all = gpus + static_cast<int>(nics.size());
  for (int r = 0; r < all; ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int c = 0; c < all; ++c) row.push_back(r == c ? "X" : link(std::min(r, c), std::max(r, c)));
    doc["links"].push_back(row);
  }
  return doc.dump();
}

/// How many hops of each class (worst first: SYS, NODE, PHB, PXB, PIX, NVLink) a ring over `order` makes.
std::array<int, 6> hopCounts(const GpuTopology& t, const std::vector<int>& order) {
  std::array<int, 6> counts{};
  for (size_t i = 0; i < order.size(); ++i) {
    const LinkInfo& l = t.gpuLinks[order[i]][order[(i + 1) % order.size()]];
    ++counts[5 - static_cast<int>(l.kind)];
  }
  return counts;
}

/// The reference: the lexicographically smallest hop counts over every order starting at GPU 0.
std::array<int, 6> bestByBruteForce(const GpuTopology& t) {
  std::vector<int> order(t.gpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::array<int, 6> best;
  best.fill(1 << 20);
  do {
    best = std::min(best, hopCounts(t, order));
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

bool isPermutation(std::vector<int> order, size_t n) {
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < n; ++i)
    if (order.size() != n || order[i] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace

TEST_CASE("gpu topology: an 8-GPU NVSwitch machine with a NIC per GPU under each PCIe switch", "[gpu_topology]") {
  // DGX-A100-like: every GPU pair NV12; GPUs (0,1), (2,3), (4,5), (6,7) each share a PCIe switch with two NICs;
  // GPUs 0-3 on socket 0, 4-7 on socket 1.
  std::vector<std::string> nics;
  for (int k = 0; k < 8; ++k) nics.push_back("mlx5_" + std::to_string(k));
  auto link = [](int a, int b) -> std::string {
    if (b < 8) return "NV12";
    const int gpu = a, nic = b - 8;
    if (gpu / 2 == nic / 2) return "PXB";
    return gpu / 4 == nic / 4 ? "NODE" : "SYS";
  };
  auto t = parseGpuTopology(record(8, nics, {0, 0, 0, 0, 1, 1, 1, 1}, link), "dgx");
  auto order = gpuRingOrder(t);
  REQUIRE(isPermutation(order, 8));
  CHECK(order[0] == 0);
  CHECK(hopCounts(t, order)[5] == 8);  // every hop over NVLink
  CHECK(nearestNics(t) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(linkName(t.gpuLinks[3][5]) == "NV12");
  CHECK(linkName(t.nicLinks[0][1]) == "PXB");
}

TEST_CASE("gpu topology: 4+4 GPUs on two sockets over PCIe, GPU indices interleaved across sockets", "[gpu_topology]") {
  // Socket 0: GPUs 0, 2, 4, 6; socket 1: 1, 3, 5, 7. Switch pairs (0,2), (4,6), (1,3), (5,7): PIX; other GPUs of a
  // socket: NODE; across sockets: SYS. Two NICs, one per socket, under the switch of GPUs 0/2 and 1/3.
  auto socketOf = [](int g) { return g % 2; };
  auto switchOf = [](int g) { return g % 2 * 2 + g / 4; };  // 0,2 -> 0; 4,6 -> 1; 1,3 -> 2; 5,7 -> 3
  auto link = [&](int a, int b) -> std::string {
    if (b >= 8) {  // NIC b-8 sits under switch 0 (nic 0) or switch 2 (nic 1)
      const int nicSwitch = b == 8 ? 0 : 2, nicSocket = b == 8 ? 0 : 1;
      if (switchOf(a) == nicSwitch) return "PIX";
      return socketOf(a) == nicSocket ? "NODE" : "SYS";
    }
    if (switchOf(a) == switchOf(b)) return "PIX";
    return socketOf(a) == socketOf(b) ? "NODE" : "SYS";
  };
  auto t = parseGpuTopology(record(8, {"mlx5_0", "mlx5_1"}, {0, 1, 0, 1, 0, 1, 0, 1}, link), "two-socket");
  auto order = gpuRingOrder(t);
  REQUIRE(isPermutation(order, 8));
  const auto counts = hopCounts(t, order);
  CHECK(counts == bestByBruteForce(t));
  CHECK(counts == std::array<int, 6>{2, 2, 0, 0, 4, 0});  // the ring crosses the sockets only twice
  std::vector<int> naive(8);
  std::iota(naive.begin(), naive.end(), 0);
  CHECK(hopCounts(t, naive)[0] == 8);  // index order would cross at every hop
  // Each socket's NIC, and the nearer switch's GPUs first: both NICs are used by the GPUs of their socket.
  auto nic = nearestNics(t);
  for (int g = 0; g < 8; ++g) CHECK(nic[g] == socketOf(g));
}

TEST_CASE("gpu topology: a hybrid cube-mesh (DGX-1) has an NVLink-only ring", "[gpu_topology]") {
  // NVLink within the quads {0,1,2,3} and {4,5,6,7} and between i and i+4; everything else over PCIe/SYS.
  auto link = [](int a, int b) -> std::string {
    if (a / 4 == b / 4) return (a + b) % 2 ? "NV1" : "NV2";
    if (b == a + 4) return "NV2";
    return "SYS";
  };
  auto t = parseGpuTopology(record(8, {}, std::vector<int>(8, 0), link), "cube-mesh");
  auto order = gpuRingOrder(t);
  REQUIRE(isPermutation(order, 8));
  CHECK(hopCounts(t, order)[5] == 8);
  CHECK(nearestNics(t) == std::vector<int>(8, -1));  // no NIC: -1 for every GPU
}

TEST_CASE("gpu topology: the ring order matches a brute force on random topologies", "[gpu_topology]") {
  const char* words[] = {"NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"};
  std::mt19937 gen(20261123);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 3 + trial % 6;  // 3..8 GPUs
    std::map<std::pair<int, int>, std::string> pick;
    auto link = [&](int a, int b) -> std::string {
      auto key = std::make_pair(a, b);
      if (!pick.count(key)) pick[key] = words[gen() % 7];
      return pick[key];
    };
    auto t = parseGpuTopology(record(n, {}, std::vector<int>(n, 0), link), "random");
    auto order = gpuRingOrder(t);
    INFO("trial " << trial << ", " << n << " GPUs");
    REQUIRE(isPermutation(order, n));
    CHECK(hopCounts(t, order) == bestByBruteForce(t));
  }
}

TEST_CASE("gpu topology: more GPUs than the exact search takes still get a full order", "[gpu_topology]") {
  auto link = [](int a, int b) -> std::string { return (b - a) % 2 ? "SYS" : "NV2"; };
  auto t = parseGpuTopology(record(20, {}, std::vector<int>(20, 0), link), "twenty");
  auto order = gpuRingOrder(t);
  REQUIRE(isPermutation(order, 20));
  CHECK(hopCounts(t, order)[0] <= 4);  // the greedy walk stays within each parity class but for a few hops
}

TEST_CASE("gpu topology: a bad recorded file is an error naming the entry", "[gpu_topology]") {
  auto fails = [](const std::string& text, const std::string& needle) {
    try {
      parseGpuTopology(text, "test.json");
      FAIL("accepted: " << text);
    } catch (const Error& e) {
      CHECK(e.code() == hocclInvalidArgument);
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
      CHECK(std::string(e.what()).find("test.json") != std::string::npos);
    }
  };
  fails("{", "not valid JSON");
  fails(R"({"gpus": [], "links": []})", "no GPUs");
  fails(R"({"gpus": [{}, {}], "links": [["X"]]})", "2x2");
  fails(R"({"gpus": [{}, {}], "links": [["X", "NV2"], ["NV1", "X"]]})", "GPU0 to GPU1 is \"NV2\" but GPU1 to GPU0");
  fails(R"({"gpus": [{}, {}], "links": [["X", "PCI"], ["PCI", "X"]]})", "unknown link \"PCI\"");
  fails(R"({"gpus": [{}, {}], "links": [["NV1", "PIX"], ["PIX", "X"]]})", "to itself");
  fails(R"({"gpus": [{}], "nics": [{"name": "mlx5_0"}], "links": [["X", "NV4"], ["NV4", "X"]]})",
        "NVLink connects GPUs only");
  fails(R"({"gpus": [{}], "nics": [{}], "links": [["X", "PIX"], ["PIX", "X"]]})", "name");
  CHECK_THROWS_AS(loadGpuTopology("/nonexistent/gpus.json"), Error);
}
