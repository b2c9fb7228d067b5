#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace hoccl::test {

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
  std::fflush(stderr);
  return 1;
}

namespace {

// Write end of the pipe that keeps the root's host process alive (closed by stopRootHost).
int holdFd = -1;

// Ends the process hosting the bootstrap root: closing the pipe lets it exit; `kill` when the ranks timed out.
void stopRootHost(pid_t pid, bool kill) {
  if (holdFd >= 0) close(holdFd);
  holdFd = -1;
  if (kill) ::kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Forks the process that hosts the bootstrap root: it makes the unique id (which starts the root's thread), hands
// it to the parent through a pipe, and stays until the parent closes holdFd (every rank has ended).
// The parent itself never starts a thread, so every rank is forked from a single-threaded process: a fork beside a
// running thread can copy a lock that thread holds (malloc's, or ASan's allocator's) and hang the child.
pid_t startRootHost(hocclUniqueId* id) {
  int idPipe[2], holdPipe[2];
  if (pipe(idPipe) != 0 || pipe(holdPipe) != 0) {
    std::perror("pipe");
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return -1;
  }
  if (pid == 0) {
    close(idPipe[0]);
    close(holdPipe[1]);
    hocclUniqueId made;
    if (hocclGetUniqueId(&made) != hocclSuccess) {
      std::fprintf(stderr, "hocclGetUniqueId failed: %s\n", hocclGetLastError(nullptr));
      _exit(1);
    }
    if (write(idPipe[1], &made, sizeof(made)) != static_cast<ssize_t>(sizeof(made))) _exit(1);
    char c;
    while (read(holdPipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);  // no atexit handlers: the ranks are gone, nobody needs the root's goodbye
  }
  close(idPipe[1]);
  close(holdPipe[0]);
  holdFd = holdPipe[1];
  size_t got = 0;
  while (got < sizeof(*id)) {
    ssize_t n = read(idPipe[0], reinterpret_cast<char*>(id) + got, sizeof(*id) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(idPipe[0]);
  if (got != sizeof(*id)) {
    std::fprintf(stderr, "the process hosting the bootstrap root gave no unique id\n");
    stopRootHost(pid, false);
    return -1;
  }
  return pid;
}

}  // namespace

int runRanks(int nranks, const RankBody& body, int timeoutSeconds) {
  hocclUniqueId id;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t rootHost = startRootHost(&id);
  if (rootHost < 0) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(holdFd);
      int code = 1;
      try {
        code = body(r, nranks, id);
      } catch (const std::exception& e) {
        fail(r, std::string("exception: ") + e.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  std::vector<bool> done(nranks, false);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  int remaining = nranks;
  while (remaining > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      done[r] = true;
      --remaining;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0) {
        std::fprintf(stderr, "rank %d exited with %d\n", r, code);
        if (worst == 0) worst = code;
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "timeout after %d s: killing the remaining ranks\n", timeoutSeconds);
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) kill(pids[r], SIGKILL);
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) waitpid(pids[r], nullptr, 0);
      stopRootHost(rootHost, true);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stopRootHost(rootHost, false);
  return worst;
}

}  // namespace hoccl::test
