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
//
// Lazy connections (connectPeers, not collective): step 1 for the peers a call needs, then step 3 polling for each
// peer's segment (it appears once that peer reaches the same call), with the deadline of HOCCL_TIMEOUT, the
// communicator's recorded failure and the peer's process checked while waiting; no step 4 (see shm_transport.h).
// HOCCL_MAX_CONNS may close an idle channel (both sides agree: shm_close.cc), which unmaps its segments and closes
// the files; the pair's next lazy connection makes new segments under names of their own (segmentName's connection).
#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "base/wait.h"
#include "transports/shm/shm_channel.h"
#include "transports/shm/shm_file.h"
#include "transports/shm/shm_host_level.h"
#include "transports/shm/shm_single_copy.h"
#include "transports/shm/shm_small.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {
namespace {

// Whether process `pid` holds the segment `name` and has written its header (the magic is stored last, and a fresh
// file reads as zeros).
bool segmentReady(int pid, const std::string& name, int sender, int receiver) {
  if (!sharedFileExists(pid, name)) return false;
  int fd = openSharedFile(pid, name, fmt::format("rank {} opening the segment of rank {}", receiver, sender));
  uint64_t magic = 0;
  const ssize_t n = ::pread(fd, &magic, sizeof(magic), 0);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof(magic)) && magic != 0;
}

}  // namespace

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

std::string ShmTransport::segmentName(const std::string& jobTag, int from, int to, uint64_t connection) {
  if (connection == 0) return fmt::format("{}-{}-{}", namePrefix(jobTag), from, to);
  return fmt::format("{}-{}-{}.{}", namePrefix(jobTag), from, to, connection);
}

void ShmTransport::requireSameHost(const ConnectContext& ctx, const std::vector<int>& peers) const {
  for (int p : peers)
    if (!canConnect(ctx, p))
      throwInternalError(
          fmt::format("shm: asked to connect rank {} to rank {}, which is on another host", ctx.rank, p));
}

std::map<int, std::unique_ptr<Channel>> ShmTransport::makeChannels(const ConnectContext& ctx,
                                                                   const std::vector<int>& peers,
                                                                   std::map<int, std::unique_ptr<Segment>>& out,
                                                                   std::map<int, std::unique_ptr<Segment>>& in) const {
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
  return channels;
}

std::map<int, std::unique_ptr<Channel>> ShmTransport::connect(const ConnectContext& ctx,
                                                              const std::vector<int>& peers) {
  requireSameHost(ctx, peers);

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

  auto channels = makeChannels(ctx, peers, out, in);
  HOCCL_INFO(kShm, "shm: rank {} connected to {} peer(s), {} slots of {} KiB per direction", ctx.rank, peers.size(),
             slots_, slotBytes_ / 1024);
  return channels;
}

std::map<int, std::unique_ptr<Channel>> ShmTransport::connectPeers(const ConnectContext& ctx,
                                                                   const std::vector<int>& peers) {
  requireSameHost(ctx, peers);
  std::map<int, std::unique_ptr<Segment>> out, in;
  std::map<int, uint64_t> connection;
  for (int p : peers) connection[p] = connections_[p];
  for (int p : peers)
    out[p] = Segment::create(segmentName(ctx.jobTag, ctx.rank, p, connection[p]), slotBytes_, slots_, ctx.rank, p);
  const net::Deadline deadline = net::defaultDeadline();
  auto pause = std::chrono::microseconds(20);
  size_t missing = peers.size();
  while (missing > 0) {
    bool found = false;
    for (int p : peers) {
      if (in[p]) continue;
      const std::string name = segmentName(ctx.jobTag, p, ctx.rank, connection[p]);
      const boot::RankInfo& peer = ctx.peers.at(p);
      if (!segmentReady(peer.pid, name, p, ctx.rank)) continue;
      in[p] = Segment::open(name, peer.pid, p, ctx.rank);
      --missing;
      found = true;
    }
    if (missing == 0 || found) continue;
    if (ctx.health) ctx.health->check(fmt::format("shm: rank {}", ctx.rank), "connecting to its peers");
    if (auto v = ctx.bootstrap->verdict())
      throwRemoteError(fmt::format("shm: rank {} stopped connecting to its peers: {}", ctx.rank, v->text));
    std::string who;
    for (int p : peers) {
      if (in[p]) continue;
      const boot::RankInfo& peer = ctx.peers.at(p);
      if (peer.pid != getpid() && !processAlive(peer.pid))
        throwRemoteError(fmt::format("shm: rank {} waited for the shared memory of {}, whose process has exited",
                                     ctx.rank, describePeer(peer)));
      who += " " + describePeer(peer);
    }
    if (net::Clock::now() >= deadline)
      throwTimeout(silentPeerMessage(fmt::format("shm: rank {}", ctx.rank),
                                     "connecting to its peers (lazily, HOCCL_CONNECT=lazy)", params::TIMEOUT.get(),
                                     who.substr(1)));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
  for (int p : peers) ++connections_[p];  // only once connected: a failed connect leaves the communicator broken
  auto channels = makeChannels(ctx, peers, out, in);
  HOCCL_INFO(kShm, "shm: rank {} connected lazily to {} more peer(s)", ctx.rank, peers.size());
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

std::unique_ptr<HostLevel> ShmTransport::hostLevel(const ShortcutContext& ctx, const std::vector<int>& peers,
                                                   bool reachesAll) {
  // The same answer on every rank of the host: they see the same peers and the job's parameters.
  if (reachesAll || peers.empty() || (params::CMA_MIN_BYTES.isSet() && params::CMA_MIN_BYTES.get() <= 0))
    return nullptr;
  std::vector<int> ranks = peers;
  ranks.push_back(ctx.connect->rank);
  std::sort(ranks.begin(), ranks.end());
  return std::make_unique<ShmHostLevel>(ctx, std::move(ranks));
}

}  // namespace hoccl::transport::shm
