// Port discovery (HOCCL_IB_HCA, HOCCL_IB_GID_INDEX) and the opened device (see ibv_device.h).
#include "transports/ibverbs/ibv_device.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::transport::ibverbs {
namespace {

/// Registrations kept per device before the least recently used unreferenced ones go.
constexpr size_t kRegCacheEntries = 256;

std::string gidType(const std::string& device, int port, int index) {
  std::ifstream f(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/types/{}", device, port, index));
  std::string line;
  std::getline(f, line);
  return line;
}

/// Fills the GID of an Ethernet (RoCE) port, or of an InfiniBand port when it has one.
void chooseGid(const IbvLib& lib, ibv_context* ctx, const ibv_port_attr& attr, PortInfo* p) {
  const std::optional<int64_t> forced = params::IB_GID_INDEX.value();
  auto query = [&](int index, std::array<uint8_t, 16>* out) {
    ibv_gid gid{};
    if (lib.query_gid(ctx, static_cast<uint8_t>(p->port), index, &gid) != 0) return false;
    std::memcpy(out->data(), gid.raw, 16);
    return true;
  };
  if (forced) {
    if (*forced >= attr.gid_tbl_len || !query(static_cast<int>(*forced), &p->gid) || gidIsZero(p->gid))
      throwInvalidArgument(
          fmt::format("HOCCL_IB_GID_INDEX={}: port {} has no GID there (table of {} entries); "
                      "`show_gids` or /sys/class/infiniband/{}/ports/{}/gids/ lists them",
                      *forced, p->name(), attr.gid_tbl_len, p->device, p->port));
    p->gidIndex = static_cast<int>(*forced);
    return;
  }
  if (p->linkLayer == LinkLayer::InfiniBand) {
    p->gidIndex = 0;
    if (!query(0, &p->gid)) p->gid = {};
    return;
  }
  std::vector<GidEntry> table;
  for (int i = 0; i < attr.gid_tbl_len && i < 256; ++i) {
    GidEntry e;
    e.index = i;
    if (!query(i, &e.gid) || gidIsZero(e.gid)) continue;
    e.type = gidType(p->device, p->port, i);
    table.push_back(e);
  }
  const int chosen = chooseGidIndex(table);
  p->gidIndex = chosen < 0 ? 0 : chosen;
  for (const GidEntry& e : table)
    if (e.index == p->gidIndex) p->gid = e.gid;
}

}  // namespace

Probe probePorts(const IbvLib& lib, const HcaFilter& filter) {
  Probe probe;
  if (!lib.ok()) {
    probe.why = lib.why();
    return probe;
  }
  int n = 0;
  ibv_device** list = lib.get_device_list(&n);
  if (!list || n == 0) {
    // No list at all (ENOSYS) is what a kernel without RDMA support answers: no device either.
    probe.why = list ? "libibverbs found no RDMA device (ibv_get_device_list returned none)"
                     : fmt::format("libibverbs found no RDMA device (ibv_get_device_list: {})", std::strerror(errno));
    if (list) lib.free_device_list(list);
    return probe;
  }
  std::string seen;
  for (int d = 0; d < n; ++d) {
    const std::string name = lib.get_device_name(list[d]) ? lib.get_device_name(list[d]) : "?";
    ibv_context* ctx = lib.open_device(list[d]);
    if (!ctx) {
      HOCCL_INFO(kNet, "ibverbs: cannot open device {}: {}", name, std::strerror(errno));
      continue;
    }
    ibv_device_attr dattr{};
    if (lib.query_device(ctx, &dattr) == 0) {
      for (int port = 1; port <= dattr.phys_port_cnt; ++port) {
        ibv_port_attr pattr{};
        if (lib.queryPort(ctx, static_cast<uint8_t>(port), &pattr) != 0) continue;
        seen += fmt::format(" {}:{}({})", name, port, pattr.state == IBV_PORT_ACTIVE ? "active" : "down");
        if (pattr.state != IBV_PORT_ACTIVE || !filter.matches(name, port)) continue;
        PortInfo p;
        p.device = name;
        p.port = port;
        p.linkLayer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::Ethernet : LinkLayer::InfiniBand;
        p.lid = pattr.lid;
        p.mtu = static_cast<uint8_t>(pattr.active_mtu);
        try {
          chooseGid(lib, ctx, pattr, &p);
        } catch (...) {
          lib.close_device(ctx);
          lib.free_device_list(list);
          throw;
        }
        probe.ports.push_back(p);
      }
    }
    lib.close_device(ctx);
  }
  lib.free_device_list(list);
  if (probe.ports.empty())
    probe.why = fmt::format("no active port admitted by HOCCL_IB_HCA='{}' (ports seen:{})", params::IB_HCA.get(),
                            seen.empty() ? " none" : seen);
  return probe;
}

IbvDevice::IbvDevice(const IbvLib& lib, PortInfo port) : lib_(lib), port_(std::move(port)) {
  int n = 0;
  ibv_device** list = lib.get_device_list(&n);
  for (int d = 0; list && d < n && !ctx_; ++d) {
    const char* name = lib.get_device_name(list[d]);
    if (name && port_.device == name) ctx_ = lib.open_device(list[d]);
  }
  const int err = errno;
  if (list) lib.free_device_list(list);
  if (!ctx_)
    throw Error(hocclSystemError, fmt::format("ibverbs: cannot open device {}: {}; check `ibv_devinfo -d {}`",
                                              port_.device, std::strerror(err), port_.device));
  pd_ = lib.alloc_pd(ctx_);
  if (!pd_) {
    lib.close_device(ctx_);
    throw Error(hocclSystemError,
                fmt::format("ibverbs: ibv_alloc_pd failed on {}: {}", port_.device, std::strerror(errno)));
  }
  ibv_pd* pd = pd_;
  const IbvLib* l = &lib_;
  std::string dev = port_.device;
  cache_ = std::make_unique<RegCache>(
      [pd, l, dev](uintptr_t base, size_t len) -> void* {
        ibv_mr* mr = l->reg_mr(pd, reinterpret_cast<void*>(base), len,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!mr)
          throw Error(hocclSystemError,
                      fmt::format("ibverbs: registering {} bytes on {} failed: {}. Check the locked-memory limit "
                                  "(ulimit -l should be unlimited)",
                                  len, dev, std::strerror(errno)));
        return mr;
      },
      [l](void* h) { l->dereg_mr(static_cast<ibv_mr*>(h)); }, kRegCacheEntries);
}

IbvDevice::~IbvDevice() {
  cache_.reset();  // registrations go before their protection domain
  if (pd_) lib_.dealloc_pd(pd_);
  if (ctx_) lib_.close_device(ctx_);
}

}  // namespace hoccl::transport::ibverbs
