/// @file dump.h
/// The topology for people and tools: a text summary, JSON (nlohmann) and Graphviz DOT with the rings of every
/// HO-Ring level drawn in their own colour. Used by hoccl-topo.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "topology/host_hw.h"
#include "topology/topology.h"

namespace hoccl::topo {

/// Multi-line text: counts, switches with their hosts and ranks, the levels with their rings, the flat ring order,
/// and (when hw is given) this host's hardware. Rings are listed up to maxRings per level.
std::string toText(const Topology& t, const HostHardware* hw = nullptr, int maxRings = 16);
/// JSON: {"nranks", "nhosts", "nswitches", "switches": [{"name", "hosts": [{"name", "ranks"}]}],
/// "levels": [{"name", "size", "rings"}], "hierarchy_note", "flat_ring", "host_hardware" (when hw is given)}.
nlohmann::json toJson(const Topology& t, const HostHardware* hw = nullptr);
/// Graphviz DOT: a cluster per switch and per host, a node per rank, ring edges of each level in their own colour.
std::string toDot(const Topology& t);

}  // namespace hoccl::topo
