// Shared files of the shm transport (see shm_file.h): memfd_create, and opening a peer's through /proc/<pid>/fd
// (each open file of a process shows there as a link whose target reads "/memfd:<name> (deleted)"). The files this
// process made are also kept in a table (name -> descriptor, checked with one readlink), so that finding one of its
// own (ranks that are threads of one process) costs no scan of a /proc/self/fd that may hold thousands of entries.
#include "transports/shm/shm_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::transport::shm {
namespace {

std::string bare(const std::string& name) { return !name.empty() && name[0] == '/' ? name.substr(1) : name; }

std::mutex ownMutex;
std::unordered_map<std::string, int>& ownFiles() {  // this process's files: bare name -> descriptor
  static auto* files = new std::unordered_map<std::string, int>();
  return *files;
}

// Whether this process's descriptor fd is the memfd `want` names.
bool ownFileIs(int fd, const std::string& want) {
  char target[PATH_MAX];
  ssize_t n = readlink(fmt::format("/proc/self/fd/{}", fd).c_str(), target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return want == target;
}

// The descriptor number under which process `pid` holds the memfd `name`; -1 (errno set) if none is found.
int findFile(int pid, const std::string& name) {
  const std::string want = "/memfd:" + bare(name) + " (deleted)";
  if (pid == getpid()) {  // every file of this process was made by createSharedFile: the table knows it
    std::lock_guard<std::mutex> lock(ownMutex);
    auto it = ownFiles().find(bare(name));
    if (it != ownFiles().end() && ownFileIs(it->second, want)) return it->second;
    if (it != ownFiles().end()) ownFiles().erase(it);  // closed since (the number may be reused)
    errno = ENOENT;
    return -1;
  }
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char target[PATH_MAX];
    ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (want == target) {
      found = std::atoi(e->d_name);
      break;
    }
  }
  closedir(d);
  if (found < 0) errno = ENOENT;
  return found;
}

}  // namespace

int createSharedFile(const std::string& name, size_t bytes, const std::string& advice) {
  if (findFile(getpid(), name) >= 0)
    throwInvalidUsage(
        fmt::format("shm: this process already holds shared memory named {}; two communicators with "
                    "the same job tag?",
                    bare(name)));
  int fd = memfd_create(bare(name).c_str(), MFD_CLOEXEC);
  if (fd < 0) throwSystemError(fmt::format("shm: cannot create shared memory {}; {}", bare(name), advice), errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    throwSystemError(fmt::format("shm: cannot size shared memory {} to {} bytes; {}", bare(name), bytes, advice), err);
  }
  std::lock_guard<std::mutex> lock(ownMutex);
  ownFiles()[bare(name)] = fd;
  return fd;
}

void closeSharedFile(const std::string& name, int fd) {
  {
    std::lock_guard<std::mutex> lock(ownMutex);
    auto it = ownFiles().find(bare(name));
    if (it != ownFiles().end() && it->second == fd) ownFiles().erase(it);
  }
  close(fd);
}

bool sharedFileExists(int pid, const std::string& name) { return findFile(pid, name) >= 0; }

int openSharedFile(int pid, const std::string& name, const std::string& what) {
  int num = findFile(pid, name);
  int fd = num < 0 ? -1
                   : ::open(fmt::format("/proc/{}/fd/{}", pid == getpid() ? "self" : std::to_string(pid), num).c_str(),
                            O_RDWR | O_CLOEXEC);
  if (fd < 0)
    throwSystemError(fmt::format("shm: {}: cannot open shared memory {} of process {} through /proc/{}/fd: the "
                                 "peer failed during init (check its log), or its files are out of sight (containers "
                                 "with separate pid namespaces: share one, e.g. docker --pid=host; or set "
                                 "HOCCL_SHM_DISABLE=1 to use tcp)",
                                 what, bare(name), pid, pid),
                     errno);
  return fd;
}

}  // namespace hoccl::transport::shm
