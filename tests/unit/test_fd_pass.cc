// cuMem POSIX file descriptors passed between two processes over a Unix socket (transports/cuda_ipc/fd_pass.h) on the
// simulated device, whose exportFd/importFd are the driver calls' stand-ins over memfd: every byte of each side's
// area read and written by the other through the mapping; a peer that dies in the middle of the exchange, as exporter
// and as importer, gives an error naming it; a descriptor whose allocation is smaller than announced is not mapped;
// and the direct channel over both kinds of handle.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/device/sim_device.h"
#include "transports/cuda_ipc/fd_pass.h"

using namespace hoccl;
using transport::cuda_ipc::FdClient;
using transport::cuda_ipc::FdOffer;
using transport::cuda_ipc::FdServer;

namespace {

/// What one side tells the other over the test's pipe (the channel's Hello carries the same).
struct Announce {
  int pid = 0;
  uint64_t nonce = 0;
  uint64_t size = 0, offset = 0;
};

// The test's own pipe between the two processes (throws when the other side has gone).
void writeAll(int fd, const void* p, size_t n) {
  if (write(fd, p, n) != static_cast<ssize_t>(n)) throw Error(hocclSystemError, "the test pipe's other end is gone");
}
void readAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) throw Error(hocclSystemError, "the test pipe's other end is gone");
    got += static_cast<size_t>(r);
  }
}

// Byte i of rank r's area, pass k (0: written by its owner, 1: written by the peer through its mapping).
unsigned char pattern(int r, int k, size_t i) { return static_cast<unsigned char>((i * 131 + r * 17 + k * 59) >> 1); }

// Polls until fn() says done, for at most 20 s.
void until(const std::function<bool()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  while (!fn()) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20))
      throw Error(hocclTimeout, "the descriptor exchange did not finish in 20 s");
    usleep(200);
  }
}

// One side of the full exchange: rank `me` exports an area of `bytes` (odd), passes its descriptor and fetches the
// peer's; checks every byte the peer wrote, then writes every byte of the peer's area. Returns "" or what was wrong.
std::string exchangeSide(int me, int in, int out, size_t bytes) {
  const int peer = 1 - me;
  auto dev = device::makeSimDevice();
  char* mine = static_cast<char*>(dev->mallocShareable(bytes + 40)) + 40;  // an offset inside the allocation
  std::vector<unsigned char> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = pattern(me, 0, i);
  dev->memcpy(mine, host.data(), bytes);

  device::IpcHandle where;
  net::Fd fd(dev->exportFd(mine, &where));
  const uint64_t nonce = transport::cuda_ipc::fdNonce();
  FdServer server(me, peer, nonce);
  Announce a{getpid(), nonce, where.size, where.offset};
  writeAll(out, &a, sizeof a);
  Announce theirs;
  readAll(in, &theirs, sizeof theirs);

  FdClient client(me, peer, theirs.pid, theirs.nonce);
  FdOffer offer;
  net::Fd got;
  bool served = false, fetched = false;
  until([&] {
    if (!served)
      served = server.poll(fd.get(),
                           FdOffer{transport::cuda_ipc::kFdOfferMagic, me, peer, nonce, where.size, where.offset},
                           theirs.pid);
    if (!fetched) fetched = client.poll(&offer, &got);
    return served && fetched;
  });
  // Both sides agree on the sizes before the mapping is used.
  if (offer.rank != peer || offer.peer != me || offer.nonce != theirs.nonce || offer.size != theirs.size ||
      offer.offset != theirs.offset)
    return "the offer does not match the announcement";
  char* mapped = static_cast<char*>(dev->importFd(got.get(), offer.size, offer.offset));
  got.reset();

  std::vector<unsigned char> seen(bytes);
  dev->memcpy(seen.data(), mapped, bytes);
  for (size_t i = 0; i < bytes; ++i)
    if (seen[i] != pattern(peer, 0, i)) return "byte " + std::to_string(i) + " of the peer's area differs";
  char go = 0;
  writeAll(out, &go, 1);  // both have read before either writes
  readAll(in, &go, 1);
  for (size_t i = 0; i < bytes; ++i) host[i] = pattern(peer, 1, i);
  dev->memcpy(mapped, host.data(), bytes);
  writeAll(out, &go, 1);
  readAll(in, &go, 1);
  dev->memcpy(seen.data(), mine, bytes);
  for (size_t i = 0; i < bytes; ++i)
    if (seen[i] != pattern(me, 1, i)) return "byte " + std::to_string(i) + " the peer wrote here differs";
  dev->closeHandle(mapped);
  dev->free(mine - 40);
  return "";
}

