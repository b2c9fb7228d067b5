/// @file abi_config_translate.cc
/// The shim's config reader (src/shim/config.cc) fed with configs built by NVIDIA's own nccl.h: the initializer,
/// every field set, the version rules (fields newer than the caller's version are forgotten), an old short layout
/// followed by garbage, and the rejected cases.
#include <nccl.h>

#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "shim/config.h"

namespace {

int failures = 0, passes = 0;

void check(bool ok, const char* what) {
  if (ok) {
    ++passes;
  } else {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what);
  }
}

ncclConfig_t everyFieldSet(unsigned version) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.version = version;
  c.blocking = 0;
  c.cgaClusterSize = 2;
  c.minCTAs = 3;
  c.maxCTAs = 4;
  c.netName = "tcp";
  c.splitShare = 1;
  c.trafficClass = 5;
  c.commName = "named";
  c.collnetEnable = 1;
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  c.shrinkShare = 1;
  c.nvlsCTAs = 6;
  c.nChannelsPerNetPeer = 7;
  c.nvlinkCentricSched = 1;
  c.graphUsageMode = 8;
  c.numRmaCtx = 9;
  c.maxP2pPeers = 10;
  c.graphStreamOrdering = 11;
  c.launchOrderImplicit = 12;
  c.numRmaSig = 13;
  c.rmaEagerInit = 14;
  c.hostCftMode = ncclHostCftEnable;
  c.nvlsHostMode = ncclNvlsHostModeDisable;
  return c;
}

void initializerGivesUndefined() {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  const hocclConfig_t h = hoccl::shim::translateConfig(&c);
  check(h.magic == HOCCL_CONFIG_MAGIC && h.size == sizeof(hocclConfig_t), "initializer: header");
  check(h.blocking == INT_MIN && h.netName == nullptr && h.commName == nullptr && h.nvlinkCentricSched == INT_MIN,
        "initializer: all undefined");
  const hocclConfig_t d = hoccl::shim::translateConfig(nullptr);
  check(d.blocking == INT_MIN && d.magic == HOCCL_CONFIG_MAGIC, "null config: defaults");
}

void currentVersionKeepsEverything() {
  const ncclConfig_t c = everyFieldSet(NCCL_VERSION_CODE);
  const hocclConfig_t h = hoccl::shim::translateConfig(&c);
  check(h.blocking == 0 && h.cgaClusterSize == 2 && h.minCTAs == 3 && h.maxCTAs == 4, "2.32: CTA fields");
  check(h.netName && std::strcmp(h.netName, "tcp") == 0 && h.commName && std::strcmp(h.commName, "named") == 0,
        "2.32: names");
  check(h.splitShare == 1 && h.trafficClass == 5 && h.collnetEnable == 1 && h.CTAPolicy == 1 && h.shrinkShare == 1 &&
            h.nvlsCTAs == 6 && h.nChannelsPerNetPeer == 7 && h.nvlinkCentricSched == 1,
        "2.32: every other field of 2.28");
}

void newestFieldsByVersion() {
  ncclConfig_t c = everyFieldSet(NCCL_VERSION_CODE);
  ncclConfig_t r = hoccl::shim::readConfig(&c);
  check(r.graphUsageMode == 8 && r.numRmaCtx == 9 && r.maxP2pPeers == 10 && r.graphStreamOrdering == 11 &&
            r.launchOrderImplicit == 12 && r.numRmaSig == 13 && r.rmaEagerInit == 14 &&
            r.hostCftMode == ncclHostCftEnable && r.nvlsHostMode == ncclNvlsHostModeDisable,
        "2.32: the fields of 2.29-2.31 read");
  c = everyFieldSet(NCCL_VERSION(2, 30, 7));
  r = hoccl::shim::readConfig(&c);
  check(r.maxP2pPeers == 10 && r.launchOrderImplicit == 12 && r.numRmaSig == INT_MIN && r.rmaEagerInit == INT_MIN &&
            r.hostCftMode == INT_MIN && r.nvlsHostMode == INT_MIN,
        "2.30: 2.30 fields kept, 2.31 fields forgotten");
  c = everyFieldSet(NCCL_VERSION(2, 28, 9));
  r = hoccl::shim::readConfig(&c);
  check(r.nvlinkCentricSched == 1 && r.graphUsageMode == INT_MIN && r.numRmaCtx == INT_MIN && r.maxP2pPeers == INT_MIN,
        "2.28: 2.29 and 2.30 fields forgotten");
  // A 2.28-size config (the layout the CUDA toolkit's nccl.h has) followed by garbage.
  unsigned char raw[sizeof(ncclConfig_t)];
  std::memset(raw, 0x5A, sizeof raw);
  c = everyFieldSet(NCCL_VERSION(2, 28, 9));
  c.size = offsetof(ncclConfig_t, graphUsageMode);
  std::memcpy(raw, &c, c.size);
  r = hoccl::shim::readConfig(raw);
  check(r.nvlinkCentricSched == 1 && r.graphUsageMode == INT_MIN && r.nvlsHostMode == INT_MIN,
        "2.28 size: bytes past size ignored");
}

