// Shared host memory blocks (see shared_mem.h): one sealed memfd per block, held open by this process while the
// block lives; a process-wide table by address answers lookups and counts pins.
#include "kernels/shared_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::kernels {
namespace {

struct Block {
  size_t bytes;
  int fd;
  uint64_t inode;
  int pins = 0;
};

struct Table {
  std::mutex mu;
  std::map<uintptr_t, Block> blocks;  // by start address
  std::atomic<uint64_t> made{0};
  std::atomic<size_t> live{0};  // blocks alive: lookups in a process without any skip the lock
};

Table& table() {
  static Table* t = new Table;  // never destroyed: frees may come from other libraries' destructors
  return *t;
}

// The block containing [p, p+bytes), or end().
std::map<uintptr_t, Block>::iterator find(Table& t, const void* ptr, size_t bytes) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = t.blocks.upper_bound(p);
  if (it == t.blocks.begin()) return t.blocks.end();
  --it;
  if (p - it->first >= it->second.bytes || bytes > it->second.bytes - (p - it->first)) return t.blocks.end();
  return it;
}

}  // namespace

void* sharedAlloc(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = size == 0 ? page : (size + page - 1) / page * page;
  if (bytes < size) throwInvalidArgument(fmt::format("size {} is too large", size));
  Table& t = table();
  const std::string name = fmt::format("hoccl-mem-{}", t.made.fetch_add(1));
  const std::string advice = fmt::format(
      "check free memory (free -h, the cgroup's memory limit, the size of /dev/shm is not involved) for "
      "{} bytes",
      bytes);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throwSystemError("hocclMemAlloc: cannot create shared memory; " + advice, errno);
  struct stat st {};
  void* p = MAP_FAILED;
  int err = 0;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 || fstat(fd, &st) != 0)
    err = errno;
  if (!err) p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!err && p == MAP_FAILED) err = errno;
  if (err) {
    close(fd);
    throwSystemError("hocclMemAlloc: cannot size, seal or map shared memory; " + advice, err);
  }
  std::lock_guard<std::mutex> lock(t.mu);
  t.blocks.emplace(reinterpret_cast<uintptr_t>(p), Block{bytes, fd, static_cast<uint64_t>(st.st_ino)});
  t.live.store(t.blocks.size(), std::memory_order_release);
  return p;
}

void sharedFree(void* ptr) {
  if (!ptr) return;
  Table& t = table();
  Block b{};
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == t.blocks.end())
      throwInvalidArgument(
          fmt::format("{} was not returned by hocclMemAlloc/ncclMemAlloc (or was freed already)", ptr));
    if (it->second.pins > 0)
      throwInvalidUsage(
          fmt::format("{} ({} bytes) is in use by {} collective call(s) in flight; nothing was freed. "
                      "Free it after the calls that use it have returned",
                      ptr, it->second.bytes, it->second.pins));
    b = it->second;
    t.blocks.erase(it);
    t.live.store(t.blocks.size(), std::memory_order_release);
  }
  munmap(ptr, b.bytes);
  close(b.fd);
}

bool findShared(const void* ptr, size_t bytes, SharedRef* ref) {
  Table& t = table();
  if (!ptr || t.live.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = find(t, ptr, bytes);
  if (it == t.blocks.end()) return false;
  if (ref)
    *ref = SharedRef{it->second.fd, it->second.inode, it->second.bytes,
                     static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr) - it->first)};
  return true;
}

size_t sharedBlockBytes(const void* ptr) {
  if (!ptr) return 0;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = find(t, ptr, 0);
  return it == t.blocks.end() ? 0 : it->second.bytes;
}

void* mapPeerShared(int pid, const SharedRef& ref, std::string* why, int* err) {
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, ref.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    *why = fmt::format("cannot open {}", path);
    return nullptr;
  }
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != ref.inode ||
      static_cast<uint64_t>(st.st_size) != ref.fileBytes || seals < 0 || !(seals & F_SEAL_SHRINK)) {
    *err = errno ? errno : EINVAL;
    close(fd);
    *why = fmt::format("{} is not the sealed block of {} bytes (inode {}) that the peer published", path, ref.fileBytes,
                       ref.inode);
    return nullptr;
  }
  // Populated now, once per cached mapping: the zero-copy all-reduce hands any piece to any rank, so over its calls
  // a rank touches every page of a peer's buffers, and faulting them in one at a time inside the calls is slow.
  void* base = mmap(nullptr, ref.fileBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  *err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    *why = fmt::format("mmap of {} failed", path);
    return nullptr;
  }
  return base;
}

void unmapPeerShared(void* base, uint64_t fileBytes) {
  if (base) munmap(base, fileBytes);
}

SharedPin::SharedPin(const void* ptr) {
  Table& t = table();
  if (!ptr || t.live.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = find(t, ptr, 0);
  if (it == t.blocks.end()) return;
  ++it->second.pins;
  block_ = reinterpret_cast<void*>(it->first);
}

SharedPin::~SharedPin() {
  if (!block_) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.blocks.find(reinterpret_cast<uintptr_t>(block_));
  if (it != t.blocks.end()) --it->second.pins;
}

}  // namespace hoccl::kernels
