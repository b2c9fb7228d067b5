/// @file ibv_device.h
/// Finding and opening the RDMA port this rank uses. probePorts() lists every active port of every device that
/// HOCCL_IB_HCA admits (an empty list, with the reason, when libibverbs is absent or finds no device); IbvDevice
/// owns one opened device, its protection domain and its registration cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/hca_list.h"
#include "transports/ibverbs/ibv_lib.h"
#include "transports/ibverbs/reg_cache.h"

namespace hoccl::transport::ibverbs {

/// An active port that may be used.
struct PortInfo {
  std::string device;                           ///< device name ("mlx5_0")
  int port = 0;                                 ///< port number
  LinkLayer linkLayer = LinkLayer::InfiniBand;  ///< InfiniBand or Ethernet (RoCE)
  uint16_t lid = 0;                             ///< LID (InfiniBand)
  uint8_t mtu = 0;                              ///< active MTU (enum ibv_mtu)
  int gidIndex = 0;                             ///< GID index used
  std::array<uint8_t, 16> gid{};                ///< the GID at gidIndex (zero on InfiniBand without one)
  /// "mlx5_0:1".
  std::string name() const { return device + ":" + std::to_string(port); }
};

/// The outcome of looking for ports.
struct Probe {
  std::vector<PortInfo> ports;  ///< usable ports, in device and port order
  std::string why;              ///< when none: why (library absent, no device, none active, none admitted)
};

/// Lists the usable ports (see the file comment). Throws hocclInvalidArgument for a malformed HOCCL_IB_HCA or an
/// HOCCL_IB_GID_INDEX that the port does not have.
Probe probePorts(const IbvLib& lib, const HcaFilter& filter);

/// One opened device with its protection domain and registration cache.
class IbvDevice {
 public:
  /// Opens `port.device`. Throws hocclSystemError naming the device when that fails.
  IbvDevice(const IbvLib& lib, PortInfo port);
  ~IbvDevice();
  IbvDevice(const IbvDevice&) = delete;
  IbvDevice& operator=(const IbvDevice&) = delete;

  /// The function table.
  const IbvLib& lib() const { return lib_; }
  /// The opened context.
  ibv_context* context() const { return ctx_; }
  /// The protection domain.
  ibv_pd* pd() const { return pd_; }
  /// The port used.
  const PortInfo& port() const { return port_; }
  /// Registrations of this device (local write and remote write access).
  RegCache& regCache() { return *cache_; }

 private:
  const IbvLib& lib_;
  PortInfo port_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::unique_ptr<RegCache> cache_;
};

}  // namespace hoccl::transport::ibverbs
