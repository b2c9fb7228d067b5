// The cache of the peers' mapped shared memory (see shm_peer_maps.h).
#include "transports/shm/shm_peer_maps.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "base/error.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {

PeerMaps::~PeerMaps() { releaseAll(); }

void PeerMaps::releaseAll() {
  for (auto& maps : byPeer_) {
    for (Mapping& m : maps) munmap(m.base, m.bytes);
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
    munmap(it->base, it->bytes);  // the descriptor number holds another file now: the old block was freed
    maps.erase(it);
    break;
  }
  if (maps.size() >= kMaxMapsPerPeer) {
    auto lru = std::min_element(maps.begin(), maps.end(),
                                [](const Mapping& a, const Mapping& b) { return a.lastUse < b.lastUse; });
    munmap(lru->base, lru->bytes);
    maps.erase(lru);
  }
  const std::string path = fmt::format("/proc/{}/fd/{}", info.pid, desc.fd);
  auto fail = [&](const std::string& why, int err) {
    throwSystemError(fmt::format("{}: cannot map the shared buffer of {} ({}): {}. Did that rank free its "
                                 "hocclMemAlloc memory while registered, or is its process out of sight "
                                 "(separate pid namespaces)?",
                                 who, describePeer(info), path, why),
                     err);
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("cannot open it", errno);
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != desc.inode ||
      static_cast<uint64_t>(st.st_size) != desc.fileBytes || seals < 0 || !(seals & F_SEAL_SHRINK)) {
    const int err = errno;
    close(fd);
    fail(fmt::format("it is not the sealed block of {} bytes (inode {}) that the peer published", desc.fileBytes,
                     desc.inode),
         err ? err : EINVAL);
  }
  void* base = mmap(nullptr, desc.fileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) fail("mmap failed", err);
  maps.push_back(Mapping{desc.fd, desc.inode, base, desc.fileBytes, uses_});
  return static_cast<char*>(base) + desc.offset;
}

}  // namespace hoccl::transport::shm