void olderVersionsForgetNewerFields() {
  ncclConfig_t c = everyFieldSet(NCCL_VERSION(2, 27, 0));
  hocclConfig_t h = hoccl::shim::translateConfig(&c);
  check(h.nvlsCTAs == 6 && h.nChannelsPerNetPeer == INT_MIN && h.nvlinkCentricSched == INT_MIN,
        "2.27: 2.28 fields forgotten");
  c = everyFieldSet(NCCL_VERSION(2, 24, 0));
  h = hoccl::shim::translateConfig(&c);
  check(h.trafficClass == INT_MIN && h.collnetEnable == INT_MIN && h.splitShare == 1 && h.commName != nullptr,
        "2.24: trafficClass and 2.27 fields forgotten, splitShare and commName kept");
  c = everyFieldSet(NCCL_VERSION(2, 16, 0));
  h = hoccl::shim::translateConfig(&c);
  check(h.blocking == 0 && h.netName == nullptr && h.minCTAs == INT_MIN && h.cgaClusterSize == INT_MIN,
        "2.16: blocking kept, 2.17 fields forgotten");
  c = everyFieldSet(NCCL_VERSION(2, 13, 0));
  h = hoccl::shim::translateConfig(&c);
  check(h.blocking == INT_MIN, "2.13: blocking forgotten");
}

void shortLayoutIgnoresWhatFollows() {
  // A 2.17 config (40 bytes) followed by bytes that would be wild pointers and bad values if read as 2.28 fields.
  unsigned char raw[sizeof(ncclConfig_t)];
  std::memset(raw, 0xA5, sizeof raw);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.size = 40;
  c.version = NCCL_VERSION(2, 17, 0);
  c.blocking = 1;
  c.netName = "tcp";
  std::memcpy(raw, &c, 40);
  const hocclConfig_t h = hoccl::shim::translateConfig(raw);
  check(h.blocking == 1 && h.netName && std::strcmp(h.netName, "tcp") == 0, "2.17 size: its own fields kept");
  check(h.splitShare == INT_MIN && h.commName == nullptr && h.trafficClass == INT_MIN &&
            h.nvlinkCentricSched == INT_MIN,
        "2.17 size: bytes past size ignored");
}

void rejected() {
  auto rejects = [](ncclConfig_t c, const char* needle) {
    try {
      hoccl::shim::translateConfig(&c);
    } catch (const hoccl::Error& e) {
      return e.code() == hocclInvalidArgument && std::strstr(e.what(), needle) != nullptr;
    }
    return false;
  };
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.magic = 0;
  check(rejects(c, "NCCL_CONFIG_INITIALIZER"), "wrong magic rejected with a hint");
  c = NCCL_CONFIG_INITIALIZER;
  c.size = 4;
  check(rejects(c, "header"), "size below the header rejected");
  c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 2;
  check(rejects(c, "blocking"), "blocking = 2 rejected");
}

}  // namespace

int main() {
  initializerGivesUndefined();
  currentVersionKeepsEverything();
  newestFieldsByVersion();
  olderVersionsForgetNewerFields();
  shortLayoutIgnoresWhatFollows();
  rejected();
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
