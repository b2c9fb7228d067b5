/// @file shm_file.h
/// The shared memory of the shm transport: anonymous files (memfd_create) that peers open through
/// /proc/<creator pid>/fd, never names in /dev/shm. A file lives while some process holds it open or mapped, so
/// whatever kills a job (SIGKILL at any point of init included) leaves nothing behind.
#pragma once

#include <cstddef>
#include <string>

namespace hoccl::transport::shm {

/// Creates a shared file called `name` (for /proc/<pid>/fd and error messages; a leading '/' is dropped) of `bytes`
/// bytes. Throws InvalidUsage when this process already holds one of that name (two communicators must never share
/// one), SystemError with `advice` when the file cannot be made or sized. The caller owns the descriptor.
int createSharedFile(const std::string& name, size_t bytes, const std::string& advice);
/// Closes `fd`, the descriptor createSharedFile returned for `name`, and forgets it: a file is gone (once unmapped
/// everywhere) when its creator closes it.
void closeSharedFile(const std::string& name, int fd);
/// Whether process `pid` holds the shared file `name` now (lazy connections poll it before openSharedFile).
bool sharedFileExists(int pid, const std::string& name);
/// Opens the shared file `name` that process `pid` created and still holds open. Throws SystemError naming the
/// process when it holds no such file (it failed, or already let go) or its files cannot be seen from here (another
/// pid namespace, another user). The caller owns the descriptor.
int openSharedFile(int pid, const std::string& name, const std::string& what);

}  // namespace hoccl::transport::shm
