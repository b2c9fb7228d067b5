/// @file socket.h
/// Small RAII helpers over BSD sockets used by the bootstrap and the tcp transport: addresses, listeners, connects
/// with retry until a deadline, whole-buffer reads and writes with deadlines, and the job secret (the handshake that
/// proves it on every connection is base/boot/handshake.h).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace hoccl::net {

/// Monotonic clock for deadlines.
using Clock = std::chrono::steady_clock;
/// A point in time after which a wait fails.
using Deadline = Clock::time_point;

/// The deadline HOCCL_TIMEOUT seconds from now (default 300 s).
Deadline defaultDeadline();

/// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  /// Takes ownership of fd.
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  /// The raw descriptor (-1 if none).
  int get() const { return fd_; }
  /// True if a descriptor is held.
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives up ownership.
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  /// Closes the descriptor, if any.
  void reset();

 private:
  int fd_ = -1;
};

/// An IPv4 or IPv6 socket address.
struct Address {
  sockaddr_storage storage{};  ///< the raw address
  socklen_t length = 0;        ///< valid bytes of storage
  /// "host:port" ("[v6]:port" for IPv6).
  std::string toString() const;
  /// The port number.
  int port() const;
  /// Parses "host:port" (host may be a name, an IPv4 or a bracketed IPv6 address); throws InvalidArgument.
  static Address parse(const std::string& hostPort);
};

/// The address this host should be reached at: the first interface matching HOCCL_SOCKET_IFNAME (NCCL syntax:
/// prefix list, ^ excludes, = exact), else `preferredIfname` when it is up (the transports pass the NIC nearest to the
/// rank's NUMA node), else the first non-loopback up interface, else loopback. Port 0.
Address localAddress(const std::string& preferredIfname = std::string());

/// Listens on addr (port 0 picks one); returns the socket and sets *bound to the real address.
Fd listenOn(const Address& addr, Address* bound);
/// Accepts one connection, waiting until deadline; throws hocclTimeout when the deadline passes.
Fd acceptUntil(int listenFd, Deadline deadline);
/// Connects to addr, retrying refused connections until deadline; throws hocclTimeout with `what` when the deadline
/// passes.
Fd connectUntil(const Address& addr, Deadline deadline, const std::string& what);

/// Writes all bytes (blocking socket or not), failing at the deadline or when the peer closes.
void writeAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what);
/// Reads exactly bytes, failing at the deadline or when the peer closes.
void readAll(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what);
/// Sets O_NONBLOCK.
void setNonBlocking(int fd);
/// Sets TCP_NODELAY (a no-op on a socket that is not TCP): every small message goes out at once. Control
/// connections need it: without it a rank's second small write waits for the peer's delayed ACK (40 ms on Linux).
void setNoDelay(int fd);
/// Sets TCP_NODELAY and large buffers.
void tuneTcp(int fd);

/// The 128-bit secret of a job.
using Secret = std::array<uint8_t, 16>;
/// A fresh random secret from the OS.
Secret randomSecret();

}  // namespace hoccl::net
