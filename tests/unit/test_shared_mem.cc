// Zero copy's building blocks (issue 16): the shared-memory allocator (kernels/shared_mem.h), a communicator's
// registration table (kernels/registrations.h) and the cache of the peers' mappings (transports/shm/shm_peer_maps.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/memory.h"
#include "kernels/registrations.h"
#include "kernels/shared_mem.h"
#include "transports/shm/shm_peer_maps.h"

using namespace hoccl;
using namespace hoccl::kernels;

namespace {
hocclResult_t codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return hocclSuccess;
}
}  // namespace

TEST_CASE("shared blocks: page aligned, sealed, found, pinned, freed once", "[shared_mem]") {
  char* p = static_cast<char*>(sharedAlloc(10000));
  REQUIRE(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  CHECK(sharedBlockBytes(p + 5) == 12288);
  CHECK(classify(p + 100) == MemoryKind::HostShared);
  int local = 0;
  CHECK(classify(&local) == MemoryKind::Host);
  SharedRef ref;
  REQUIRE(findShared(p + 4096, 100, &ref));
  CHECK(ref.offset == 4096);
  CHECK(ref.fileBytes == 12288);
  CHECK_FALSE(findShared(p + 12000, 1000, nullptr));  // runs past the block
  // The file is sealed against shrinking: a peer's mapping can never fault.
  const int fd = open(("/proc/self/fd/" + std::to_string(ref.fd)).c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  CHECK((fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) != 0);
  CHECK(ftruncate(fd, 0) != 0);
  close(fd);
  {
    SharedPin pin(p + 10);
    CHECK(codeOf([&] { sharedFree(p); }) == hocclInvalidUsage);
  }
  CHECK(codeOf([&] { sharedFree(p + 4096); }) == hocclInvalidArgument);  // not the start of a block
  sharedFree(p);
  CHECK(codeOf([&] { sharedFree(p); }) == hocclInvalidArgument);
  CHECK_FALSE(findShared(p, 1, nullptr));
  sharedFree(nullptr);
  void* z = sharedAlloc(0);
  CHECK(sharedBlockBytes(z) == 4096);
  sharedFree(z);
}

TEST_CASE("registrations: cover, pin, remove", "[shared_mem]") {
  Registrations regs;
  std::vector<char> buf(1000);
  void* h = regs.add(buf.data(), 1000);
  CHECK(regs.covers(buf.data() + 10, 990));
  CHECK_FALSE(regs.covers(buf.data() + 10, 991));
  {
    Registrations::Pin pin(regs, buf.data() + 100, 10);
    CHECK(pin.covered());
    CHECK(codeOf([&] { regs.remove(h); }) == hocclInvalidUsage);
    CHECK(regs.size() == 1);
  }
  Registrations::Pin none(regs, buf.data() + 999, 2);
  CHECK_FALSE(none.covered());
  regs.remove(h);
  CHECK(regs.size() == 0);
  CHECK(codeOf([&] { regs.remove(h); }) == hocclInvalidArgument);
}

TEST_CASE("peer maps: a peer's block through /proc/pid/fd, checked and cached", "[shared_mem]") {
  // The "peer" is a child that inherits the block's descriptor and holds it after this process frees its copy.
  char* p = static_cast<char*>(sharedAlloc(8192));
  for (int i = 0; i < 8192; ++i) p[i] = static_cast<char>(i * 7);
  SharedRef ref;
  REQUIRE(findShared(p, 8192, &ref));
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  sharedFree(p);  // only the child holds the file now
  transport::ConnectContext ctx;
  ctx.nranks = 2;
  ctx.peers.resize(2);
  ctx.peers[0].pid = getpid();
  ctx.peers[1].pid = child;
  {
    transport::shm::PeerMaps maps(ctx);
    transport::shm::SharedDesc d{ref.fd, 0, ref.inode, ref.fileBytes, 4096};
    const char* got = maps.map(1, d, 0, 4096, "test");
    for (int i = 0; i < 4096; ++i) REQUIRE(got[i] == static_cast<char>((i + 4096) * 7));
    CHECK(maps.map(1, d, 0, 100, "test") == got);  // cached
    CHECK(maps.held() == 1);
    CHECK(codeOf([&] { maps.map(1, d, 0, 4097, "test"); }) == hocclInvalidUsage);  // past the end
    transport::shm::SharedDesc wrong = d;
    wrong.inode += 1;  // another file under the same number: the old mapping goes, the new one is refused
    CHECK(codeOf([&] { maps.map(1, wrong, 0, 10, "test"); }) == hocclSystemError);
    CHECK(maps.held() == 0);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}
