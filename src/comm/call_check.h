/// @file call_check.h
/// The mismatch check (HOCCL_CHECK_MISMATCH): before a call runs, the ranks of each communicator compare a 64-byte
/// fingerprint of it (sequence number, collective, count, type, op, root, the algorithm or shortcut chosen, host or
/// device buffers) over the channels the collectives use. By default (HOCCL_CHECK_EXCHANGE=auto: doubling) they do it
/// in ceil(log2 N) rounds with two peers each, and every rank learns rank 0's call and the lowest rank whose call differs
/// from it; HOCCL_CHECK_EXCHANGE=all gives every rank every fingerprint (N-1 peers, or N-1 ring steps). Calls inside
/// a group are checked one by one, each right before it runs, exactly as on a rank that makes the same calls without
/// a group. A difference fails the call on every rank with hocclInvalidUsage naming the differing calls (the same
/// message on every rank), before any payload moves, so a mismatch cannot corrupt memory or return wrong data with
/// success.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace hoccl {

struct Op;

/// The fingerprint of one rank's part of a call on one communicator (the wire format: 64 bytes, host order; the
/// ranks of a communicator share one host order in practice, and a different one reads as a mismatch).
struct CallFingerprint {
  uint64_t seq = 0;         ///< collective calls made on the communicator before this one
  uint64_t count = 0;       ///< elements as the C API takes them (the first collective of the call)
  uint64_t groupHash = 0;   ///< FNV-1a over the checked collectives (seq, collective, count, type, op, root)
  uint32_t ncoll = 0;       ///< collectives covered (1: every call is checked on its own)
  int32_t root = -1;        ///< root of a rooted collective, else -1
  uint8_t coll = 0;         ///< Coll of the first collective
  uint8_t dtype = 0;        ///< hocclDataType_t
  uint8_t op = 0xff;        ///< hocclRedOp_t of a reducing collective (capped at 0xfe), else 0xff
  uint8_t magic = 0x5c;     ///< constant: tells a fingerprint from stray bytes
  uint8_t device = 0;       ///< 1 when the call's buffers are device memory, 0 host memory
  uint8_t comm[3] = {};     ///< low 24 bits of the communicator's tag: two communicators sharing connections differ
  char algorithm[24] = {};  ///< the algorithm or shortcut chosen for the first collective, NUL-terminated
};
static_assert(sizeof(CallFingerprint) == 64, "the fingerprint is 64 bytes on the wire");

/// What the doubling exchange knows about a set of ranks (the wire format of its rounds: 136 bytes, host order): the
/// lowest rank of the set with its fingerprint, and the lowest rank of the set whose fingerprint differs from that one.
struct CheckSummary {
  CallFingerprint low;     ///< the fingerprint of rank lowRank
  CallFingerprint other;   ///< the fingerprint of rank otherRank (meaningful when otherRank >= 0)
  int32_t lowRank = -1;    ///< the lowest rank of the set; -1 for the empty set
  int32_t otherRank = -1;  ///< the lowest rank whose fingerprint differs from low; -1 when every rank has low's
};
static_assert(sizeof(CheckSummary) == 136, "the summary is 136 bytes on the wire");

/// The peers of rank `rank` in the doubling exchange of a communicator of `nranks` ranks: (rank +- 2^k) mod nranks
/// for 2^k < nranks, each once (what it connects under HOCCL_CONNECT=lazy).
std::vector<int> doublingCheckPeers(int rank, int nranks);
/// The summary of the set {rank}.
CheckSummary summaryOf(int rank, const CallFingerprint& f);
/// The summary of the union of the sets that a and b summarize (sets may overlap: combining is idempotent,
/// commutative and associative, so the doubling rounds may cover a rank twice when N is not a power of two).
CheckSummary combine(const CheckSummary& a, const CheckSummary& b);

/// "call #3 AllReduce(count=100, float, sum) [small]" (plus " on device buffers" for device memory, and " and 2 more
/// collectives in a group").
std::string describeFingerprint(const CallFingerprint& f);

/// Whether the policy checks a call with `seq` collective calls before it and `bytes` of payload (the largest
/// collective of the call): mode 0 never, 2 always, 1 (default) for the first kCheckFirstCalls calls of a
/// communicator and from kCheckMinBytes on, where the exchange costs under 2 % (docs/performance.md).
bool mismatchCheckWanted(int mode, uint64_t seq, size_t bytes);
/// The first calls of a communicator the default policy always checks.
inline constexpr uint64_t kCheckFirstCalls = 16;
/// From this payload on (bytes of the call's largest collective buffer), the default policy checks every call.
inline constexpr size_t kCheckMinBytes = size_t{1} << 20;

/// Whether the policy (HOCCL_CHECK_MISMATCH) checks collective `op` (started, with its sequence number). Every call
/// is checked on its own, grouped or not, so that a rank that groups its calls and one that does not agree.
bool checkWanted(const Op& op);

/// Checks collective `op` now (checkWanted was true): exchanges fingerprints (HOCCL_CHECK_EXCHANGE) and compares.
/// Throws hocclInvalidUsage naming the differing calls on a difference (the same message on every rank; the channels
/// are left in step, so the communicator stays usable), hocclTimeout when a peer does not answer within
/// HOCCL_TIMEOUT, and whatever the communicator's health says.
void checkCall(const Op& op);

/// The same check as an executor task that runs just before op's own task (inside a group: each checked call gets
/// one, in call order, as an ungrouped rank checks them). The task throws what checkCall throws.
exec::Task checkTask(const Op& op);

}  // namespace hoccl
