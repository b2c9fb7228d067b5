/// @file root_server.h
/// The bootstrap root: a thread that accepts the ranks of one communicator (each must prove the job secret) and
/// tells each rank its place in the gather tree (the exchanges themselves go between the ranks, gather_tree.h); then
/// it stays the communicator's side channel for failures until every rank has disconnected. When a rank disappears
/// or never arrives it tells the others which one, instead of letting them hang. With several unique ids
/// (hocclCommInitRankScalable) each id's root meets its share of the ranks and the others link to the first.
#pragma once

#include "base/boot/bootstrap.h"
#include "base/socket.h"

namespace hoccl::boot {

/// Starts a detached root thread serving the communicator `id` on the already-listening socket.
void startRootServer(net::Fd listener, const UniqueId& id);
/// True when this process serves the root of `id` (created it with createUniqueId and its join is not over).
bool servesRoot(const UniqueId& id);
/// Tells the sub-root of `sub`, served by this process, the head root it links to (hocclCommInitRankScalable: the
/// first rank of each share hands its id's root the first id, secret included, without sending it anywhere).
void handHeadId(const UniqueId& sub, const UniqueId& head);

}  // namespace hoccl::boot
