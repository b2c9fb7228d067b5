/// @file config.cc
/// ncclConfig_t by size and version. The struct has only grown at its end since NCCL 2.14, so a caller's config is
/// a prefix of ours: copy the bytes the caller says it has, then forget the fields its version did not know yet.
#include "shim/config.h"

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "shim/nccl_abi.h"

namespace hoccl::shim {
namespace {

constexpr size_t kHeaderBytes = offsetof(ncclConfig_t, blocking);

// The same "undefined" everywhere, from the one initializer of hoccl.h.
const ncclConfig_t& undefinedConfig() {
  static const ncclConfig_t cfg = [] {
    const hocclConfig_t h = HOCCL_CONFIG_INITIALIZER;
    ncclConfig_t n;
    std::memcpy(&n, &h, sizeof n);
    n.size = sizeof(ncclConfig_t);
    n.version = HOCCL_NCCL_VERSION_CODE;
    return n;
  }();
  return cfg;
}

// Fields that the caller's version predates keep their "undefined" value (NCCL's rules: blocking from 2.14; CGA,
// CTA counts and netName from 2.17; trafficClass from 2.25; collnet, CTA policy, shrinkShare and nvlsCTAs from
// 2.27; channels per net peer and NVLink-centric scheduling from 2.28).
void forgetNewerFields(ncclConfig_t& c) {
  const ncclConfig_t& u = undefinedConfig();
  const unsigned v = c.version;
  if (v < HOCCL_NCCL_VERSION(2, 14, 0)) c.blocking = u.blocking;
  if (v < HOCCL_NCCL_VERSION(2, 17, 0)) {
    c.cgaClusterSize = u.cgaClusterSize;
    c.minCTAs = u.minCTAs;
    c.maxCTAs = u.maxCTAs;
    c.netName = u.netName;
  }
  if (v < HOCCL_NCCL_VERSION(2, 25, 0)) c.trafficClass = u.trafficClass;
  if (v < HOCCL_NCCL_VERSION(2, 27, 0)) {
    c.collnetEnable = u.collnetEnable;
    c.CTAPolicy = u.CTAPolicy;
    c.shrinkShare = u.shrinkShare;
    c.nvlsCTAs = u.nvlsCTAs;
  }
  if (v < HOCCL_NCCL_VERSION(2, 28, 0)) {
    c.nChannelsPerNetPeer = u.nChannelsPerNetPeer;
    c.nvlinkCentricSched = u.nvlinkCentricSched;
  }
}

}  // namespace

hocclConfig_t translateConfig(const void* user) {
  ncclConfig_t c = undefinedConfig();
  if (user) {
    // The header (size, magic, version) exists in every ncclConfig_t since 2.14; read it before trusting size.
    ncclConfig_t head;
    std::memcpy(&head, user, kHeaderBytes);
    if (head.magic != HOCCL_NCCL_CONFIG_MAGIC) {
      throw Error(hocclInvalidArgument,
                  fmt::format("ncclConfig_t has magic {:#x} instead of {:#x}: it was not set up with "
                              "NCCL_CONFIG_INITIALIZER. Write `ncclConfig_t config = NCCL_CONFIG_INITIALIZER;` "
                              "before setting its fields.",
                              head.magic, HOCCL_NCCL_CONFIG_MAGIC));
    }
    if (head.size < kHeaderBytes) {
      throw Error(hocclInvalidArgument,
                  fmt::format("ncclConfig_t.size is {} bytes, smaller than its {}-byte header: the config is "
                              "corrupt. Set it up with NCCL_CONFIG_INITIALIZER.",
                              head.size, kHeaderBytes));
    }
    std::memcpy(&c, user, head.size < sizeof c ? head.size : sizeof c);
    c.size = sizeof c;
    forgetNewerFields(c);
  }
  if (c.blocking != HOCCL_NCCL_CONFIG_UNDEF_INT && c.blocking != 0 && c.blocking != 1) {
    throw Error(hocclInvalidArgument,
                fmt::format("ncclConfig_t.blocking is {}; it must be 0 (non-blocking), 1 (blocking) or left "
                            "undefined.",
                            c.blocking));
  }
  hocclConfig_t out;
  static_assert(sizeof out == sizeof c, "hocclConfig_t and ncclConfig_t share one layout");
  std::memcpy(&out, &c, sizeof out);
  out.magic = HOCCL_CONFIG_MAGIC;
  out.version = HOCCL_VERSION_CODE;
  return out;
}

}  // namespace hoccl::shim
