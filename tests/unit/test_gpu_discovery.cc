// Live GPU discovery's pure parts (topology/gpu_discovery.h) and its use by the communicator's topology
// (topo::build): the PCIe class read off a PCI tree, the link of two GPUs from NVML's and the driver's facts with
// each fallback, the placement of one GPU, and the host's ranks ordered along the GPU ring. The whole path through
// the (stand-in) driver libraries and hwloc is tests/gpu_topo/test_gpu_live.py.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "topology/gpu_discovery.h"
#include "topology/host_hw.h"
#include "topology/topology.h"
#include "transports/tcp/tcp_transport.h"

using namespace hoccl;
using namespace hoccl::topo;

namespace {

// Socket 0: host bridge 0 -> top switch -> switch A {GPU 0000:07, GPU 0000:08, NIC mlx5_0}, switch B {GPU 0000:0f}.
// Socket 1: host bridge 1 -> switch C {GPU 0000:87}; host bridge 2 -> switch D {GPU 0000:c7, NIC mlx5_1}.
PciTree twoSockets() {
  PciTree t;
  auto add = [&t](const std::string& bus, int parent, bool hostBridge, int numa) {
    t.nodes.push_back({bus, parent, hostBridge, numa});
    return static_cast<int>(t.nodes.size()) - 1;
  };
  auto underSwitch = [&](int up, const std::string& bus, int numa) {
    return add(bus, add("", up, false, numa), false, numa);  // behind a downstream port
  };
  const int hb0 = add("", -1, true, 0), top = add("0000:03:00.0", hb0, false, 0);
  const int a = add("0000:05:00.0", add("0000:03:00.1", top, false, 0), false, 0);
  const int b = add("0000:0d:00.0", add("0000:03:00.2", top, false, 0), false, 0);
  underSwitch(a, "0000:07:00.0", 0);
  underSwitch(a, "0000:08:00.0", 0);
  t.nics.push_back({"mlx5_0", underSwitch(a, "0000:09:00.0", 0), "ibp9s0"});
  underSwitch(b, "0000:0f:00.0", 0);
  const int c = add("0000:85:00.0", add("", -1, true, 1), false, 1);
  underSwitch(c, "0000:87:00.0", 1);
  const int d = add("0000:c5:00.0", add("", -1, true, 1), false, 1);
  underSwitch(d, "0000:c7:00.0", 1);
  t.nics.push_back({"mlx5_1", underSwitch(d, "0000:c9:00.0", 1), "ibp201s0"});
  return t;
}

std::vector<std::vector<int>> square(size_t n, int v) {
  return std::vector<std::vector<int>>(n, std::vector<int>(n, v));
}

std::string words(const GpuTopology& t, size_t a) {
  std::string s;
  for (size_t b = 0; b < t.gpus.size(); ++b) s += (a == b ? std::string("X") : linkName(t.gpuLinks[a][b])) + " ";
  for (size_t k = 0; k < t.nics.size(); ++k) s += linkName(t.nicLinks[a][k]) + " ";
  return s;
}

}  // namespace

TEST_CASE("gpu discovery: bus ids in the driver's, NVML's and hwloc's forms are one id", "[gpu_topology]") {
  CHECK(normaliseBusId("00000000:07:00.0") == "0000:07:00.0");
  CHECK(normaliseBusId("0000:AB:1F.3") == "0000:ab:1f.3");
  CHECK(normaliseBusId("07:00.0") == "0000:07:00.0");
  CHECK(normaliseBusId("nonsense") == "");
  CHECK(twoSockets().find("00000000:0F:00.0") >= 0);
  CHECK(twoSockets().find("0000:10:00.0") == -1);
}

TEST_CASE("gpu discovery: PCIe classes from the tree (PIX, PXB, PHB, NODE, SYS)", "[gpu_topology]") {
  GpuFacts facts;
  facts.busIds = {"0000:07:00.0", "0000:08:00.0", "0000:0F:00.0", "0000:87:00.0", "0000:c7:00.0"};
  const GpuTopology t = buildGpuTopology(facts, twoSockets());
  REQUIRE(t.gpus.size() == 5);
  CHECK(t.gpus[2].busId == "0000:0f:00.0");
  CHECK(t.gpus[3].numaNode == 1);
  CHECK(words(t, 0) == "X PIX PXB SYS SYS PIX SYS ");
  CHECK(words(t, 2) == "PXB PXB X SYS SYS PXB SYS ");
  CHECK(words(t, 3) == "SYS SYS SYS X NODE SYS NODE ");
  CHECK(words(t, 4) == "SYS SYS SYS NODE X SYS PIX ");
  CHECK(nearestNics(t) == std::vector<int>{0, 0, 0, 1, 1});
  CHECK(t.peerAccess.empty());  // the driver said nothing
}

