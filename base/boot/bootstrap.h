/// @file bootstrap.h
/// The bootstrap network: how ranks find each other before any transport exists. The root of the unique id listens;
/// every rank connects to it (proving the job secret), and the root relays all-gathers and barriers (a star). Each
/// rank keeps its connection to the root for the communicator's lifetime; a closed connection means a dead rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hoccl/hoccl.h"
#include "base/socket.h"

namespace hoccl::boot {

/// What every rank tells the others at init.
struct RankInfo {
  int32_t rank = -1;         ///< rank in the communicator
  int32_t pid = 0;           ///< process id
  uint64_t hostHash = 0;     ///< host identity (topology/host_identity.h), HOCCL_HOSTID overrides
  uint64_t switchHash = 0;   ///< switch identity (0 = unknown)
  char hostname[64] = {};    ///< for messages
  char hostId[64] = {};      ///< the host id string (hostname+boot id, or HOCCL_HOSTID)
  char switchId[64] = {};    ///< the switch id string ("" = unknown)
  int32_t numaNode = -1;     ///< NUMA node the rank runs on (hwloc; -1 = unknown): orders the ranks of a host
};

/// The decoded contents of a hocclUniqueId.
struct UniqueId {
  uint32_t magic = 0;      ///< kUniqueIdMagic
  uint32_t version = 0;    ///< HOCCL_VERSION_CODE
  net::Address root;       ///< root's bootstrap listener
  net::Secret secret{};    ///< 128-bit job secret
  uint64_t nonce = 0;      ///< distinguishes communicators created from the same root process
};
/// Magic number at the start of a hocclUniqueId.
constexpr uint32_t kUniqueIdMagic = 0x484f4343;  // "HOCC"

/// Packs id into the 128-byte public form.
hocclUniqueId encode(const UniqueId& id);
/// Unpacks; throws InvalidArgument when the magic or version is wrong.
UniqueId decode(const hocclUniqueId& id);
/// Creates a unique id whose root is this process: starts a listener that serves the bootstrap of one communicator
/// (kept in a process-wide table until that communicator's init is complete or the process exits).
UniqueId createUniqueId();
/// The unique id for a launcher-style init: root HOCCL_COMM_ID (host:port), secret from HOCCL_AUTH_TOKEN (hex or
/// text, hashed) — rank 0 serves it. Throws InvalidUsage with advice when the variables are missing.
UniqueId uniqueIdFromEnvironment(int rank);

/// A connected bootstrap for one communicator.
class Bootstrap {
 public:
  /// Connects rank `rank` of `nranks` to the root of `id`, exchanges RankInfo. Rank 0 of a HOCCL_COMM_ID init also
  /// hosts the root. Throws on timeout (naming the missing ranks) or a bad secret.
  Bootstrap(const UniqueId& id, int rank, int nranks, const RankInfo& self);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int nranks() const { return nranks_; }
  /// Every rank's info, indexed by rank.
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  /// The job secret (transports use it to authenticate their own connections).
  const net::Secret& secret() const { return secret_; }
  /// A 64-bit tag unique to this communicator (for connection hellos and shared-memory names).
  uint64_t commTag() const { return commTag_; }
  /// All-gather: data holds nranks slots of `bytes` bytes; this rank's slot is filled in, the others are received.
  void allGather(void* data, size_t bytes);
  /// Waits until every rank has called barrier().
  void barrier();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int rank_;
  int nranks_;
  std::vector<RankInfo> ranks_;
  net::Secret secret_{};
  uint64_t commTag_ = 0;
};

}  // namespace hoccl::boot
