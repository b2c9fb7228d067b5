/// @file conn_info.h
/// What one rank tells a peer about its end of their RC queue pair, and the fixed wire layout it travels in through
/// the bootstrap (pure code: encoded and decoded without a device).
///
/// Wire layout (kConnInfoBytes = 112 bytes, every integer little-endian, offsets in bytes):
///   0 magic u32 "HIBV"    4 version u16         6 size u16 (112)      8 from rank u32      12 to rank u32
///   16 lid u16            18 link layer u8      19 mtu u8 (ibv_mtu)   20 port u8           21 gid index u8
///   22 flags u16 (bit 0: adaptive routing)      24 gid [16]           40 qpn u32 (24 bits) 44 psn u32 (24 bits)
///   48 ring address u64   56 ring rkey u32      60 slots u32          64 slot bytes u64
///   72 credit address u64 80 credit rkey u32    84 reserved u32 (0)   88 reserved [16] (0) 104 checksum u64
/// The checksum is FNV-1a (base/hash.h) of bytes 0..103. A message is refused when the magic, version or size
/// differ (another hoccl build: hocclInvalidUsage), the checksum does not match, or a field is out of range
/// (hocclInternalError); the error names the peer and the field.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hoccl::transport::ibverbs {

/// Bytes of one encoded ConnInfo.
constexpr size_t kConnInfoBytes = 112;
/// The wire layout's magic number ("HIBV").
constexpr uint32_t kConnInfoMagic = 0x56424948;
/// The wire layout's version; bump it when the layout changes.
constexpr uint16_t kConnInfoVersion = 1;

/// Link layers, as verbs.h numbers them (IBV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_ETHERNET).
enum class LinkLayer : uint8_t { InfiniBand = 1, Ethernet = 2 };

/// One side of a queue pair and the memory the peer writes into.
struct ConnInfo {
  uint32_t fromRank = 0;                        ///< the rank that describes its end
  uint32_t toRank = 0;                          ///< the peer it is meant for
  uint16_t lid = 0;                             ///< port LID (InfiniBand)
  LinkLayer linkLayer = LinkLayer::InfiniBand;  ///< the port's link layer
  uint8_t mtu = 0;                              ///< active MTU as enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint8_t port = 0;                             ///< port number
  uint8_t gidIndex = 0;                         ///< GID table index used (RoCE)
  bool adaptiveRouting = false;                 ///< HOCCL_IB_ADAPTIVE_ROUTING of the sender (both must agree)
  std::array<uint8_t, 16> gid{};                ///< GID (required for RoCE)
  uint32_t qpn = 0;                             ///< queue pair number (24 bits)
  uint32_t psn = 0;                             ///< initial packet sequence number (24 bits)
  uint64_t ringAddr = 0;                        ///< address of the receive ring the peer writes into
  uint32_t ringRkey = 0;                        ///< its remote key
  uint32_t slots = 0;                           ///< slots in the ring
  uint64_t slotBytes = 0;                       ///< bytes per slot (header included)
  uint64_t creditAddr = 0;                      ///< address of the credit word the peer writes its consumed count into
  uint32_t creditRkey = 0;                      ///< its remote key

  /// Field-by-field equality (for tests).
  bool operator==(const ConnInfo& o) const;
};

/// The encoded form.
using ConnInfoWire = std::array<uint8_t, kConnInfoBytes>;

/// Encodes `info` (with checksum).
ConnInfoWire encodeConnInfo(const ConnInfo& info);
/// Decodes and validates `bytes` bytes at `data`, received from `peerName` and expected to go from rank
/// `expectFrom` to rank `expectTo`. Throws hoccl::Error naming the peer and what is wrong (see the file comment).
ConnInfo decodeConnInfo(const void* data, size_t bytes, int expectFrom, int expectTo, const std::string& peerName);

}  // namespace hoccl::transport::ibverbs
