// Encoding and validation of the queue-pair connection data (see conn_info.h for the layout).
#include "transports/ibverbs/conn_info.h"

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/hash.h"
#include "transports/ibverbs/hca_list.h"

namespace hoccl::transport::ibverbs {
namespace {

constexpr size_t kChecksumAt = 104;

template <typename T>
void put(ConnInfoWire& w, size_t at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) w[at + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <typename T>
T take(const uint8_t* p, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[at + i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

bool ConnInfo::operator==(const ConnInfo& o) const {
  return fromRank == o.fromRank && toRank == o.toRank && lid == o.lid && linkLayer == o.linkLayer && mtu == o.mtu &&
         port == o.port && gidIndex == o.gidIndex && adaptiveRouting == o.adaptiveRouting && gid == o.gid &&
         qpn == o.qpn && psn == o.psn && ringAddr == o.ringAddr && ringRkey == o.ringRkey && slots == o.slots &&
         slotBytes == o.slotBytes && creditAddr == o.creditAddr && creditRkey == o.creditRkey;
}

ConnInfoWire encodeConnInfo(const ConnInfo& c) {
  ConnInfoWire w{};
  put<uint32_t>(w, 0, kConnInfoMagic);
  put<uint16_t>(w, 4, kConnInfoVersion);
  put<uint16_t>(w, 6, static_cast<uint16_t>(kConnInfoBytes));
  put<uint32_t>(w, 8, c.fromRank);
  put<uint32_t>(w, 12, c.toRank);
  put<uint16_t>(w, 16, c.lid);
  put<uint8_t>(w, 18, static_cast<uint8_t>(c.linkLayer));
  put<uint8_t>(w, 19, c.mtu);
  put<uint8_t>(w, 20, c.port);
  put<uint8_t>(w, 21, c.gidIndex);
  put<uint16_t>(w, 22, c.adaptiveRouting ? 1 : 0);
  std::memcpy(w.data() + 24, c.gid.data(), 16);
  put<uint32_t>(w, 40, c.qpn);
  put<uint32_t>(w, 44, c.psn);
  put<uint64_t>(w, 48, c.ringAddr);
  put<uint32_t>(w, 56, c.ringRkey);
  put<uint32_t>(w, 60, c.slots);
  put<uint64_t>(w, 64, c.slotBytes);
  put<uint64_t>(w, 72, c.creditAddr);
  put<uint32_t>(w, 80, c.creditRkey);
  put<uint64_t>(w, kChecksumAt, fnv1a(w.data(), kChecksumAt));
  return w;
}

ConnInfo decodeConnInfo(const void* data, size_t bytes, int expectFrom, int expectTo, const std::string& peerName) {
  auto refuse = [&](hocclResult_t code, const std::string& why) {
    throw Error(code,
                fmt::format("ibverbs: rank {} cannot use the connection data of {}: {}", expectTo, peerName, why));
  };
  const char* sameBuild = "; run the same hoccl build on every rank";
  if (!data || bytes < 8) refuse(hocclInvalidUsage, fmt::format("{} bytes is too short{}", bytes, sameBuild));
  const auto* p = static_cast<const uint8_t*>(data);
  const uint32_t magic = take<uint32_t>(p, 0);
  const uint16_t version = take<uint16_t>(p, 4);
  const uint16_t size = take<uint16_t>(p, 6);
  if (magic != kConnInfoMagic)
    refuse(hocclInvalidUsage, fmt::format("magic {:#x} instead of {:#x}{}", magic, kConnInfoMagic, sameBuild));
  if (version != kConnInfoVersion)
    refuse(hocclInvalidUsage,
           fmt::format("wire version {}, this rank speaks {}{}", version, kConnInfoVersion, sameBuild));
  if (size != kConnInfoBytes || bytes != kConnInfoBytes)
    refuse(hocclInvalidUsage,
           fmt::format("{} bytes announced, {} received, {} expected{}", size, bytes, kConnInfoBytes, sameBuild));
  const uint64_t sum = take<uint64_t>(p, kChecksumAt);
  if (sum != fnv1a(p, kChecksumAt))
    refuse(hocclInternalError, "checksum mismatch (the data was corrupted on its way through the bootstrap)");

  ConnInfo c;
  c.fromRank = take<uint32_t>(p, 8);
  c.toRank = take<uint32_t>(p, 12);
  c.lid = take<uint16_t>(p, 16);
  const uint8_t link = take<uint8_t>(p, 18);
  c.mtu = take<uint8_t>(p, 19);
  c.port = take<uint8_t>(p, 20);
  c.gidIndex = take<uint8_t>(p, 21);
  const uint16_t flags = take<uint16_t>(p, 22);
  std::memcpy(c.gid.data(), p + 24, 16);
  c.qpn = take<uint32_t>(p, 40);
  c.psn = take<uint32_t>(p, 44);
  c.ringAddr = take<uint64_t>(p, 48);
  c.ringRkey = take<uint32_t>(p, 56);
  c.slots = take<uint32_t>(p, 60);
  c.slotBytes = take<uint64_t>(p, 64);
  c.creditAddr = take<uint64_t>(p, 72);
  c.creditRkey = take<uint32_t>(p, 80);
  const uint32_t reserved = take<uint32_t>(p, 84);
  bool reservedZero = reserved == 0;
  for (size_t i = 88; i < 104; ++i) reservedZero = reservedZero && p[i] == 0;

  auto field = [&](const char* what, uint64_t value) {
    refuse(hocclInternalError, fmt::format("field {} has the impossible value {}", what, value));
  };
  if (c.fromRank != static_cast<uint32_t>(expectFrom) || c.toRank != static_cast<uint32_t>(expectTo))
    refuse(hocclInternalError, fmt::format("it describes the pair {} -> {}, expected {} -> {}", c.fromRank, c.toRank,
                                           expectFrom, expectTo));
  if (link != static_cast<uint8_t>(LinkLayer::InfiniBand) && link != static_cast<uint8_t>(LinkLayer::Ethernet))
    field("link layer", link);
  c.linkLayer = static_cast<LinkLayer>(link);
  if (c.mtu < 1 || c.mtu > 5) field("mtu", c.mtu);
  if (c.port == 0) field("port", c.port);
  if (flags & ~1u) field("flags", flags);
  c.adaptiveRouting = flags & 1u;
  if (!reservedZero) refuse(hocclInternalError, "reserved bytes are not zero");
  if (c.qpn == 0 || c.qpn >= (1u << 24)) field("qpn", c.qpn);
  if (c.psn >= (1u << 24)) field("psn", c.psn);
  if (c.linkLayer == LinkLayer::InfiniBand && c.lid == 0 && gidIsZero(c.gid)) field("lid", c.lid);
  if (c.linkLayer == LinkLayer::Ethernet && gidIsZero(c.gid)) refuse(hocclInternalError, "a RoCE port without a GID");
  if (c.ringAddr == 0) field("ring address", c.ringAddr);
  if (c.creditAddr == 0) field("credit address", c.creditAddr);
  if (c.slots < 2 || c.slots > 64) field("slots", c.slots);
  if (c.slotBytes < 4096 || c.slotBytes % 4096 != 0 || c.slotBytes > (uint64_t{1} << 31))
    field("slot bytes", c.slotBytes);
  return c;
}

}  // namespace hoccl::transport::ibverbs
