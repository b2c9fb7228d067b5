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

// A config with every field "undefined" (NCCL_CONFIG_INITIALIZER of the current layout).
const ncclConfig_t& undefinedConfig() {
  static const ncclConfig_t cfg = [] {
    ncclConfig_t n;
    std::memset(&n, 0, sizeof n);
    n.size = sizeof(ncclConfig_t);
    n.magic = HOCCL_NCCL_CONFIG_MAGIC;
    n.version = HOCCL_NCCL_VERSION_CODE;
    int* const ints[] = {&n.blocking,
                         &n.cgaClusterSize,
                         &n.minCTAs,
                         &n.maxCTAs,
                         &n.splitShare,
                         &n.trafficClass,
                         &n.collnetEnable,
                         &n.CTAPolicy,
                         &n.shrinkShare,
                         &n.nvlsCTAs,
                         &n.nChannelsPerNetPeer,
                         &n.nvlinkCentricSched,
                         &n.graphUsageMode,
                         &n.numRmaCtx,
                         &n.maxP2pPeers,
                         &n.graphStreamOrdering,
                         &n.launchOrderImplicit,
                         &n.numRmaSig,
                         &n.rmaEagerInit,
                         &n.hostCftMode,
                         &n.nvlsHostMode};
    for (int* f : ints) *f = HOCCL_NCCL_CONFIG_UNDEF_INT;
    n.netName = nullptr;
    n.commName = nullptr;
    return n;
  }();
  return cfg;
}

// Fields that the caller's version predates keep their "undefined" value (NCCL's rules: blocking from 2.14; CGA,
// CTA counts and netName from 2.17; trafficClass from 2.25; collnet, CTA policy, shrinkShare and nvlsCTAs from
// 2.27; channels per net peer and NVLink-centric scheduling from 2.28; graph usage and RMA contexts from 2.29; P2P
// peers, graph stream ordering and implicit launch order from 2.30; RMA signals, eager RMA init, host CFT and host
// NVLS modes from 2.31).
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
  if (v < HOCCL_NCCL_VERSION(2, 29, 0)) {
    c.graphUsageMode = u.graphUsageMode;
    c.numRmaCtx = u.numRmaCtx;
  }
  if (v < HOCCL_NCCL_VERSION(2, 30, 0)) {
    c.maxP2pPeers = u.maxP2pPeers;
    c.graphStreamOrdering = u.graphStreamOrdering;
    c.launchOrderImplicit = u.launchOrderImplicit;
  }
  if (v < HOCCL_NCCL_VERSION(2, 31, 0)) {
    c.numRmaSig = u.numRmaSig;
    c.rmaEagerInit = u.rmaEagerInit;
    c.hostCftMode = u.hostCftMode;
    c.nvlsHostMode = u.nvlsHostMode;
  }
}

}  // namespace

ncclConfig_t readConfig(const void* user) {
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
  return c;
}

hocclConfig_t translateConfig(const void* user) {
  const ncclConfig_t c = readConfig(user);
  // hocclConfig_t has the fields of ncclConfig_t 2.28, in the same order; the newer ones have no hoccl meaning.
  hocclConfig_t out = HOCCL_CONFIG_INITIALIZER;
  out.blocking = c.blocking;
  out.cgaClusterSize = c.cgaClusterSize;
  out.minCTAs = c.minCTAs;
  out.maxCTAs = c.maxCTAs;
  out.netName = c.netName;
  out.splitShare = c.splitShare;
  out.trafficClass = c.trafficClass;
  out.commName = c.commName;
  out.collnetEnable = c.collnetEnable;
  out.CTAPolicy = c.CTAPolicy;
  out.shrinkShare = c.shrinkShare;
  out.nvlsCTAs = c.nvlsCTAs;
  out.nChannelsPerNetPeer = c.nChannelsPerNetPeer;
  out.nvlinkCentricSched = c.nvlinkCentricSched;
  return out;
}

}  // namespace hoccl::shim