/// A child process running fn (its exit status: 0 when fn returned "", else 1 after printing it).
pid_t spawn(const std::function<std::string()>& fn) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string err;
    try {
      err = fn();
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (!err.empty()) std::fprintf(stderr, "child: %s\n", err.c_str());
    _exit(err.empty() ? 0 : 1);
  }
  return pid;
}

int reap(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Pipes {
  int toChild[2], toParent[2];
  Pipes() { REQUIRE((pipe(toChild) == 0 && pipe(toParent) == 0)); }
  ~Pipes() {
    for (int f : {toChild[0], toChild[1], toParent[0], toParent[1]})
      if (f >= 0) close(f);
  }
};

}  // namespace

TEST_CASE("cuMem fd passing: two processes map each other's area, every byte both ways", "[cuda_ipc_fd]") {
  const size_t bytes = GENERATE(size_t{1}, size_t{4095}, size_t{3 * 65536 + 7});
  Pipes p;
  const pid_t child = spawn([&] {
    close(p.toChild[1]);  // so that either side sees the other's exit as the end of its pipe
    close(p.toParent[0]);
    return exchangeSide(1, p.toChild[0], p.toParent[1], bytes);
  });
  close(p.toChild[0]);
  close(p.toParent[1]);
  p.toChild[0] = p.toParent[1] = -1;
  std::string err;
  try {
    err = exchangeSide(0, p.toParent[0], p.toChild[1], bytes);
  } catch (const std::exception& e) {
    err = e.what();
  }
  CHECK(err == "");
  if (!err.empty()) kill(child, SIGKILL);  // it may wait for this side
  CHECK(reap(child) == 0);
}

TEST_CASE("cuMem fd passing: an exporter that dies before passing its descriptor is named", "[cuda_ipc_fd]") {
  const bool connectFirst = GENERATE(true, false);  // dies after the importer connected, or before
  Pipes p;
  const pid_t child = spawn([&]() -> std::string {
    auto dev = device::makeSimDevice();
    void* area = dev->mallocShareable(4096);
    device::IpcHandle where;
    net::Fd fd(dev->exportFd(area, &where));
    const uint64_t nonce = transport::cuda_ipc::fdNonce();
    FdServer server(1, 0, nonce);
    Announce a{getpid(), nonce, where.size, where.offset};
    writeAll(p.toParent[1], &a, sizeof a);
    char go = 0;
    readAll(p.toChild[0], &go, 1);
    _exit(3);  // dies with the listener open and the descriptor never passed
  });
  Announce a;
  readAll(p.toParent[0], &a, sizeof a);
  std::unique_ptr<FdClient> client;
  if (connectFirst) client = std::make_unique<FdClient>(0, 1, a.pid, a.nonce);
  char go = 1;
  writeAll(p.toChild[1], &go, 1);
  siginfo_t si{};
  REQUIRE(waitid(P_PID, child, &si, WEXITED | WNOWAIT) == 0);  // dead but not reaped: a zombie, as a peer may be
  try {
    if (!client) client = std::make_unique<FdClient>(0, 1, a.pid, a.nonce);
    FdOffer offer;
    net::Fd got;
    until([&] { return client->poll(&offer, &got); });
    FAIL("a descriptor arrived from a dead process");
  } catch (const Error& e) {
    CHECK(e.code() == hocclRemoteError);
    CHECK_THAT(e.what(), Catch::Contains("rank 1 (pid " + std::to_string(a.pid) + ") exited before passing"));
    CHECK_THAT(e.what(), Catch::Contains("rank 0:"));
  }
  CHECK(reap(child) == 3);
}

