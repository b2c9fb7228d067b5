/*
 * libFuzzer target: the bytes of the bootstrap's gather tree and of the links between roots (base/boot/wire.h), as
 * an authenticated but broken or hostile peer could send them.
 *
 * The first input byte picks what the rest is:
 *   0  a gather-tree link during exchange `seq` of `bytes` (both from the next 8 bytes, `bytes` below 64 KiB): each
 *      header is taken with treeStep exactly as GatherTree::receive does; a kTreeGaveUp's text goes through
 *      namedRanks (the report it becomes names its suspects that way);
 *   1  the first message of a sub-root's link at the head root: LinkHeader, ShareWire (linkOpeningProblem), then a
 *      share's entries (shareEntriesProblem) or a loss notice's RankInfo and text, read only as far as the checked
 *      header allows;
 *   2  a link stream after the opening, split with nextLinkMessage: from a sub-root (at the head, its share from the
 *      next 8 bytes; a kLinkFromRank carries a rank's message, split again with nextRankMessage as the head's parse
 *      does) or from the head (at a sub-root);
 *   3  a kRootPlan payload at a rank: planNeighbours, then the PlanWire's address and the neighbours' names as
 *      bootstrap.cc reads them, and the rank's place in a tree of the plan's fanout.
 * Each mode checks the parsers' promises: nothing is read beyond the bytes that arrived, a size a header announces is
 * bounded before anything is sized by it, and accepted messages are within their limits.
 */
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/tree_shape.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/socket.h"

using namespace hoccl::boot;

