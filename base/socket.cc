// Socket helpers: every blocking operation waits with poll() against a deadline, so nothing hangs forever.
#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::net {
namespace {

int remainingMillis(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

// Waits until fd is ready for `events`; false on deadline.
bool waitReady(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remainingMillis(deadline));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throwSystemError("poll on socket failed", errno);
    if (Clock::now() >= deadline) return false;
  }
}

bool matchesIfname(const std::string& name, const std::string& spec) {
  if (spec.empty()) return true;
  std::string list = spec;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') {
    exclude = true;
    list.erase(0, 1);
  }
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list.erase(0, 1);
  }
  bool hit = false;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (exact ? name == item : name.rfind(item, 0) == 0) hit = true;
  }
  return exclude ? !hit : hit;
}

}  // namespace

Deadline defaultDeadline() { return Clock::now() + std::chrono::seconds(params::TIMEOUT.get()); }

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Address::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "<no address>";
}

int Address::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

Address Address::parse(const std::string& hostPort) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    auto close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':')
      throwInvalidArgument("address '" + hostPort + "' is not [ipv6]:port");
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    auto colon = hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == hostPort.size())
      throwInvalidArgument("address '" + hostPort + "' is not host:port (for example 10.0.0.1:29500)");
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res)
    throwInvalidArgument("cannot resolve '" + hostPort + "': " + gai_strerror(rc) + "; check the host name");
  Address a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

Address localAddress(const std::string& preferredIfname) {
  std::string spec = params::SOCKET_IFNAME.get();
  // Without a choice from the user, the caller's preference (the NIC nearest to this rank's NUMA node) comes first.
  const std::string nearest = spec.empty() ? preferredIfname : std::string();
  ifaddrs* list = nullptr;
  Address found, loopback, preferred;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      if (i->ifa_addr->sa_family != AF_INET) continue;  // IPv4 first: simplest for namespaces and launchers
      bool isLoop = (i->ifa_flags & IFF_LOOPBACK) != 0;
      bool wanted = spec.empty() ? !isLoop : matchesIfname(i->ifa_name, spec);
      Address a;
      std::memcpy(&a.storage, i->ifa_addr, sizeof(sockaddr_in));
      a.length = sizeof(sockaddr_in);
      if (wanted && found.length == 0) found = a;
      if (wanted && preferred.length == 0 && !nearest.empty() && nearest == i->ifa_name) preferred = a;
      if (isLoop && loopback.length == 0) loopback = a;
    }
    freeifaddrs(list);
  }
  if (preferred.length) found = preferred;
  if (found.length == 0 && !spec.empty())
    HOCCL_WARN(kNet, "no interface matches HOCCL_SOCKET_IFNAME='{}'; falling back to the loopback address", spec);
  if (found.length == 0) found = loopback.length ? loopback : Address::parse("127.0.0.1:0");
  reinterpret_cast<sockaddr_in*>(&found.storage)->sin_port = 0;
  return found;
}

Fd listenOn(const Address& addr, Address* bound) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throwSystemError("socket() failed", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0)
    throwSystemError("cannot listen on " + addr.toString() + " (is the port in use? pick another HOCCL_COMM_ID port)",
                     errno);
  if (::listen(fd.get(), 1024) != 0) throwSystemError("listen() failed", errno);
  if (bound) {
    bound->length = sizeof(bound->storage);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length);
  }
  return fd;
}

Fd acceptUntil(int listenFd, Deadline deadline) {
  while (true) {
    if (!waitReady(listenFd, POLLIN, deadline))
      throwTimeout("timed out waiting for a connection (raise HOCCL_TIMEOUT if ranks start slowly)");
    int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Fd(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) throwSystemError("accept() failed", errno);
  }
}

Fd connectUntil(const Address& addr, Deadline deadline, const std::string& what) {
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throwSystemError("socket() failed", errno);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) == 0) return fd;
    int err = errno;
    if (Clock::now() >= deadline)
      throwTimeout(
          fmt::format("{}: cannot connect to {} within HOCCL_TIMEOUT: {}; is that process running and "
                      "reachable?",
                      what, addr.toString(), std::strerror(err)));
    if (err != ECONNREFUSED && err != EINTR && err != ETIMEDOUT && err != EAGAIN && err != ENETUNREACH)
      throwSystemError(what + ": connect to " + addr.toString() + " failed", err);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

void writeAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!waitReady(fd, POLLOUT, deadline)) throwTimeout(what + ": timed out sending");
      continue;
    }
    throwRemoteError(what + ": connection lost while sending (" + std::strerror(errno) + ")");
  }
}

void readAll(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= n;
      continue;
    }
    if (n == 0) throwRemoteError(what + ": the peer closed the connection (did that process exit or crash?)");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!waitReady(fd, POLLIN, deadline)) throwTimeout(what + ": timed out waiting for data");
      continue;
    }
    throwRemoteError(what + ": connection lost while receiving (" + std::strerror(errno) + ")");
  }
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throwSystemError("fcntl(O_NONBLOCK) failed", errno);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void tuneTcp(int fd) {
  setNoDelay(fd);
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

Secret randomSecret() {
  Secret s{};
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0 && errno != EINTR) throwSystemError("getrandom() failed", errno);
    if (n > 0) got += n;
  }
  return s;
}

}  // namespace hoccl::net
