// Nothing is left in /dev/shm after a killed job (issue 15, "Clean up").
//
// Each try starts a job of N ranks (forked processes, launcher-style init: HOCCL_COMM_ID on a free loopback port and
// a random HOCCL_AUTH_TOKEN, rank 0 hosts the bootstrap root, so the job is only its ranks), each rank running init,
// a few all-reduces over shared memory (the slot rings and the small-message arena) and destroy. After a random
// delay the test SIGKILLs every rank at once, reaps them, and counts the entries of /dev/shm that carry this job's
// tag (shm names are "hoccl-<comm tag>-<pid of rank 0>-..."): there must be none. The count also covers what older
// hoccl versions named there. Found entries are removed, so a failing run leaves nothing either.
// The delays cover init: 0..max(--max-delay-ms, 1.2 x the init time of one job measured first, on this machine now).
// Just before each kill the test looks at the ranks' mappings (/proc/<pid>/maps) and counts the tries that killed
// ranks while they held shared memory, so the output shows that the kills did hit the window that matters.
//
// Usage: mp_leftovers [--tries N] [--ranks N] [--max-delay-ms N] [--seed N]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hoccl/hoccl.h"

namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("freePort");
    std::exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

// One rank: init, all-reduces through every shm path, destroy. Writes one byte to `ready` once init returned.
int rankBody(int rank, int nranks, int ready) {
  hocclComm_t comm = nullptr;
  if (hocclCommInitRankFromEnv(&comm, nranks, rank) != hocclSuccess) {
    std::fprintf(stderr, "[rank %d] init failed: %s\n", rank, hocclGetLastError(nullptr));
    return 1;
  }
  char one = 1;
  if (write(ready, &one, 1) != 1) return 1;
  std::vector<float> small(64, 1.0f), large(1 << 20, 1.0f);
  for (int i = 0; i < 20; ++i) {
    if (hocclAllReduce(small.data(), small.data(), small.size(), hocclFloat, hocclSum, comm, nullptr) != hocclSuccess ||
        hocclAllReduce(large.data(), large.data(), large.size(), hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
      return 1;
  }
  hocclCommDestroy(comm);
  return 0;
}

// Entries of /dev/shm of the job whose rank 0 had pid `pid0`; removes them.
int leftovers(pid_t pid0) {
  const std::string mark = "-" + std::to_string(pid0) + "-";
  int n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("hoccl-", 0) != 0 || name.find(mark) == std::string::npos) continue;
    std::fprintf(stderr, "  left over: /dev/shm/%s\n", name.c_str());
    std::filesystem::remove(e.path(), ec);
    ++n;
  }
  return n;
}

// True when one of the processes maps hoccl shared memory right now (/proc/<pid>/maps names the file).
bool holdsSharedMemory(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    std::ifstream maps("/proc/" + std::to_string(p) + "/maps");
    std::string line;
    while (std::getline(maps, line))
      if (line.find("hoccl-") != std::string::npos) return true;
  }
  return false;
}

struct Outcome {
  int inited = 0;           // ranks that had finished init
  bool heldMemory = false;  // a rank held shared memory when killed
  int leftovers = 0;        // entries left in /dev/shm
  double initSeconds = -1;  // when every rank had finished init (calibration only)
};

// One job, killed after `delayMs` (< 0: once every rank has finished init).
Outcome runJob(int nranks, int delayMs, std::mt19937& rng) {
  const std::string commId = "127.0.0.1:" + std::to_string(freePort());
  const std::string token = "leftovers-" + std::to_string(rng());
  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0) std::exit(2);
  std::fflush(stdout);
  std::fflush(stderr);
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(pipeFds[0]);
      setenv("HOCCL_COMM_ID", commId.c_str(), 1);
      setenv("HOCCL_AUTH_TOKEN", token.c_str(), 1);
      _exit(rankBody(r, nranks, pipeFds[1]));
    }
    pids.push_back(pid);
  }
  close(pipeFds[1]);
  Outcome out;
  if (delayMs >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  } else {
    auto limit = start + std::chrono::seconds(30);
    while (out.inited < nranks && std::chrono::steady_clock::now() < limit) {
      char c;
      if (read(pipeFds[0], &c, 1) == 1) ++out.inited;
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    out.initSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  out.heldMemory = holdsSharedMemory(pids);
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  char buf[64];
  ssize_t n = read(pipeFds[0], buf, sizeof(buf));
  if (n > 0) out.inited += static_cast<int>(n);
  close(pipeFds[0]);
  out.leftovers = leftovers(pids[0]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int tries = 25, nranks = 4, maxDelayMs = 300;
  unsigned seed = std::random_device{}();
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--tries") tries = v;
    else if (a == "--ranks") nranks = v;
    else if (a == "--max-delay-ms") maxDelayMs = v;
    else if (a == "--seed") seed = static_cast<unsigned>(v);
    else {
      std::fprintf(stderr, "usage: mp_leftovers [--tries N] [--ranks N] [--max-delay-ms N] [--seed N]\n");
      return 2;
    }
  }
  std::printf("mp_leftovers: %d tries, %d ranks, kill after 0..%d ms, seed %u\n", tries, nranks, maxDelayMs, seed);
  std::mt19937 rng(seed);
  setenv("HOCCL_TIMEOUT", "20", 1);
  Outcome calibration = runJob(nranks, -1, rng);
  const int span = std::max(maxDelayMs, static_cast<int>(calibration.initSeconds * 1200));
  std::printf("calibration: init of %d ranks took %.0f ms; kills fall in 0..%d ms\n", nranks,
              calibration.initSeconds * 1000, span);
  int total = calibration.leftovers, duringInit = 0, heldMemory = 0, triesWithLeftovers = 0;
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < tries; ++t) {
    int delay = std::uniform_int_distribution<int>(0, span)(rng);
    Outcome o = runJob(nranks, delay, rng);
    if (o.inited < nranks) ++duringInit;
    if (o.heldMemory) ++heldMemory;
    std::printf(
        "try %2d: killed after %4d ms, %d of %d ranks had finished init, shared memory %s, %d entries left in "
        "/dev/shm\n",
        t, delay, o.inited, nranks, o.heldMemory ? "held" : "not held", o.leftovers);
    total += o.leftovers;
    if (o.leftovers > 0) ++triesWithLeftovers;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "mp_leftovers: %d of %d tries killed the job during init, %d while it held shared memory; %d entries "
      "left in /dev/shm in %d tries (%.1f s)\n",
      duringInit, tries, heldMemory, total, triesWithLeftovers, secs);
  return total == 0 ? 0 : 1;
}
