// Test helpers (see rank_runner.h).
#include "rank_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace hoccl::test {

using Clock = std::chrono::steady_clock;

/// Runs fn(rank) for every rank in its own thread; returns the error text of each rank ("" = success).
std::vector<std::string> runThreads(int nranks, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "unknown error";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

namespace {

// Threads of this process (Linux: /proc/self/task).
size_t threadCount() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Waits (at most 2 s) until this process's thread count has stopped falling: the bootstrap roots of an earlier
// runProcesses end once their ranks are gone, freeing memory as they go, and a child forked at that moment inherits
// the allocator's lock held (GCC 12's ASan allocator has no fork handlers: test_transports' 8-rank case hung so
// under ASan in 3 of 3 runs).
void letEndingThreadsEnd() {
  const auto until = Clock::now() + std::chrono::seconds(2);
  size_t last = threadCount();
  int steady = 0;
  while (steady < 3 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const size_t now = threadCount();
    steady = now == last ? steady + 1 : 0;
    last = now;
  }
}

}  // namespace

/// Runs fn(rank) in a forked child per rank; returns each child's text ("" = success). Children that do not finish
/// within `limit` are killed. A child's text travels back through a pipe.
std::vector<std::string> runProcesses(int nranks, const std::function<std::string(int)>& fn,
                                      std::chrono::seconds limit) {
  std::vector<pid_t> pids(nranks);
  std::vector<int> pipes(nranks);
  letEndingThreadsEnd();
  std::fflush(stdout);
  std::fflush(stderr);
  // The children start together, once all are forked: a child forked while a thread of this process (the bootstrap
  // root serving children forked earlier) holds an allocator lock would inherit it locked and hang in its first
  // malloc (GCC 12's ASan allocator has no fork handlers; test_transports' 8-rank case hung so under ASan).
  int gate[2];
  if (pipe(gate) != 0) throw std::runtime_error("pipe() failed");
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe() failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
      close(fds[0]);
      close(gate[1]);
      char c;
      while (true) {  // end of file: the parent has forked every rank
        const ssize_t n = read(gate[0], &c, 1);
        if (n < 0 && errno == EINTR) continue;
        break;
      }
      close(gate[0]);
      std::string msg;
      try {
        msg = fn(r);
      } catch (const std::exception& e) {
        msg = std::string("exception: ") + e.what();
      }
      std::fflush(stdout);
      if (write(fds[1], msg.data(), msg.size()) < 0) _exit(3);
      _exit(msg.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  close(gate[0]);
  close(gate[1]);  // releases the children
  std::vector<std::string> results(nranks);
  auto deadline = Clock::now() + limit;
  for (int r = 0; r < nranks; ++r) {
    std::string text;
    char buf[4096];
    while (true) {
      pollfd pfd{pipes[r], POLLIN, 0};
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0 || poll(&pfd, 1, left) <= 0) {
        text += "<timed out>";
        break;
      }
      ssize_t n = read(pipes[r], buf, sizeof(buf));
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    close(pipes[r]);
    results[r] = text;
  }
  for (int r = 0; r < nranks; ++r) {
    kill(pids[r], SIGKILL);  // harmless if it already exited
    waitpid(pids[r], nullptr, 0);
  }
  return results;
}

std::string firstError(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) return fmt::format("rank {}: {}", r, errors[r]);
  return "";
}

std::string allErrors(const std::vector<std::string>& errors) {
  std::string all;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) all += fmt::format("{}rank {}: {}", all.empty() ? "" : "\n", r, errors[r]);
  return all;
}

}  // namespace hoccl::test
