/// @file shm_peer_maps.h
/// Mappings of the peers' shared memory (kernels/shared_mem.h) in this process, made on first use and cached per
/// (peer, file): a peer's block is opened once through /proc/<pid>/fd/<fd>, checked (the inode it published, its
/// size, the seals that keep it from shrinking, so a mapping can never fault), mapped whole and kept. A cached
/// mapping is dropped when the peer publishes another file under the same descriptor number (it freed the old one),
/// when the peer's cache is full (least recently used first), when a call of the communicator fails (a peer may have
/// died: its memory is not kept alive here), and with the communicator. The kernel keeps a freed
/// or a dead peer's memory for as long as this process maps it, so a mapping never points at nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/registrations.h"
#include "transports/transport.h"

namespace hoccl::transport::shm {

/// Where a rank's buffer lies in its shared memory, as it publishes it (fd < 0: not shared, or not registered).
struct SharedDesc {
  int32_t fd = -1;         ///< descriptor of the file in the owner
  uint32_t reserved = 0;   ///< zero
  uint64_t inode = 0;      ///< the file's inode
  uint64_t fileBytes = 0;  ///< the file's size
  uint64_t offset = 0;     ///< the buffer's offset in the file
};

/// The descriptor of [ptr, ptr+bytes) when it is registered in `regs` and lies in shared memory (fd -1 otherwise).
SharedDesc describeShared(const kernels::Registrations* regs, const void* ptr, size_t bytes);

/// The mappings of one communicator's peers. Used by one thread at a time (the communicator's).
class PeerMaps {
 public:
  /// For the ranks of ctx (kept by reference: it lives as long as the communicator).
  explicit PeerMaps(const ConnectContext& ctx) : ctx_(ctx), byPeer_(static_cast<size_t>(ctx.nranks)) {}
  ~PeerMaps();
  PeerMaps(const PeerMaps&) = delete;
  PeerMaps& operator=(const PeerMaps&) = delete;
  /// This process's address of `bytes` bytes at the buffer `desc` of `peer` published (`published`: its address in
  /// the peer's process). Throws hocclSystemError naming the peer when its file cannot be opened, is not the one
  /// it published, or is not sealed; hocclInvalidUsage when the range passes the end of the file.
  char* map(int peer, const SharedDesc& desc, uint64_t published, size_t bytes, const std::string& who);
  /// Mappings held now (for tests).
  size_t held() const;
  /// Unmaps every peer's blocks (after a failed call: a dead peer's memory is not kept alive by this process).
  void releaseAll();

 private:
  struct Mapping {
    int32_t fd;
    uint64_t inode;
    void* base;
    size_t bytes;
    uint64_t lastUse;
  };
  const ConnectContext& ctx_;
  std::vector<std::vector<Mapping>> byPeer_;
  uint64_t uses_ = 0;
};

/// Mappings a peer may hold in the cache before the least recently used goes.
constexpr size_t kMaxMapsPerPeer = 64;

}  // namespace hoccl::transport::shm
