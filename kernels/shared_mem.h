/// @file shared_mem.h
/// Host memory that peers on the same host can map: hocclMemAlloc / ncclMemAlloc hand out blocks of anonymous shared
/// files (memfd_create), one file per block, which this process holds open for the block's life so that a peer can
/// open it through /proc/<pid>/fd/<fd> and map it. Every file is sealed against shrinking and growing, so a peer's
/// mapping can never fault (no SIGBUS), whatever this process does later; a block freed here stays readable in the
/// peers' mappings until they unmap it.
///
/// A block that a collective is using (pinned) cannot be freed: hocclMemFree then fails with hocclInvalidUsage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hoccl::kernels {

/// Where a range of shared memory lies: which file of this process, and where in it.
struct SharedRef {
  int32_t fd = -1;         ///< descriptor of the file in the owning process (-1: not shared memory)
  uint64_t inode = 0;      ///< the file's inode number: tells a reused descriptor number from the old file
  uint64_t fileBytes = 0;  ///< size of the whole file
  uint64_t offset = 0;     ///< offset of the range in the file
};

/// Allocates `bytes` (0 allowed: one page) of shared memory, page aligned. Throws hocclSystemError with advice when
/// the file cannot be made, sized or mapped.
void* sharedAlloc(size_t bytes);
/// Frees a block of sharedAlloc. Throws hocclInvalidArgument when `ptr` is not the start of a live block,
/// hocclInvalidUsage (nothing freed) while a collective uses it. Null is a no-op.
void sharedFree(void* ptr);
/// True when [ptr, ptr+bytes) lies inside one live block; fills `ref` then.
bool findShared(const void* ptr, size_t bytes, SharedRef* ref);
/// Total bytes of the live block that contains ptr (0 when none).
size_t sharedBlockBytes(const void* ptr);

/// Maps the whole block `ref` that process `pid` of this host allocated (sharedAlloc) into this process, through
/// /proc/<pid>/fd/<fd>, after checking that the file there is the one it published (inode and size) and that it is
/// sealed against shrinking (so the mapping can never fault). Returns the mapping's base (unmap with
/// unmapPeerShared), or null with `why` (a short reason) and `err` (an errno value) set.
void* mapPeerShared(int pid, const SharedRef& ref, std::string* why, int* err);
/// Unmaps a mapping of mapPeerShared of `fileBytes` bytes.
void unmapPeerShared(void* base, uint64_t fileBytes);

/// Keeps the block holding a pointer from being freed while it lives (RAII; nothing when the pointer is not shared).
class SharedPin {
 public:
  /// Pins the block holding `ptr`, if any.
  explicit SharedPin(const void* ptr);
  ~SharedPin();
  SharedPin(const SharedPin&) = delete;
  SharedPin& operator=(const SharedPin&) = delete;

 private:
  void* block_ = nullptr;
};

}  // namespace hoccl::kernels
