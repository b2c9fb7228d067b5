/// @file abi_env.cc
/// NCCL's environment names through hoccl's libnccl.so.2, compiled against NVIDIA's nccl.h:
/// - NCCL_COMM_ID (+ NCCL_AUTH_TOKEN): three ranks each call ncclGetUniqueId themselves (nothing is passed around),
///   rank 0 serves the root on the fixed loopback address, and an all-reduce gives the right answer;
/// - NCCL_DEBUG / NCCL_DEBUG_FILE set after the library was loaded take effect through ncclResetDebugInit: the
///   warning of a bad call lands in the file named by the pattern (%p = pid).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>

#include "abi_util.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit is deprecated in nccl.h

using abi::check;
using abi::expectResult;

namespace {

// A loopback port that was free a moment ago (the kernel picks it).
int freeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("socket");
    std::exit(1);
  }
  close(fd);
  return ntohs(a.sin_port);
}

void commIdRank(int r) {
  ncclUniqueId id;
  if (!expectResult(ncclGetUniqueId(&id), ncclSuccess, "ncclGetUniqueId with NCCL_COMM_ID")) return;
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 3, id, r), ncclSuccess, "ncclCommInitRank with NCCL_COMM_ID")) return;
  std::vector<int64_t> send(333, r + 1), recv(333, 0);
  expectResult(ncclAllReduce(send.data(), recv.data(), send.size(), ncclInt64, ncclSum, comm, nullptr), ncclSuccess,
               "ncclAllReduce");
  check(recv[0] == 6 && recv[332] == 6, "NCCL_COMM_ID allreduce gave %lld", static_cast<long long>(recv[0]));
  expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
}

void debugFile(const std::string& dir) {
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", (dir + "/nccl.%p.log").c_str(), 1);
  ncclResetDebugInit();
  expectResult(ncclGetVersion(nullptr), ncclInvalidArgument, "ncclGetVersion(NULL)");
  std::ifstream in(dir + "/nccl." + std::to_string(getpid()) + ".log");
  std::stringstream text;
  text << in.rdbuf();
  check(!text.str().empty(), "NCCL_DEBUG_FILE %s/nccl.<pid>.log was not written", dir.c_str());
  check(text.str().find("WARN") != std::string::npos && text.str().find("ncclGetVersion") != std::string::npos,
        "the log file lacks the warning: '%s'", text.str().c_str());
}

}  // namespace

int main() {
  const std::string port = std::to_string(freeLoopbackPort());
  setenv("NCCL_COMM_ID", ("127.0.0.1:" + port).c_str(), 1);
  setenv("NCCL_AUTH_TOKEN", "abi-env-test-0123456789abcdef", 1);
  int bad = abi::runRanks(3, 90, [](int r, const ncclUniqueId&) { commIdRank(r); });
  unsetenv("NCCL_COMM_ID");
  unsetenv("NCCL_AUTH_TOKEN");

  char dirTemplate[] = "/tmp/hoccl-abi-env-XXXXXX";
  const char* dir = mkdtemp(dirTemplate);
  if (!dir) {
    std::perror("mkdtemp");
    return 1;
  }
  bad += abi::runRanks(1, 30, [&](int, const ncclUniqueId&) { debugFile(dir); });
  std::system((std::string("rm -rf ") + dir).c_str());
  std::printf("%d passed, %d failed\n", 4 - bad, bad);
  return bad == 0 ? 0 : 1;
}
