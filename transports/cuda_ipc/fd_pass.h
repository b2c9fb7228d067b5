/// @file fd_pass.h
/// Passing a cuMem allocation's POSIX file descriptor (Device::exportFd) from one rank to another on the same host,
/// over a Unix domain socket with SCM_RIGHTS: the alternative to legacy IPC handles that cuda_ipc_channel.h uses when
/// a receive area is cuMem memory (Device::mallocShareable).
///
/// The exporter listens (FdServer) on an abstract socket named after its pid and a random nonce, both published in
/// its Hello over the wire; the importer connects (FdClient) after reading that Hello, and receives one FdOffer (the
/// exporter's rank, the importer's rank, the nonce, the allocation's size and the area's offset) with the descriptor
/// attached. The importer checks the offer against the Hello before mapping anything, so both sides agree on the
/// sizes (the Hello's area must equal the offer's). The exporter checks the connecting process's credentials
/// (SO_PEERCRED: the pid published by the peer, this user), so no other process gets the memory.
///
/// Both sides are non-blocking (poll() from the channel's progress). A peer that dies mid-exchange is reported as
/// hocclRemoteError naming it (its pid gone: kill(pid, 0) says ESRCH); a failure with the peer alive (for example
/// ranks in different network namespaces, whose abstract sockets do not meet) is hocclSystemError, which the channel
/// turns into the staging fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/socket.h"

namespace hoccl::transport::cuda_ipc {

/// "HocFd": the first bytes of an FdOffer.
constexpr uint64_t kFdOfferMagic = 0x6446636f48ull;

/// What travels with the descriptor.
struct FdOffer {
  uint64_t magic = kFdOfferMagic;  ///< kFdOfferMagic
  int32_t rank = -1;               ///< the exporter's rank
  int32_t peer = -1;               ///< the importer's rank
  uint64_t nonce = 0;              ///< the exporter's nonce (from its Hello)
  uint64_t size = 0;               ///< bytes of the exported allocation
  uint64_t offset = 0;             ///< the area's offset inside it
};

/// The abstract socket name (without the leading NUL) of the exporter with this pid and nonce.
std::string fdSocketName(int pid, uint64_t nonce);

/// A fresh random nonce for a socket name (never 0).
uint64_t fdNonce();

/// The exporter's side: listens at construction, passes one descriptor to the one peer process allowed to connect.
class FdServer {
 public:
  /// Listens on fdSocketName(getpid(), nonce); throws hocclSystemError when it cannot.
  FdServer(int rank, int peer, uint64_t nonce);
  /// Non-blocking. Accepts a connection from peerPid (a stranger is refused and logged) and sends it offer with fd
  /// attached; true once sent. Throws hocclRemoteError when peerPid has exited or dropped the connection first.
  bool poll(int fd, const FdOffer& offer, int peerPid);
  /// The descriptor to wait on (the listener, then the accepted connection).
  int waitFd() const;

 private:
  int rank_, peer_;
  net::Fd listener_, conn_;
};

/// The importer's side: connects to the exporter's socket and receives its offer and descriptor.
class FdClient {
 public:
  /// Connects to fdSocketName(peerPid, nonce). Throws hocclRemoteError when peerPid has exited, hocclSystemError
  /// when the socket cannot be reached although it is alive.
  FdClient(int rank, int peer, int peerPid, uint64_t nonce);
  /// Non-blocking: true once the offer and its descriptor arrived (*fd then owns it). Throws as the constructor
  /// does when the peer closes the connection first, and hocclSystemError when the message has no descriptor.
  bool poll(FdOffer* offer, net::Fd* fd);
  /// The descriptor to wait on.
  int waitFd() const { return conn_.get(); }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;
  int rank_, peer_, peerPid_;
  net::Fd conn_;
  FdOffer got_{};
  size_t fill_ = 0;
  net::Fd passed_;
};

}  // namespace hoccl::transport::cuda_ipc
