/// @file shm_release.h
/// HOCCL_MAX_CONNS over shm (issue 19): after ring rounds of send/recv, a rank maps the shm slots of its two ring
/// neighbours only; every other peer's segments (connected by earlier calls) were closed, unmapped and freed.
#pragma once

#include <map>

#include "hoccl/hoccl.h"

namespace hoccl::test {

/// Per peer: the bytes of the channel segments (this rank's to the peer and the peer's to this rank) that this
/// process maps now, for the ranks `rank` (ranks are processes here: every segment of the process is this rank's).
std::map<int, long> shmSegmentsMapped(int rank);

/// Runs 2n+1 rounds of ring send/recv (send to rank+1, receive from rank-1, odd counts, random doubles checked
/// exactly), enough for every close request made at the first rounds to be answered and read, then checks that the
/// process maps the segments of its ring neighbours only. Prints the mapped peers and bytes before and after.
/// Returns 0 on success, else fail()'s code.
int checkShmReleased(hocclComm_t comm, int rank, int n);

}  // namespace hoccl::test
