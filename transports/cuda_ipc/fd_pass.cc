/*
 * Passing a cuMem POSIX file descriptor between two processes of one host (fd_pass.h).
 *
 *   exporter (FdServer)                              importer (FdClient)
 *   listen on "\0hoccl-cuda-ipc-<pid>-<nonce>"
 *   Hello over the wire (pid, nonce, area) ------->  reads the Hello
 *                                          <-------  connect (the abstract socket of that pid and nonce)
 *   accept; SO_PEERCRED pid == the peer's Hello pid
 *   sendmsg(FdOffer, SCM_RIGHTS fd)        ------->  recvmsg: the offer and a descriptor of its own
 *                                                    checks the offer against the Hello, then maps
 *
 * Everything is non-blocking: the channel calls poll() from its progress until it returns true. When a step fails,
 * the peer's pid decides what it means: gone (ESRCH) is the peer's death, reported naming it; alive is a local
 * inability (the channel falls back to staging).
 */
#include "transports/cuda_ipc/fd_pass.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"

namespace hoccl::transport::cuda_ipc {
namespace {

// True when pid has exited: no such process, or a zombie that its parent has not reaped yet.
bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char line[512] = {};
  const size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  const char* close = static_cast<const char*>(memrchr(line, ')', n));  // after "pid (comm)" comes the state
  return close && close + 2 < line + n && (close[2] == 'Z' || close[2] == 'X');
}

sockaddr_un abstractAddress(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // sun_path[0] = 0: an abstract name, gone with the socket (nothing to clean up in the file system).
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// A message header for one buffer and room for one passed descriptor (sendmsg and recvmsg alike).
constexpr size_t kOneFdControl = CMSG_SPACE(sizeof(int));
msghdr oneFdHeader(iovec* iov, char* control) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = kOneFdControl;
  return msg;
}

}  // namespace

std::string fdSocketName(int pid, uint64_t nonce) { return fmt::format("hoccl-cuda-ipc-{}-{:016x}", pid, nonce); }

uint64_t fdNonce() {
  std::random_device rd;
  uint64_t n = 0;
  while (n == 0) n = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return n;
}

FdServer::FdServer(int rank, int peer, uint64_t nonce) : rank_(rank), peer_(peer) {
  listener_ = net::Fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener_)
    throwSystemError(fmt::format("rank {}: a Unix socket for rank {}'s cuMem descriptor", rank, peer), errno);
  socklen_t len = 0;
  const std::string name = fdSocketName(getpid(), nonce);
  const sockaddr_un a = abstractAddress(name, &len);
  if (bind(listener_.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 || listen(listener_.get(), 4) != 0)
    throwSystemError(fmt::format("rank {}: listening on the Unix socket @{} for rank {}", rank, name, peer), errno);
}

int FdServer::waitFd() const { return conn_ ? conn_.get() : listener_.get(); }

