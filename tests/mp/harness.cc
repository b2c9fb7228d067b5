#include "harness.h"

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

int runRanks(int nranks, const RankBody& body, int timeoutSeconds) {
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    std::fprintf(stderr, "hocclGetUniqueId failed: %s\n", hocclGetLastError(nullptr));
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
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
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return worst;
}

}  // namespace hoccl::test
