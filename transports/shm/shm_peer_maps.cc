// The cache of the peers' mapped shared memory (see shm_peer_maps.h).
#include "transports/shm/shm_peer_maps.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "base/error.h"
#include "kernels/shared_mem.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {

SharedDesc describeShared(const kernels::Registrations* regs, const void* ptr, size_t bytes) {
  SharedDesc d;
  kernels::SharedRef ref;
  if (!ptr || !regs || !regs->covers(ptr, bytes) || !kernels::findShared(ptr, bytes, &ref)) return d;
  d.fd = ref.fd;
  d.inode = ref.inode;
  d.fileBytes = ref.fileBytes;
  d.offset = ref.offset;
  return d;
}

PeerMaps::~PeerMaps() { releaseAll(); }

void PeerMaps::releaseAll() {
  for (auto& maps : byPeer_) {
    for (Mapping& m : maps) kernels::unmapPeerShared(m.base, m.bytes);
    maps.clear();
  }
}

size_t PeerMaps::held() const {
  size_t n = 0;
  for (const auto& maps : byPeer_) n += maps.size();
  return n;
}

char* PeerMaps::map(int peer, const SharedDesc& desc, uint64_t published, size_t bytes, const std::string& who) {
  const boot::RankInfo& info = ctx_.peers.at(static_cast<size_t>(peer));
  if (desc.offset > desc.fileBytes || bytes > desc.fileBytes - desc.offset)
    throwInvalidUsage(
        fmt::format("{}: {} published a shared buffer of {} bytes at offset {} of a {}-byte block, but "
                    "this call needs {} bytes of it; nothing was touched",
                    who, describePeer(info), bytes, desc.offset, desc.fileBytes, bytes));
  if (info.pid == getpid()) return reinterpret_cast<char*>(published);  // a thread of this process
  auto& maps = byPeer_[static_cast<size_t>(peer)];
  ++uses_;
  for (auto it = maps.begin(); it != maps.end(); ++it) {
    if (it->fd != desc.fd) continue;
    if (it->inode == desc.inode && it->bytes == desc.fileBytes) {
      it->lastUse = uses_;
      return static_cast<char*>(it->base) + desc.offset;
    }
    kernels::unmapPeerShared(it->base,
                             it->bytes);  // the descriptor number holds another file now: the old block was freed
    maps.erase(it);
    break;
  }
  if (maps.size() >= kMaxMapsPerPeer) {
    auto lru = std::min_element(maps.begin(), maps.end(),
                                [](const Mapping& a, const Mapping& b) { return a.lastUse < b.lastUse; });
    kernels::unmapPeerShared(lru->base, lru->bytes);
    maps.erase(lru);
  }
  const kernels::SharedRef ref{desc.fd, desc.inode, desc.fileBytes, desc.offset};
  std::string why;
  int err = 0;
  void* base = kernels::mapPeerShared(info.pid, ref, &why, &err);
  if (!base)
    throwSystemError(fmt::format("{}: cannot map the shared buffer of {}: {}. Did that rank free its hocclMemAlloc "
                                 "memory while registered, or is its process out of sight (separate pid "
                                 "namespaces)?",
                                 who, describePeer(info), why),
                     err);
  maps.push_back(Mapping{desc.fd, desc.inode, base, desc.fileBytes, uses_});
  return static_cast<char*>(base) + desc.offset;
}

}  // namespace hoccl::transport::shm
