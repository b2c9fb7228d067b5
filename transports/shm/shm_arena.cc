// The small-message arena: creation by rank 0, mapping by the others, unlinking (see shm_arena.h).
#include "transports/shm/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>
#include <new>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
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

// Opens (rank 0: creates) and maps the named segment of `bytes` bytes (0: take the size of the existing one).
void* mapNamed(const std::string& name, bool create, size_t& bytes) {
  int fd = shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) {
    throwSystemError(fmt::format("shm: cannot {} the small-message arena {}; check /dev/shm (df -h /dev/shm), or set "
                                 "HOCCL_SMALL_MAX_BYTES=0 to go without it",
                                 create ? "create" : "open", name),
                     errno);
  }
  struct stat st {};
  int err = 0;
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) err = errno;
  if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kPage)) err = errno ? errno : EINVAL;
  if (!create) bytes = static_cast<size_t>(st.st_size);
  void* base = err ? MAP_FAILED : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (!err && base == MAP_FAILED) err = errno;
  close(fd);
  if (err) {
    if (create) shm_unlink(name.c_str());
    throwSystemError(fmt::format("shm: cannot size or map the small-message arena {} ({} bytes); check free space "
                                 "in /dev/shm, or set HOCCL_SMALL_MAX_BYTES=0 to go without it",
                                 name, bytes),
                     err);
  }
  return base;
}

}  // namespace

Arena::Arena(std::string name, void* base, size_t bytes, size_t maxBytes, size_t regionBytes)
    : name_(std::move(name)), base_(base), bytes_(bytes), maxBytes_(maxBytes), regionBytes_(regionBytes),
      regions_(static_cast<char*>(base) + kPage) {}

Arena::~Arena() { munmap(base_, bytes_); }

std::unique_ptr<Arena> Arena::connect(const ConnectContext& ctx, size_t maxBytes, bool crossMemory) {
  const std::string name = ShmTransport::namePrefix(ctx.jobTag) + "-arena";
  const size_t regionBytes = roundUp(sizeof(Region) + kArenaSlots * roundUp(maxBytes, 64), kPage);
  size_t bytes = kPage + regionBytes * static_cast<size_t>(ctx.nranks);
  void* base = nullptr;
  // Phase 1: rank 0 creates and initialises (a fresh segment is all zeros: every sequence number starts at 0).
  try {
    if (ctx.rank == 0) {
      base = mapNamed(name, true, bytes);
      auto* h = new (base) ArenaHeader{0, static_cast<uint64_t>(ctx.nranks), maxBytes, regionBytes};
      std::atomic_thread_fence(std::memory_order_release);
      h->magic = kArenaMagic;
    }
    agreeOnPhase(ctx, "creating the small-message arena", nullptr);
  } catch (const Error& e) {
    if (base) munmap(base, bytes);
    if (ctx.rank == 0) shm_unlink(name.c_str());
    if (e.code() == hocclRemoteError) throw;
    agreeOnPhase(ctx, "creating the small-message arena", &e);
  }
  std::unique_ptr<Arena> arena;
  // Phase 2: the others map it and check the geometry; then the name goes.
  try {
    if (ctx.rank != 0) {
      base = mapNamed(name, false, bytes);
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
    if (ctx.rank == 0) shm_unlink(name.c_str());
    if (e.code() == hocclRemoteError) throw;
    agreeOnPhase(ctx, "mapping the small-message arena", &e);
  }
  if (ctx.rank == 0) shm_unlink(name.c_str());
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