TEST_CASE("gpu discovery: NVLink from NVML wins, then NVML's level, then the tree, then NUMA", "[gpu_topology]") {
  PciTree tree = twoSockets();
  GpuFacts facts;
  facts.busIds = {"0000:07:00.0", "0000:0f:00.0", "0000:87:00.0", "0000:55:00.0"};  // the last is not in the tree
  facts.nvlinks = square(4, 0);
  facts.nvlinks[0][1] = facts.nvlinks[1][0] = 4;
  facts.nvswitchLinks = {0, 0, 0, 0};
  facts.commonAncestor = square(4, -1);
  facts.commonAncestor[0][2] = facts.commonAncestor[2][0] = 40;  // NVML says NODE where the tree says SYS
  facts.peerAccess = square(4, -1);
  facts.peerAccess[0][1] = facts.peerAccess[1][0] = 1;
  GpuTopology t = buildGpuTopology(facts, tree);
  CHECK(linkName(t.gpuLinks[0][1]) == "NV4");
  CHECK(linkName(t.gpuLinks[0][2]) == "NODE");
  CHECK(linkName(t.gpuLinks[1][2]) == "SYS");
  CHECK(linkName(t.gpuLinks[2][3]) == "SYS");  // unknown NUMA node: SYS
  CHECK(linkName(t.nicLinks[3][0]) == "SYS");
  CHECK(t.peerAccess[0][1] == 1);
  CHECK(t.peerAccess[0][2] == -1);
  CHECK(t.peerAccess[3][3] == 1);
  // GPUs on NVSwitches: the smaller of their switch link counts, as nvidia-smi prints it.
  facts.nvswitchLinks = {18, 12, 18, 0};
  t = buildGpuTopology(facts, tree);
  CHECK(linkName(t.gpuLinks[0][1]) == "NV12");
  CHECK(linkName(t.gpuLinks[0][2]) == "NV18");
  CHECK(linkName(t.gpuLinks[2][3]) == "SYS");
}

TEST_CASE("gpu discovery: placing a GPU gives its ring position and nearest NIC", "[gpu_topology]") {
  GpuFacts facts;
  facts.busIds = {"0000:07:00.0", "0000:87:00.0", "0000:08:00.0", "0000:c7:00.0"};
  const GpuTopology t = buildGpuTopology(facts, twoSockets());
  const auto order = gpuRingOrder(t);
  for (int g = 0; g < 4; ++g) {
    const GpuPlacement p = placeGpu(t, facts.busIds[g]);
    CHECK(p.gpu == g);
    CHECK(order[p.ringPosition] == g);
    CHECK(p.nicName == (g == 0 || g == 2 ? "mlx5_0" : "mlx5_1"));
  }
  CHECK(placeGpu(t, "0000:99:00.0").gpu == -1);
  CHECK(placeGpu(GpuTopology{}, "0000:07:00.0").ringPosition == -1);
}

namespace {
boot::RankInfo rankOn(int rank, const char* host, int gpuRing) {
  boot::RankInfo r;
  r.rank = rank;
  std::strncpy(r.hostId, host, sizeof r.hostId - 1);
  std::strncpy(r.hostname, host, sizeof r.hostname - 1);
  r.gpuRing = gpuRing;
  return r;
}
}  // namespace

TEST_CASE("gpu discovery applied: a host's ranks follow its GPU ring", "[gpu_topology]") {
  // Host a: ranks 0..3 on GPUs at ring positions 2, 0, 3, 1. Host b: rank 5 has no GPU, so rank order stays.
  std::vector<boot::RankInfo> ranks = {rankOn(0, "a", 2), rankOn(1, "a", 0),  rankOn(2, "a", 3), rankOn(3, "a", 1),
                                       rankOn(4, "b", 1), rankOn(5, "b", -1), rankOn(6, "b", 0), rankOn(7, "b", 2)};
  const Topology t = build(ranks);
  CHECK(t.localIndex == std::vector<int>{2, 0, 3, 1, 0, 1, 2, 3});
  const Hierarchy h = hierarchy(t);
  REQUIRE(h.names[0] == "host");
  const auto rings = levelRings(h, 0);
  REQUIRE(rings.size() == 2);
  CHECK(rings[0] == std::vector<int>{1, 3, 0, 2});
  CHECK(rings[1] == std::vector<int>{4, 5, 6, 7});
  CHECK(flatRingOrder(t) == std::vector<int>{1, 3, 0, 2, 4, 5, 6, 7});
  // Two ranks on one GPU stay next to each other, in rank order.
  const Topology shared = build({rankOn(0, "a", 1), rankOn(1, "a", 0), rankOn(2, "a", 1), rankOn(3, "a", 0)});
  CHECK(shared.localIndex == std::vector<int>{2, 0, 3, 1});
}

TEST_CASE("gpu discovery: a rank on a GPU uses its GPU's nearest NIC for tcp, else the NUMA node's", "[gpu_topology]") {
  GpuFacts facts;
  facts.busIds = {"0000:07:00.0", "0000:08:00.0", "0000:0F:00.0", "0000:87:00.0", "0000:c7:00.0"};
  const GpuTopology t = buildGpuTopology(facts, twoSockets());
  REQUIRE(t.nics.size() == 2);
  CHECK(t.nics[0].netdev == "ibp9s0");
  CHECK(t.nics[1].netdev == "ibp201s0");
  // The host as hwloc's NUMA view sees it: NIC eth0 on node 0, NIC ibp201s0 on node 1, the rank runs on node 0.
  HostHardware host;
  host.numaNodes = 2;
  host.currentNuma = 0;
  host.devices = {{"nic", "eth0", "0000:01:00.0", 0}, {"nic", "ibp201s0", "0000:c9:00.0", 1}};
  transport::ConnectContext ctx;
  std::string why;
  CHECK(transport::tcp::chooseInterface(ctx, host, &why) == "eth0");  // no GPU: the NUMA node's NIC
  CHECK(why.find("NUMA node 0") != std::string::npos);
  for (const auto& [bus, nic] : std::vector<std::pair<std::string, std::string>>{{"0000:87:00.0", "ibp201s0"},
                                                                                 {"0000:c7:00.0", "ibp201s0"},
                                                                                 {"0000:08:00.0", "ibp9s0"}}) {
    const GpuPlacement p = placeGpu(t, bus);
    CHECK(p.nicNetdev == nic);
    ctx.nic = p.nicNetdev;  // what the communicator passes down (src/comm/communicator.cc)
    CHECK(transport::tcp::chooseInterface(ctx, host, &why) == nic);
    CHECK(why.find("GPU") != std::string::npos);
  }
}
