// HOCCL_MAX_CONNS over shm: the segments of closed connections leave the process (see shm_release.h). The segments
// are read from /proc/self/maps: shared files named "/memfd:hoccl-<job>-<from>-<to>[.<k>] (deleted)" (shm_file.h,
// ShmTransport::segmentName); the arena ("-arena") and other files do not match.
#include "shm_release.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "harness.h"

namespace hoccl::test {

std::map<int, long> shmSegmentsMapped(int rank) {
  static const std::regex segment(R"(^([0-9a-f]+)-([0-9a-f]+) .* /memfd:hoccl-.*-(\d+)-(\d+)(\.\d+)? \(deleted\)$)");
  std::map<int, long> bytes;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::smatch m;
  while (std::getline(maps, line)) {
    if (!std::regex_match(line, m, segment)) continue;
    const int from = std::stoi(m[3]), to = std::stoi(m[4]);
    if (from != rank && to != rank) continue;
    bytes[from == rank ? to : from] += static_cast<long>(std::stoul(m[2], nullptr, 16) - std::stoul(m[1], nullptr, 16));
  }
  return bytes;
}

namespace {

std::vector<double> ringData(int from, int round, size_t count) {
  std::mt19937_64 rng(static_cast<uint64_t>(from) * 1000003 + static_cast<uint64_t>(round));
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  std::vector<double> v(count);
  for (double& x : v) x = u(rng);
  return v;
}

std::string describe(const std::map<int, long>& mapped) {
  std::string s;
  long total = 0;
  for (auto& [peer, b] : mapped) {
    s += (s.empty() ? "" : ", ") + std::to_string(peer);
    total += b;
  }
  return std::to_string(mapped.size()) + " peer(s) [" + s + "], " + std::to_string(total / 1024) + " KiB";
}

}  // namespace

int checkShmReleased(hocclComm_t comm, int rank, int n) {
  if (n < 2) return 0;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const std::map<int, long> before = shmSegmentsMapped(rank);
  for (int k = 0; k < 2 * n + 1; ++k) {
    const size_t count = 1001 + 2 * static_cast<size_t>(k);
    std::vector<double> out = ringData(rank, k, count), in(count, -1.0);
    MP_CHECK(rank, hocclGroupStart());
    MP_CHECK(rank, hocclSend(out.data(), count, hocclDouble, next, comm, nullptr));
    MP_CHECK(rank, hocclRecv(in.data(), count, hocclDouble, prev, comm, nullptr));
    MP_CHECK(rank, hocclGroupEnd());
    if (in != ringData(prev, k, count))
      return fail(rank, "ring send/recv round " + std::to_string(k) + ": wrong data from rank " + std::to_string(prev));
  }
  const std::map<int, long> after = shmSegmentsMapped(rank);
  std::printf("rank %d: shm segments mapped after the matrix: %s; after %d ring rounds: %s\n", rank,
              describe(before).c_str(), 2 * n + 1, describe(after).c_str());
  std::fflush(stdout);
  for (auto& [peer, b] : after)
    if (peer != next && peer != prev)
      return fail(rank, "still maps the shm segments of rank " + std::to_string(peer) +
                            ", which no call has used for " + std::to_string(2 * n + 1) +
                            " calls (HOCCL_MAX_CONNS should have closed it): " + describe(after));
  if (after.empty()) return fail(rank, "maps no shm segment at all: the ring rounds did not run over shm");
  return 0;
}

}  // namespace hoccl::test
