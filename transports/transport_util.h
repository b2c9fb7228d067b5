/// @file transport_util.h
/// Small helpers shared by the concrete transports (not part of the transport interface): agreeing on a connect
/// phase, whether a same-host peer process is alive, and peer descriptions for error messages.
#pragma once

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "base/boot/bootstrap.h"
#include "base/error.h"

namespace hoccl::transport {

struct ConnectContext;

/// Ends one phase of a collective connect: all-gathers whether this rank failed (`mine`, null on success) over the
/// bootstrap. The failing rank rethrows its own error; every other rank throws a RemoteError quoting it, so a
/// failure on any rank stops every rank instead of leaving some waiting. `phase` completes "rank r failed while ...".
void agreeOnPhase(const ConnectContext& ctx, const std::string& phase, const Error* mine);

/// True if process `pid` of this host is alive (exists and is not a zombie); true when it cannot tell.
bool processAlive(int pid);

/// "rank 3 (host node7, pid 4242)": how error messages name a peer.
inline std::string describePeer(const boot::RankInfo& info) {
  std::string host(info.hostname, strnlen(info.hostname, sizeof(info.hostname)));
  return fmt::format("rank {} (host {}, pid {})", info.rank, host.empty() ? "?" : host, info.pid);
}

}  // namespace hoccl::transport
