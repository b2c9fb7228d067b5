// One process of the scaling benchmark (tools/bench/scale): runs THREADS ranks as threads, ranks BASE .. BASE+THREADS-1
// of NRANKS, bootstrapped through HOCCL_COMM_ID / HOCCL_AUTH_TOKEN (rank 0 serves the root). Each rank times its
// init, its first and its last (by default the tenth) all-reduce of COUNT floats (checked against the closed-form sum); once every rank of
// the process has finished its calls, the process counts its open descriptors and reads its resident memory, and
// prints one JSON line: the slowest rank's times, and the descriptors and memory the communicators added (measured
// against the same process before any init). With PEERS > 0, each rank then makes PEERS rounds of send/recv of COUNT
// floats (round j: to rank+j, from rank-j, checked) and one all-reduce of 1 float (every rank is past its rounds), so
// that it touches 2 x PEERS peers (HOCCL_MAX_CONNS then bounds how many stay connected), before the descriptors and
// memory are read.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hoccl/hoccl.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int openFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory stream itself
}

long rssKb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long v = -1;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> v;
      break;
    }
    std::getline(in, key);
  }
  return v;
}

// A reusable count-down: every thread of the process waits until all have arrived.
class Latch {
 public:
  explicit Latch(int n) : left_(n) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(m_);
    if (--left_ == 0) cv_.notify_all();
    else cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int left_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr,
                 "usage: scale_rank THREADS BASE NRANKS COUNT [CALLS=10 [PEERS=0]] (HOCCL_COMM_ID, HOCCL_AUTH_TOKEN "
                 "set)\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]), base = std::atoi(argv[2]), nranks = std::atoi(argv[3]);
  const size_t count = std::strtoull(argv[4], nullptr, 10);
  const int calls = argc >= 6 ? std::max(1, std::atoi(argv[5])) : 10;
  const int sendPeers = argc == 7 ? std::max(0, std::atoi(argv[6])) : 0;
  const int fds0 = openFds();
  const long rss0 = rssKb();
  std::vector<double> init(threads), first(threads), tenth(threads);
  std::vector<int> ok(threads, 0);
  std::vector<int> peers(threads, 0);
  Latch done(threads), measured(threads);
  int fds1 = 0;
  long rss1 = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const int rank = base + t;
      hocclComm_t comm = nullptr;
      double t0 = now();
      hocclResult_t r = hocclCommInitRankFromEnv(&comm, nranks, rank);
      init[t] = now() - t0;
      if (r != hocclSuccess) {
        std::fprintf(stderr, "rank %d: init failed: %s\n", rank, hocclGetLastError(comm));
        std::_Exit(1);
      }
      std::vector<float> buf(count);
      bool good = true;
      for (int i = 0; i < calls; ++i) {
        for (size_t k = 0; k < count; ++k) buf[k] = static_cast<float>(rank % 7 + k % 3);
        double s = now();
        r = hocclAllReduce(buf.data(), buf.data(), count, hocclFloat, hocclSum, comm, nullptr);
        double e = now() - s;
        if (r != hocclSuccess) {
          std::fprintf(stderr, "rank %d: all-reduce failed: %s\n", rank, hocclGetLastError(comm));
          std::_Exit(1);
        }
        if (i == 0) first[t] = e;
        if (i == calls - 1) tenth[t] = e;
        double sum7 = 0;
        for (int q = 0; q < nranks; ++q) sum7 += q % 7;
        for (size_t k = 0; k < count; ++k) good &= buf[k] == static_cast<float>(sum7 + double(k % 3) * nranks);
      }
      for (int j = 1; j <= sendPeers && j < nranks; ++j) {  // send/recv rounds with ranks further away
        const int to = (rank + j) % nranks, from = (rank + nranks - j) % nranks;
        std::vector<float> out(count, static_cast<float>(rank)), in(count, -1.0f);
        hocclGroupStart();
        hocclSend(out.data(), count, hocclFloat, to, comm, nullptr);
        hocclRecv(in.data(), count, hocclFloat, from, comm, nullptr);
        if (hocclGroupEnd() != hocclSuccess) {
          std::fprintf(stderr, "rank %d: send/recv with ranks %d and %d failed: %s\n", rank, to, from,
                       hocclGetLastError(comm));
          std::_Exit(1);
        }
        for (float v : in) good &= v == static_cast<float>(from);
      }
      if (sendPeers > 0) {  // every rank is done with the rounds (a sender may finish before its peer connected)
        float one = 1.0f;
        if (hocclAllReduce(&one, &one, 1, hocclFloat, hocclSum, comm, nullptr) != hocclSuccess) {
          std::fprintf(stderr, "rank %d: the all-reduce after the send/recv rounds failed: %s\n", rank,
                       hocclGetLastError(comm));
          std::_Exit(1);
        }
        good &= one == static_cast<float>(nranks);
      }
      ok[t] = good;
      done.arriveAndWait();
      if (t == 0) {
        fds1 = openFds();
        rss1 = rssKb();
      }
      measured.arriveAndWait();
      hocclCommDestroy(comm);
    });
  for (auto& th : pool) th.join();
  double maxInit = 0, maxFirst = 0, maxTenth = 0;
  int allOk = 1;
  for (int t = 0; t < threads; ++t) {
    maxInit = std::max(maxInit, init[t]);
    maxFirst = std::max(maxFirst, first[t]);
    maxTenth = std::max(maxTenth, tenth[t]);
    allOk &= ok[t];
  }
  std::printf(
      "{\"base\": %d, \"threads\": %d, \"init_s\": %.4f, \"first_ms\": %.3f, \"tenth_ms\": %.3f, \"fds\": %d, "
      "\"rss_kb\": %ld, \"ok\": %d}\n",
      base, threads, maxInit, maxFirst * 1e3, maxTenth * 1e3, fds1 - fds0, rss1 - rss0, allOk);
  return allOk ? 0 : 3;
}
