// Whether a peer process on this host still runs (transport_util.h): the shm channels and sessions and the UCX
// channel watch same-host peers with it, so a killed peer is named at once instead of at HOCCL_TIMEOUT.
#include <signal.h>

#include <cerrno>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "transports/transport_util.h"

namespace hoccl::transport {

bool processAlive(int pid) {
  if (pid <= 0) return true;  // unknown: cannot tell
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child that its parent has not reaped yet still answers kill(): look at its state.
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  if (!stat) return true;  // no procfs: trust kill()
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

}  // namespace hoccl::transport
