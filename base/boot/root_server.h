/// @file root_server.h
/// The bootstrap root: a thread that accepts the ranks of one communicator (each must prove the job secret), hands
/// every rank the table of RankInfo, then relays all-gathers and barriers until every rank has disconnected. When a
/// rank disappears or never arrives it tells the others which one, instead of letting them hang.
#pragma once

#include "base/boot/bootstrap.h"
#include "base/socket.h"

namespace hoccl::boot {

/// Starts a detached root thread serving the communicator `id` on the already-listening socket.
void startRootServer(net::Fd listener, const UniqueId& id);

}  // namespace hoccl::boot