namespace {

// Input bytes, taken from the front.
struct Input {
  const char* data;
  size_t size;
  template <class T>
  bool take(T* out) {
    if (size < sizeof(T)) return false;
    std::memcpy(out, data, sizeof(T));
    data += sizeof(T);
    size -= sizeof(T);
    return true;
  }
  bool skip(uint64_t n) {
    if (n > size) return false;
    data += n;
    size -= n;
    return true;
  }
};

void treeLink(Input in) {
  uint32_t seq = 0, bytes = 0;
  if (!in.take(&seq) || !in.take(&bytes)) return;
  bytes %= 64 << 10;
  TreeHeader h;
  while (in.take(&h)) {
    const TreeStep step = treeStep(h, seq, bytes);
    if (step.read > std::max<uint64_t>(bytes, kMaxReportBytes)) std::abort();  // a read sized by the header
    if (step.kind == TreeStep::Data && step.read != bytes) std::abort();
    if ((step.kind == TreeStep::Bye || step.kind == TreeStep::Mismatch) && step.read != 0) std::abort();
    const char* body = in.data;
    if (!in.skip(step.read)) return;  // the link closed before the payload arrived
    if (step.kind == TreeStep::GaveUp)
      for (int r : namedRanks(std::string(body, step.read)))
        if (r < 0) std::abort();
    if (step.kind != TreeStep::Data) return;  // every other step ends the exchange
    ++seq;
  }
}

void linkOpening(Input in) {
  LinkHeader h;
  ShareWire sw;
  if (!in.take(&h) || !in.take(&sw)) return;
  if (linkOpeningProblem(h, sw, sizeof(RankInfo)) != nullptr) return;  // refused before anything is read or sized
  if (h.bytes < sizeof(sw) || h.bytes > kMaxSlotBytes) std::abort();
  if (sw.nranks < 1 || sw.nranks > kMaxRanks || sw.shareLo < 0 || sw.shareHi > sw.nranks || sw.shareLo >= sw.shareHi)
    std::abort();
  const uint64_t rest = h.bytes - sizeof(sw);
  if (rest > in.size) return;  // the head's readAll would wait, then give up
  if (h.type == kLinkShare) {
    if (shareEntriesProblem(in.data, rest, sw, sizeof(RankInfo)) != nullptr) return;
    const uint64_t entry = sizeof(JoinMessage) + sizeof(RankInfo);
    for (uint64_t at = 0; at < rest; at += entry) {
      JoinMessage j;
      RankInfo info;
      std::memcpy(&j, in.data + at, sizeof(j));
      std::memcpy(&info, in.data + at + sizeof(j), sizeof(info));
      if (j.rank < sw.shareLo || j.rank >= sw.shareHi) std::abort();
      info.rank = j.rank;
      (void)describeRank(info);
    }
  } else {
    if (h.type != kLinkLost || h.rank < sw.shareLo || h.rank >= sw.shareHi) std::abort();
    if (rest < sizeof(RankInfo) || rest - sizeof(RankInfo) > kMaxReportBytes) std::abort();
    RankInfo info;
    std::memcpy(&info, in.data, sizeof(info));
    info.rank = h.rank;
    const std::string text = describeRank(info) + std::string(in.data + sizeof(info), rest - sizeof(info));
    for (int r : namedRanks(text))
      if (r < 0) std::abort();
  }
}

void linkStream(Input in) {
  int32_t lo = 0, hi = 0;
  if (!in.take(&lo) || !in.take(&hi)) return;
  const bool fromSub = lo >= 0;
  if (!fromSub) lo = hi = -1;
  size_t used = 0;
  while (true) {
    const Frame f = nextLinkMessage(in.data + used, in.size - used, lo, hi);
    if (f.status != Frame::Whole) return;
    if (sizeof(LinkHeader) + f.bytes > in.size - used || f.bytes > kMaxSlotBytes) std::abort();
    LinkHeader h;
    std::memcpy(&h, in.data + used, sizeof(h));
    if (fromSub && (h.rank < lo || h.rank >= hi)) std::abort();
    const char* body = in.data + used + sizeof(h);
    if (fromSub && h.type == kLinkFromRank) {  // the head parses the relayed rank message
      size_t at = 0;
      while (true) {
        const Frame g = nextRankMessage(body + at, f.bytes - at);
        if (g.status != Frame::Whole) break;
        if (sizeof(RankHeader) + g.bytes > f.bytes - at) std::abort();
        if (g.type == kRankReport || g.type == kRankMismatch)
          for (int r : namedRanks(std::string(body + at + sizeof(RankHeader), g.bytes)))
            if (r < 0) std::abort();
        at += sizeof(RankHeader) + g.bytes;
      }
    }
    used += sizeof(h) + f.bytes;
  }
}

void plan(Input in) {
  const int neighbours = planNeighbours(in.size, sizeof(RankInfo));
  if (neighbours < 0) return;
  if (neighbours > 1 + kMaxFanout || sizeof(PlanWire) + neighbours * sizeof(RankInfo) != in.size) std::abort();
  PlanWire p;
  std::memcpy(&p, in.data, sizeof(p));
  hoccl::net::Address parent;
  parent.length = std::min<socklen_t>(p.parentAddr.length, sizeof(p.parentAddr.bytes));
  std::memcpy(&parent.storage, p.parentAddr.bytes, parent.length);
  (void)parent.toString();
  std::vector<RankInfo> known(neighbours);
  if (neighbours > 0) std::memcpy(known.data(), in.data + sizeof(p), neighbours * sizeof(RankInfo));
  for (const RankInfo& info : known) (void)describeRank(info);
  // The rank computes its own place with the plan's fanout (bootstrap.cc: at least 1); a small job keeps it quick.
  const int n = 1 + static_cast<int>(static_cast<uint32_t>(p.parent) % 300);
  const TreePlace place = treePlace(n, n - 1, std::max(1, p.fanout));
  if (place.range.lo != n - 1) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  Input in{reinterpret_cast<const char*>(bytes) + 1, size - 1};
  switch (bytes[0] % 4) {
    case 0: treeLink(in); break;
    case 1: linkOpening(in); break;
    case 2: linkStream(in); break;
    default: plan(in); break;
  }
  return 0;
}
