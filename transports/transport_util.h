/// @file transport_util.h
/// Small helpers shared by the concrete transports (not part of the transport interface): integer parameters with
/// a fallback, peer descriptions for error messages, and the idle-polling clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "base/boot/bootstrap.h"
#include "base/error.h"
#include "base/params.h"

namespace hoccl::transport {

/// The integer value of HOCCL_<name>, else its registered default (core/params.cc), else `fallback`; a malformed or
/// out-of-range value is an InvalidArgument error that names the variable and the accepted range.
inline int64_t intParam(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const std::string raw = params::getString(name);
  if (raw.empty()) return fallback;
  int64_t v = 0;
  size_t used = 0;
  try {
    v = std::stoll(raw, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != raw.size() || v < lo || v > hi)
    throwInvalidArgument(fmt::format("HOCCL_{}='{}' is not valid: expected an integer in [{}, {}]", name, raw, lo, hi));
  return v;
}

struct ConnectContext;

/// Ends one phase of a collective connect: all-gathers whether this rank failed (`mine`, null on success) over the
/// bootstrap. The failing rank rethrows its own error; every other rank throws a RemoteError quoting it, so a
/// failure on any rank stops every rank instead of leaving some waiting. `phase` completes "rank r failed while ...".
void agreeOnPhase(const ConnectContext& ctx, const std::string& phase, const Error* mine);

/// "rank 3 (host node7, pid 4242)": how error messages name a peer.
inline std::string describePeer(const boot::RankInfo& info) {
  std::string host(info.hostname, strnlen(info.hostname, sizeof(info.hostname)));
  return fmt::format("rank {} (host {}, pid {})", info.rank, host.empty() ? "?" : host, info.pid);
}

}  // namespace hoccl::transport