bool FdServer::poll(int fd, const FdOffer& offer, int peerPid) {
  while (!conn_) {
    net::Fd c(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c) {
      const int err = errno;
      if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED)
        throwSystemError(fmt::format("rank {}: accepting rank {}'s connection for its cuMem descriptor", rank_, peer_),
                         err);
      if (processGone(peerPid))
        throwRemoteError(
            fmt::format("rank {}: rank {} (pid {}) exited before fetching the cuMem file descriptor of "
                        "rank {}'s device receive area (its own output says why)",
                        rank_, peer_, peerPid, rank_));
      return false;
    }
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.pid != peerPid ||
        cred.uid != getuid()) {
      HOCCL_WARN(kNet,
                 "rank {}: refused a connection to the cuMem descriptor socket for rank {} from pid {} uid {} "
                 "(expected rank {}'s pid {} and this user)",
                 rank_, peer_, cred.pid, cred.uid, peer_, peerPid);
      continue;
    }
    conn_ = std::move(c);
  }
  FdOffer o = offer;
  iovec iov{&o, sizeof o};
  alignas(cmsghdr) char control[kOneFdControl] = {};
  msghdr msg = oneFdHeader(&iov, control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  // A fresh connection's buffer takes the whole small message at once (a stream socket never splits it here).
  const ssize_t n = sendmsg(conn_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n == static_cast<ssize_t>(sizeof o)) {
    conn_.reset();
    listener_.reset();  // one descriptor per channel: nobody else may connect
    return true;
  }
  const int err = n < 0 ? errno : EPROTO;
  if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return false;
  if (err == EPIPE || err == ECONNRESET || processGone(peerPid))
    throwRemoteError(
        fmt::format("rank {}: rank {} (pid {}) dropped the Unix socket connection before receiving the "
                    "cuMem file descriptor of rank {}'s device receive area (it exited or failed; its "
                    "own output says why)",
                    rank_, peer_, peerPid, rank_));
  throwSystemError(fmt::format("rank {}: passing a cuMem file descriptor to rank {} (pid {})", rank_, peer_, peerPid),
                   err);
}

FdClient::FdClient(int rank, int peer, int peerPid, uint64_t nonce) : rank_(rank), peer_(peer), peerPid_(peerPid) {
  conn_ = net::Fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!conn_)
    throwSystemError(fmt::format("rank {}: a Unix socket to fetch rank {}'s cuMem descriptor", rank, peer), errno);
  socklen_t len = 0;
  const std::string name = fdSocketName(peerPid, nonce);
  const sockaddr_un a = abstractAddress(name, &len);
  for (int tries = 0;; ++tries) {
    if (connect(conn_.get(), reinterpret_cast<const sockaddr*>(&a), len) == 0) return;
    const int err = errno;
    // A full backlog (EAGAIN) clears as soon as the peer accepts; a few quick retries are enough.
    if ((err == EAGAIN || err == EINTR) && tries < 1000) {
      usleep(1000);
      continue;
    }
    fail(fmt::format("connecting to its Unix socket @{}", name), err);
  }
}

void FdClient::fail(const std::string& what, int err) const {
  if (processGone(peerPid_))
    throwRemoteError(
        fmt::format("rank {}: rank {} (pid {}) exited before passing the cuMem file descriptor of its "
                    "device receive area ({}; its own output says why)",
                    rank_, peer_, peerPid_, what));
  throw Error(hocclSystemError,
              fmt::format("rank {}: fetching rank {}'s (pid {}) cuMem file descriptor failed: {}: {} (ranks in "
                          "different network or pid namespaces cannot pass descriptors; HOCCL_IPC_HANDLE=legacy "
                          "avoids it)",
                          rank_, peer_, peerPid_, what, err ? std::strerror(err) : "the peer closed the connection"));
}

bool FdClient::poll(FdOffer* offer, net::Fd* fd) {
  while (fill_ < sizeof got_) {
    iovec iov{reinterpret_cast<char*>(&got_) + fill_, sizeof got_ - fill_};
    alignas(cmsghdr) char control[kOneFdControl] = {};
    msghdr msg = oneFdHeader(&iov, control);
    const ssize_t n = recvmsg(conn_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return false;
      fail("receiving the descriptor", err);
    }
    if (n == 0) fail("the connection closed before the descriptor arrived", 0);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got = -1;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        if (!passed_) passed_ = net::Fd(got);
        else close(got);  // only one is expected
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) fail("the descriptor's control message was cut short", EPROTO);
    fill_ += static_cast<size_t>(n);
  }
  if (!passed_)
    throw Error(hocclSystemError,
                fmt::format("rank {}: rank {} (pid {}) sent its cuMem offer without a file descriptor", rank_, peer_,
                            peerPid_));
  *offer = got_;
  *fd = std::move(passed_);
  conn_.reset();
  return true;
}

}  // namespace hoccl::transport::cuda_ipc
