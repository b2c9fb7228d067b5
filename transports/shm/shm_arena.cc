// The small-message arena: creation by rank 0, mapping by the others, unlinking (see shm_arena.h).
#include "transports/shm/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>
#include <new>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "transports/shm/shm_file.h"
#include "transports/shm/shm_transport.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {
namespace {

constexpr uint64_t kArenaMagic = 0x616e657261636f68ULL;  // "hocarena" in little-endian bytes
constexpr size_t kPage = 4096;

/// The first page of the segment.
struct ArenaHeader {
  uint64_t magic;
  uint64_t nranks;
  uint64_t maxBytes;
  uint64_t regionBytes;
};

/// What a rank leaves in its first line at connect so that the others can test reading its memory.
struct CrossMemoryProbe {
  int64_t pid;
  uint64_t address;  // of gProbeWord in that process
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the piece counter works across processes");

const volatile uint64_t gProbeWord = kArenaMagic;

// Reads peer's probe word through process_vm_readv.
bool canReadPeer(const CrossMemoryProbe& peer) {
  uint64_t word = 0;
  iovec local{&word, sizeof(word)};
  iovec remote{reinterpret_cast<void*>(peer.address), sizeof(word)};
  return process_vm_readv(static_cast<pid_t>(peer.pid), &local, 1, &remote, 1, 0) == sizeof(word) &&
         word == kArenaMagic;
}

// Ranks are siblings, not each other's ancestors: under Yama's ptrace_scope=1 (Ubuntu's default) they could not
// read each other's memory unless each names who may attach.
void allowSiblingsToAttach() {
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (yama >> scope && scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0)
    HOCCL_INFO(kShm,
               "shm: Yama ptrace_scope=1: this process allows processes of its user to read its memory (single "
               "copy between ranks); set HOCCL_CMA_MIN_BYTES=0 to keep the default protection");
}

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Maps the arena's shared file (shm_file.h) of `bytes` bytes (0: take the size of the file).
void* mapFile(int fd, const std::string& name, size_t& bytes) {
  struct stat st {};
  int err = 0;
  if (bytes == 0 && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kPage)) err = errno ? errno : EINVAL;
  if (bytes == 0) bytes = static_cast<size_t>(st.st_size);
  void* base = err ? MAP_FAILED : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (!err && base == MAP_FAILED) err = errno;
  if (err)
    throwSystemError(
        fmt::format("shm: cannot size or map the small-message arena {} ({} bytes); check free memory "
                    "(free -h, the cgroup's memory limit), or set HOCCL_SMALL_MAX_BYTES=0 to go without it",
                    name, bytes),
        err);
  return base;
}

// Closes a descriptor on scope exit.
struct FileGuard {
  int fd = -1;
  ~FileGuard() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

Arena::Arena(std::string name, void* base, size_t bytes, size_t maxBytes, size_t regionBytes)
    : name_(std::move(name)), base_(base), bytes_(bytes), maxBytes_(maxBytes), regionBytes_(regionBytes),
      regions_(static_cast<char*>(base) + kPage) {}

Arena::~Arena() {
  munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

std::unique_ptr<Arena> Arena::openGroup(const ConnectContext& group, const std::string& name, size_t maxBytes) {
  const size_t regionBytes = roundUp(sizeof(Region) + kArenaSlots * roundUp(maxBytes, 64), kPage);
  size_t bytes = kPage + regionBytes * static_cast<size_t>(group.nranks);
  if (group.rank == 0) {
    FileGuard file;
    file.fd = createSharedFile(name, bytes,
                               "check free memory (free -h, the cgroup's memory limit), or set HOCCL_CMA_MIN_BYTES=0 "
                               "to go without the host level on mapped memory");
    void* base = mapFile(file.fd, name, bytes);
    auto* h = new (base) ArenaHeader{0, static_cast<uint64_t>(group.nranks), maxBytes, regionBytes};
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = kArenaMagic;
    std::unique_ptr<Arena> arena(new Arena(name, base, bytes, maxBytes, regionBytes));
    arena->fd_ = file.fd;
    file.fd = -1;
    return arena;
  }
  const boot::RankInfo& creator = group.peers.at(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(params::TIMEOUT.get());
  auto pause = std::chrono::microseconds(20);
  const std::string who = fmt::format("shm: rank {}", group.peers.at(group.rank).rank);
  while (true) {
    if (sharedFileExists(creator.pid, name)) {
      FileGuard file;
      file.fd = openSharedFile(creator.pid, name, who + " mapping its host's arena");
      uint64_t magic = 0;
      if (::pread(file.fd, &magic, sizeof(magic), 0) == static_cast<ssize_t>(sizeof(magic)) && magic == kArenaMagic) {
        size_t have = 0;
        void* base = mapFile(file.fd, name, have);
        const auto* h = static_cast<const ArenaHeader*>(base);
        if (h->nranks != static_cast<uint64_t>(group.nranks) || h->maxBytes != maxBytes ||
            h->regionBytes != regionBytes || have < bytes) {
          const uint64_t theirs = h->nranks;
          munmap(base, have);
          throwInternalError(
              fmt::format("{}: the host arena {} has {} ranks, this rank expects {} (do all ranks of "
                          "the host see the same host identity, HOCCL_HOSTID?)",
                          who, name, theirs, group.nranks));
        }
        return std::unique_ptr<Arena>(new Arena(name, base, have, maxBytes, regionBytes));
      }
    }
    if (group.health) group.health->check(who, "waiting for its host's arena");
    if (!processAlive(creator.pid))
      throwRemoteError(
          fmt::format("{} waited for the host arena of {}, whose process has exited", who, describePeer(creator)));
    if (std::chrono::steady_clock::now() >= deadline)
      throwTimeout(
          silentPeerMessage(who, "waiting for its host's arena", params::TIMEOUT.get(), describePeer(creator)));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

std::unique_ptr<Arena> Arena::connect(const ConnectContext& ctx, size_t maxBytes, bool crossMemory) {
  const std::string name = ShmTransport::namePrefix(ctx.jobTag) + "-arena";
  const size_t regionBytes = roundUp(sizeof(Region) + kArenaSlots * roundUp(maxBytes, 64), kPage);
  size_t bytes = kPage + regionBytes * static_cast<size_t>(ctx.nranks);
  void* base = nullptr;
  // Phase 1: rank 0 creates and initialises (a fresh file is all zeros: every sequence number starts at 0). It
  // holds the file open until every rank has mapped it (phase 2), then lets go: from then on the arena lives only in
  // the mappings, and a job killed at any point leaves nothing behind (nothing is ever named in /dev/shm).
  FileGuard file;
  try {
    if (ctx.rank == 0) {
      file.fd =
          createSharedFile(name, bytes,
                           "check free memory (free -h, the cgroup's memory limit), or set HOCCL_SMALL_MAX_BYTES=0 "
                           "to go without the small-message arena");
      base = mapFile(file.fd, name, bytes);
      auto* h = new (base) ArenaHeader{0, static_cast<uint64_t>(ctx.nranks), maxBytes, regionBytes};
      std::atomic_thread_fence(std::memory_order_release);
      h->magic = kArenaMagic;
    }
    agreeOnPhase(ctx, "creating the small-message arena", nullptr);
  } catch (const Error& e) {
    if (base) munmap(base, bytes);
    if (e.code() == hocclRemoteError || e.code() == hocclTimeout) throw;
    agreeOnPhase(ctx, "creating the small-message arena", &e);
  }
  std::unique_ptr<Arena> arena;
  // Phase 2: the others open it through rank 0's /proc/<pid>/fd, map it and check the geometry.
  try {
    if (ctx.rank != 0) {
      FileGuard peerFile;
      peerFile.fd = openSharedFile(ctx.peers.at(0).pid, name,
                                   fmt::format("rank {} mapping the small-message arena", ctx.rank));
      bytes = 0;
      base = mapFile(peerFile.fd, name, bytes);
      const auto* h = static_cast<const ArenaHeader*>(base);
      if (h->magic != kArenaMagic || h->nranks != static_cast<uint64_t>(ctx.nranks) || h->maxBytes != maxBytes ||
          h->regionBytes != regionBytes || bytes < kPage + regionBytes * static_cast<size_t>(ctx.nranks)) {
        munmap(base, bytes);
        throwInternalError(
            fmt::format("shm: the small-message arena {} has another geometry ({} ranks, {} bytes) "
                        "than this rank expects ({} ranks, {} bytes): do all ranks set the same "
                        "HOCCL_SMALL_MAX_BYTES?",
                        name, h->nranks, h->maxBytes, ctx.nranks, maxBytes));
      }
    }
    arena.reset(new Arena(name, base, bytes, maxBytes, regionBytes));
    if (crossMemory) allowSiblingsToAttach();
    CrossMemoryProbe probe{getpid(), reinterpret_cast<uint64_t>(&gProbeWord)};
    std::memcpy(arena->line(ctx.rank, 0).inlineData, &probe, sizeof(probe));
    agreeOnPhase(ctx, "mapping the small-message arena", nullptr);
  } catch (const Error& e) {
    if (e.code() == hocclRemoteError || e.code() == hocclTimeout) throw;
    agreeOnPhase(ctx, "mapping the small-message arena", &e);
  }
  if (file.fd >= 0) {
    close(file.fd);
    file.fd = -1;
  }
  // Phase 3: may every rank read every other rank's memory? (ptrace rules, containers, seccomp.) One answer for all.
  std::vector<uint8_t> readable(ctx.nranks, crossMemory ? 1 : 0);
  for (int r = 0; r < ctx.nranks; ++r) {
    CrossMemoryProbe peer{};
    std::memcpy(&peer, arena->line(r, 0).inlineData, sizeof(peer));
    if (crossMemory && r != ctx.rank && !canReadPeer(peer)) readable[ctx.rank] = 0;
  }
  ctx.bootstrap->allGather(readable.data(), 1);
  arena->crossMemory_ = std::all_of(readable.begin(), readable.end(), [](uint8_t ok) { return ok != 0; });
  HOCCL_INFO(kShm,
             "shm: rank {} mapped the small-message arena ({} ranks, {} slots of {} bytes); single copy between "
             "processes {}",
             ctx.rank, ctx.nranks, kArenaSlots, maxBytes, arena->crossMemory_ ? "allowed" : "not allowed");
  return arena;
}

}  // namespace hoccl::transport::shm
