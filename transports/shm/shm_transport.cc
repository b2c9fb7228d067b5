// The shm transport: which peers it reaches and how the segments of a communicator are set up.
//
// Connect protocol (collective over the communicator, every rank runs it even with no shm peer):
//   1. create and map one segment per peer for the direction this rank -> peer: an anonymous shared file
//      (shm_file.h, memfd) named after the job tag and the two ranks;
//   2. all-gather a status: if any rank failed, every rank throws with that rank's message;
//   3. open (through /proc/<peer pid>/fd) and map the segment peer -> this rank of every peer;
//   4. all-gather a status again; now every segment is mapped on both sides, so each creator closes its files
//      (nobody can open them any more; the mappings stay).
// Nothing is ever named in /dev/shm, so a job killed at any point (of init or later) leaves nothing behind: the
// kernel frees a segment with the last process that maps or holds it.
#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "transports/shm/shm_channel.h"
#include "transports/shm/shm_single_copy.h"
#include "transports/shm/shm_small.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {

ShmTransport::ShmTransport() {
  int64_t slotBytes = params::SHM_SLOT_SIZE.get();
  slotBytes_ = static_cast<uint32_t>((slotBytes + 4095) / 4096 * 4096);
  slots_ = static_cast<uint32_t>(params::SHM_SLOTS.get());
}

bool ShmTransport::canConnect(const ConnectContext& ctx, int peer) const {
  return peer != ctx.rank && ctx.peers.at(peer).hostHash == ctx.peers.at(ctx.rank).hostHash;
}

std::string ShmTransport::namePrefix(const std::string& jobTag) {
  std::string tag;
  for (char c : jobTag) tag += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  if (tag.size() > 160) tag = fmt::format("{:016x}", fnv1a(jobTag));
  return "/hoccl-" + tag;
}

std::string ShmTransport::segmentName(const std::string& jobTag, int from, int to) {
  return fmt::format("{}-{}-{}", namePrefix(jobTag), from, to);
}

std::map<int, std::unique_ptr<Channel>> ShmTransport::connect(const ConnectContext& ctx,
                                                              const std::vector<int>& peers) {
  for (int p : peers)
    if (!canConnect(ctx, p))
      throwInternalError(
          fmt::format("shm: asked to connect rank {} to rank {}, which is on another host", ctx.rank, p));

  std::map<int, std::unique_ptr<Segment>> out, in;
  try {
    for (int p : peers) out[p] = Segment::create(segmentName(ctx.jobTag, ctx.rank, p), slotBytes_, slots_, ctx.rank, p);
    agreeOnPhase(ctx, "creating its shared-memory segments", nullptr);
  } catch (const Error& e) {
    out.clear();
    if (e.code() == hocclRemoteError || e.code() == hocclTimeout) throw;
    agreeOnPhase(ctx, "creating its shared-memory segments", &e);
  }
  try {
    for (int p : peers) {
      in[p] = Segment::open(segmentName(ctx.jobTag, p, ctx.rank), ctx.peers.at(p).pid, p, ctx.rank);
    }
    agreeOnPhase(ctx, "mapping its peers' shared-memory segments", nullptr);
  } catch (const Error& e) {
    if (e.code() == hocclRemoteError || e.code() == hocclTimeout) throw;
    agreeOnPhase(ctx, "mapping its peers' shared-memory segments", &e);
  }
  // Every rank has mapped everything it needs: the creators let go of their files.
  for (auto& [p, seg] : out) seg->unlink();

  std::map<int, std::unique_ptr<Channel>> channels;
  const boot::RankInfo& self = ctx.peers.at(ctx.rank);
  for (int p : peers) {
    const boot::RankInfo& peer = ctx.peers.at(p);
    bool checkPid = peer.pid != self.pid;
    if (checkPid && !processAlive(peer.pid)) {  // the peer's process is out of sight: cannot watch
      HOCCL_WARN(kShm,
                 "shm: rank {} cannot see the process of {}; a dead peer will only be noticed by the timeout "
                 "(HOCCL_TIMEOUT)",
                 ctx.rank, describePeer(peer));
      checkPid = false;
    }
    channels[p] = std::make_unique<ShmChannel>(self, peer, checkPid, std::move(out[p]), std::move(in[p]));
  }
  HOCCL_INFO(kShm, "shm: rank {} connected to {} peer(s), {} slots of {} KiB per direction", ctx.rank, peers.size(),
             slots_, slotBytes_ / 1024);
  return channels;
}

std::vector<std::unique_ptr<Shortcut>> ShmTransport::shortcuts(const ShortcutContext& ctx, bool reachesAll) {
  std::vector<std::unique_ptr<Shortcut>> out;
  const int64_t smallMax = params::SMALL_MAX_BYTES.get();
  // The same answer on every rank: all of them share this host, and the parameters are the job's.
  if (!reachesAll || ctx.connect->nranks < 2 || smallMax <= 0) return out;
  const bool singleCopyWanted = params::CMA_MIN_BYTES.get() > 0;
  auto session = std::make_shared<ArenaSession>(Arena::connect(*ctx.connect, static_cast<size_t>(smallMax),
                                                               singleCopyWanted),
                                                ctx);
  out.push_back(std::make_unique<SmallShortcut>(session));
  if (session->arena().crossMemory()) out.push_back(std::make_unique<SingleCopyShortcut>(session));
  return out;
}

}  // namespace hoccl::transport::shm