TEST_CASE("cuMem fd passing: an importer that dies before receiving the descriptor is named", "[cuda_ipc_fd]") {
  const bool connectFirst = GENERATE(true, false);  // it dies connected (the connection waits in the backlog), or not
  auto dev = device::makeSimDevice();
  void* area = dev->mallocShareable(4096);
  device::IpcHandle where;
  net::Fd fd(dev->exportFd(area, &where));
  const uint64_t nonce = transport::cuda_ipc::fdNonce();
  FdServer server(0, 1, nonce);
  Pipes p;
  const pid_t child = spawn([&]() -> std::string {
    if (connectFirst) FdClient client(1, 0, getppid(), nonce);  // connects, then goes away with the connection
    _exit(4);
  });
  CHECK(reap(child) == 4);
  try {
    const FdOffer offer{transport::cuda_ipc::kFdOfferMagic, 0, 1, nonce, where.size, where.offset};
    until([&] { return server.poll(fd.get(), offer, child); });
    FAIL("the descriptor was passed to a dead process");
  } catch (const Error& e) {
    CHECK(e.code() == hocclRemoteError);
    CHECK_THAT(e.what(), Catch::Contains("rank 1 (pid " + std::to_string(child) + ")"));
    CHECK_THAT(e.what(), Catch::Contains(connectFirst ? "dropped the Unix socket connection before receiving"
                                                      : "exited before fetching"));
  }
  dev->free(area);
}

TEST_CASE("cuMem fd passing: a stranger's connection is refused, the peer still gets the descriptor", "[cuda_ipc_fd]") {
  auto dev = device::makeSimDevice();
  void* area = dev->mallocShareable(8192);
  device::IpcHandle where;
  net::Fd fd(dev->exportFd(area, &where));
  const uint64_t nonce = transport::cuda_ipc::fdNonce();
  FdServer server(0, 1, nonce);
  const FdOffer offer{transport::cuda_ipc::kFdOfferMagic, 0, 1, nonce, where.size, where.offset};
  Pipes p;
  // The stranger (this process) connects first; the peer (the child) is the only pid allowed.
  FdClient stranger(2, 0, getpid(), nonce);
  const pid_t child = spawn([&]() -> std::string {
    FdClient client(1, 0, getppid(), nonce);
    FdOffer got;
    net::Fd gotFd;
    until([&] { return client.poll(&got, &gotFd); });
    auto d = device::makeSimDevice();
    void* m = d->importFd(gotFd.get(), got.size, got.offset);
    d->closeHandle(m);
    return got.size == 8192 ? "" : "wrong size";
  });
  until([&] { return server.poll(fd.get(), offer, child); });
  CHECK(reap(child) == 0);
  FdOffer none;
  net::Fd noneFd;
  CHECK_THROWS_AS(until([&] { return stranger.poll(&none, &noneFd); }), Error);  // closed without a descriptor
  CHECK(!noneFd);
  dev->free(area);
}

TEST_CASE("cuMem fd import: a descriptor smaller than announced is not mapped", "[cuda_ipc_fd]") {
  auto dev = device::makeSimDevice();
  void* area = dev->mallocShareable(4096);
  device::IpcHandle where;
  net::Fd fd(dev->exportFd(area, &where));
  REQUIRE(where.size == 4096);
  try {
    dev->importFd(fd.get(), 2 * where.size, 0);
    FAIL("a mapping past the allocation's end was made");
  } catch (const Error& e) {
    CHECK(e.code() == hocclInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("holds 4096 bytes, but 8192 bytes"));
  }
  void* plain = dev->malloc(4096);
  CHECK(!dev->shareable(plain));
  CHECK(dev->shareable(area));
  CHECK_THROWS_AS(dev->exportFd(plain, &where), Error);  // only cuMem memory exports a descriptor
  dev->free(plain);
  dev->free(area);
}
