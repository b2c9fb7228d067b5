/// @file hca_list.h
/// Which RDMA devices and ports the ibverbs transport may use (HOCCL_IB_HCA), and which GID a RoCE port uses
/// (HOCCL_IB_GID_INDEX): pure functions, no device needed.
///
/// HCA list syntax (NCCL's NCCL_IB_HCA): comma-separated entries `name[:port]`. A name matches devices whose name
/// starts with it (`mlx5` matches mlx5_0 and mlx5_10); `=` makes it exact. An entry without a port matches every port
/// of the device. A leading `^` on the list excludes every entry, and a leading `=` (after the `^`, if any) makes
/// every entry exact, as in NCCL. Beyond NCCL, a single entry may carry its own `^` or `=`
/// (`mlx5_0:1,^mlx5_1`): a port is used when it matches some included entry (or there is none) and no excluded one.
/// Empty entries, ports that are not numbers in [1, 255], empty names and stray characters are errors.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hoccl::transport::ibverbs {

/// One entry of the list.
struct HcaEntry {
  std::string name;      ///< device name or name prefix
  int port = 0;          ///< port number, 0 = every port
  bool exact = false;    ///< the name must match exactly
  bool exclude = false;  ///< matching ports are excluded
};

/// A parsed HOCCL_IB_HCA value.
class HcaFilter {
 public:
  /// Parses `spec` (empty: every device and port). Bad input is hocclInvalidArgument naming HOCCL_IB_HCA, the
  /// entry and what is wrong with it.
  static HcaFilter parse(const std::string& spec);
  /// Whether port `port` of device `device` may be used.
  bool matches(const std::string& device, int port) const;
  /// The entries, in order.
  const std::vector<HcaEntry>& entries() const { return entries_; }

 private:
  std::vector<HcaEntry> entries_;
};

/// One entry of a port's GID table, as the device reports it.
struct GidEntry {
  int index = 0;                  ///< index in the table
  std::array<uint8_t, 16> gid{};  ///< the GID
  std::string type;               ///< "IB/RoCE v1", "RoCE v2" (from sysfs gid_attrs/types), "" when unknown
};

/// True when the GID is all zeros (an unused table entry).
bool gidIsZero(const std::array<uint8_t, 16>& gid);
/// True when the GID is an IPv4-mapped IPv6 address (::ffff:a.b.c.d).
bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& gid);

/// The GID index a RoCE port uses when HOCCL_IB_GID_INDEX is unset: the first RoCE v2 entry that is IPv4-mapped,
/// else the first RoCE v2 entry, else the first non-zero entry; -1 when the table has no usable entry.
int chooseGidIndex(const std::vector<GidEntry>& table);

}  // namespace hoccl::transport::ibverbs
