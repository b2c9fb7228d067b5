/*
 * The handshake of every connection of a job (see handshake.h).
 *
 * Protocol (C = the connecting side, a rank; L = the listener, the bootstrap root or a rank's tcp listener; K = the
 * 128-bit job secret, from the unique id or HOCCL_AUTH_TOKEN; never sent):
 *   1. C -> L  ClientHelloWire: magic, version, tag, rank, peer, index, Nc (32 random bytes)
 *   2. L -> C  ChallengeWire: Ns (32 random bytes), Ps = HMAC-SHA256(K, "hoccl-auth-2 L" | hello | Ns)
 *              (or status kBadVersion and L's version, when the hello's version differs: no proof at all)
 *   3. C checks Ps. Wrong: C -> L FinishWire{kMismatch} (no proof) and C fails with "the token did not match".
 *      Right:  C -> L FinishWire{kOk, Pc = HMAC-SHA256(K, "hoccl-auth-2 C" | hello | Ns)}
 *   4. L checks Pc and the hello's peer. Right: L -> C AcceptWire{kOk}; wrong: AcceptWire{kRefused} (best effort)
 *      and L closes the connection. After step 4 the connection carries its normal protocol.
 * `hello` is the whole first message, so both proofs cover both nonces, the role (the label), the communicator tag,
 * both ranks and the connection index.
 *
 * Why this order and these inputs:
 *   - C proves only after checking L: a fake listener (a process that took the root's port first, or a
 *     misdirected HOCCL_COMM_ID) gets no proof at all, and could not reuse one anyway, because Pc covers L's fresh
 *     Ns and the real L picks a new Ns for every connection.
 *   - L proves first, but its proof covers C's fresh Nc, so a stranger that collects proofs from L cannot present
 *     them to any real rank (which picks a new Nc), and the labels differ, so an L proof never passes as a C proof.
 *   - A replayed recording fails: the other side's fresh nonce differs.
 * What it does not do: the messages after the handshake are neither encrypted nor authenticated, so an attacker
 * who can rewrite traffic on the path can still take over an established connection. The handshake keeps strangers,
 * port scanners and ranks of other jobs out; it is no substitute for a trusted network (docs/reliability-auth.md).
 *
 * The listener serves every connection at once (poll over the listening socket and all sockets in their handshake),
 * each with its own deadline (kHandshakeWait for the hello, kProofWait for the proof once it has sent its challenge),
 * and reads only whole handshake messages (never beyond step 3), so the normal protocol's first bytes stay in the
 * socket for the caller.
 *
 * Why step 4 answers (version 3; version 2 ended at step 3): both ends must agree that the connection exists. In
 * version 2 the caller counted the connection as made once it had sent its proof, while the listener could still
 * drop it (its deadline passed because the caller's thread was starved of CPU, 256 thread ranks on 2 cores under
 * ASan); the caller then met "connection reset" in its first collective and the listener kept waiting for a
 * connection that never came. Now the caller waits for the acceptance, and a connection the listener closed before
 * accepting is made again (connectAuthenticated), until the caller's deadline.
 */
#include "base/boot/handshake.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {
namespace {

using Clock = net::Clock;
using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;

constexpr uint32_t kMagic = 0x48415554;  // "HAUT"
// 1: the plain hello that carried the secret; 2: no acceptance (step 4); 3: step 4; 4: the same steps, but the
// bootstrap join after them carries a larger RankInfo (the affinity mask), so an older rank is refused at its hello.
constexpr uint32_t kVersion = 4;
constexpr uint32_t kOk = 0;
constexpr uint32_t kBadVersion = 1;  // challenge: the hello's version differs from the listener's
constexpr uint32_t kMismatch = 2;    // finish: the listener's proof did not match the caller's secret
constexpr uint32_t kRefused = 3;     // accept: the caller's proof or its claimed peer is wrong

struct ClientHelloWire {
  uint32_t magic;
  uint32_t version;
  uint64_t tag;
  int32_t rank;
  int32_t peer;
  int32_t index;
  uint32_t reserved;
  uint8_t nonce[32];
};
struct ChallengeWire {
  uint32_t magic;
  uint32_t status;
  uint32_t version;
  uint32_t reserved;
  uint8_t nonce[32];
  uint8_t proof[32];
};
struct FinishWire {
  uint32_t magic;
  uint32_t status;
  uint8_t proof[32];
};
struct AcceptWire {
  uint32_t magic;
  uint32_t status;
};

// Upper bound of connections in their handshake at once; the oldest goes when a new one would pass it.
constexpr size_t kMaxHandshaking = 512;

Nonce freshNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throwInternalError("the handshake could not draw a random nonce (OpenSSL RAND_bytes failed)");
  return n;
}

// HMAC-SHA256(secret, label | hello | serverNonce); the label tells the listener's proof from the caller's.
Mac proof(const net::Secret& secret, const char* label, const ClientHelloWire& hello, const uint8_t* serverNonce) {
  std::array<uint8_t, 16 + sizeof(ClientHelloWire) + 32> msg{};
  std::memcpy(msg.data(), label, std::min<size_t>(16, std::strlen(label)));
  std::memcpy(msg.data() + 16, &hello, sizeof(hello));
  std::memcpy(msg.data() + 16 + sizeof(hello), serverNonce, 32);
  Mac mac{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(), mac.data(), &len) ||
      len != mac.size())
    throwInternalError("the handshake could not compute an HMAC-SHA256 (OpenSSL HMAC failed)");
  return mac;
}
constexpr const char* kListenerLabel = "hoccl-auth-2 L";
constexpr const char* kCallerLabel = "hoccl-auth-2 C";

bool sameMac(const Mac& a, const uint8_t* b) { return CRYPTO_memcmp(a.data(), b, a.size()) == 0; }

ClientHelloWire helloWire(const Hello& hello) {
  ClientHelloWire w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.tag = hello.tag;
  w.rank = hello.rank;
  w.peer = hello.peer;
  w.index = hello.index;
  Nonce n = freshNonce();
  std::memcpy(w.nonce, n.data(), n.size());
  return w;
}

std::string peerAddress(int fd) {
  net::Address from;
  from.length = sizeof(from.storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&from.storage), &from.length) != 0) return "?";
  return from.toString();
}

// The rate limit of rejection logs: per interval the first kLoggedPerInterval one line each, the rest counted and
// summed up in one line when the next rejection comes after the interval (or a listener closes).
constexpr auto kLogInterval = std::chrono::seconds(10);
constexpr int kLoggedPerInterval = 3;
struct RejectLog {
  std::mutex mutex;
  uint64_t total = 0;
  Clock::time_point intervalStart{};
  int loggedInInterval = 0;
  uint64_t suppressed = 0;
  std::string lastSuppressed;

  void flushLocked() {
    if (suppressed == 0) return;
    HOCCL_WARN(kNet, "{} more connection(s) rejected in the last {} s, not logged one by one (latest: {})", suppressed,
               std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - intervalStart).count(), lastSuppressed);
    suppressed = 0;
  }
};
RejectLog& rejectLog() {
  static RejectLog* log = new RejectLog;  // never destroyed: listeners may log while the process exits
  return *log;
}

}  // namespace

uint64_t rejectedConnections() {
  std::lock_guard<std::mutex> lock(rejectLog().mutex);
  return rejectLog().total;
}

void noteRejected(const std::string& listener, const std::string& from, const std::string& reason) {
  RejectLog& log = rejectLog();
  std::lock_guard<std::mutex> lock(log.mutex);
  ++log.total;
  const auto now = Clock::now();
  if (now - log.intervalStart >= kLogInterval) {
    log.flushLocked();
    log.intervalStart = now;
    log.loggedInInterval = 0;
  }
  std::string line = fmt::format("{} rejected a connection from {}: {}", listener, from, reason);
  if (log.loggedInInterval < kLoggedPerInterval) {
    ++log.loggedInInterval;
    HOCCL_WARN(kNet, "{}{}", line,
               log.loggedInInterval == kLoggedPerInterval
                   ? fmt::format(" (further rejections in the next {} s are only counted)", kLogInterval.count())
                   : "");
    return;
  }
  ++log.suppressed;
  log.lastSuppressed = std::move(line);
}

void sendHelloOnly(int fd, const Hello& hello, net::Deadline deadline) {
  ClientHelloWire w = helloWire(hello);
  net::writeAll(fd, &w, sizeof(w), deadline, "sending a handshake hello");
}

namespace {

// The listener closed the connection in the middle of the handshake (it dropped it): the caller may connect again.
struct Dropped {
  std::string why;
};

// readAll/writeAll for the handshake: a closed or reset connection becomes Dropped; timeouts stay errors.
template <typename Io>
void handshakeIo(Io io) {
  try {
    io();
  } catch (const Error& e) {
    if (e.code() == hocclTimeout) throw;
    throw Dropped{e.what()};
  }
}

// One attempt of the caller's side (steps 1-4) on a connected socket; throws Dropped when the listener hangs up.
void authenticateOnce(int fd, const net::Secret& secret, const Hello& hello, net::Deadline deadline,
                      const std::string& what, const std::string& advice) {
  const ClientHelloWire w = helloWire(hello);
  handshakeIo([&] { net::writeAll(fd, &w, sizeof(w), deadline, what + ": sending the handshake hello"); });
  ChallengeWire c{};
  handshakeIo([&] {
    net::readAll(fd, &c, sizeof(c), deadline, what + ": waiting for the other side's proof of the job secret");
  });
  if (c.magic != kMagic)
    throwRemoteError(
        fmt::format("{}: the other side answered the handshake with something that is not a hoccl "
                    "handshake (another program listens there, or a much older hoccl)",
                    what));
  if (c.status == kBadVersion)
    throwInvalidUsage(
        fmt::format("{}: the other side speaks handshake version {}, this process {}: run the same "
                    "hoccl version on every rank",
                    what, c.version, kVersion));
  FinishWire f{};
  f.magic = kMagic;
  if (c.status != kOk || !sameMac(proof(secret, kListenerLabel, w, c.nonce), c.proof)) {
    f.status = kMismatch;  // tell it why we hang up; no proof of ours
    try {
      net::writeAll(fd, &f, sizeof(f), std::min(deadline, Clock::now() + std::chrono::seconds(1)), what);
    } catch (const Error&) {
    }
    throwInvalidUsage(
        fmt::format("{}: the token did not match: the other side does not prove the same job secret "
                    "as this rank. {}",
                    what, advice));
  }
  f.status = kOk;
  Mac mine = proof(secret, kCallerLabel, w, c.nonce);
  std::memcpy(f.proof, mine.data(), mine.size());
  handshakeIo([&] { net::writeAll(fd, &f, sizeof(f), deadline, what + ": sending the proof of the job secret"); });
  AcceptWire a{};
  handshakeIo([&] { net::readAll(fd, &a, sizeof(a), deadline, what + ": waiting for the other side to accept"); });
  if (a.magic != kMagic || a.status != kOk)
    throwInvalidUsage(
        fmt::format("{}: the other side refused the connection after the handshake (it is not rank {}, "
                    "or it could not check this rank's proof); its log says why. {}",
                    what, hello.peer, advice));
}

}  // namespace

bool authenticate(int fd, const net::Secret& secret, const Hello& hello, net::Deadline deadline,
                  const std::string& what, const std::string& advice) {
  try {
    authenticateOnce(fd, secret, hello, deadline, what, advice);
    return true;
  } catch (const Dropped& d) {
    HOCCL_TRACE(kNet, "{}: the other side closed the connection during the handshake ({})", what, d.why);
    return false;
  }
}

net::Fd connectAuthenticated(const std::function<net::Fd()>& open, const net::Secret& secret, const Hello& hello,
                             net::Deadline deadline, const std::string& what, const std::string& advice) {
  for (int attempt = 1;; ++attempt) {
    net::Fd fd = open();
    net::setNoDelay(fd.get());  // see socket.h: without it each join paid the root's delayed ACK (about 40 ms)
    std::string why;
    try {
      authenticateOnce(fd.get(), secret, hello, deadline, what, advice);
      return fd;
    } catch (const Dropped& d) {
      why = d.why;
    }
    if (Clock::now() >= deadline)
      throwRemoteError(fmt::format(
          "{}: the other side closed the connection during the handshake {} time(s), the last time: {}. Its log "
          "names the reason (\"rejected a connection\"); a listener drops handshakes that stall for {} s, e.g. when "
          "its host is overloaded",
          what, attempt, why, kProofWait.count() / 1000));
    HOCCL_INFO(kNet, "{}: the other side dropped the connection during the handshake ({}); connecting again", what,
               why);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 * attempt)));
  }
}

// ---- Acceptor ----

struct Acceptor::Pending {
  net::Fd fd;
  std::string from;
  Clock::time_point until;  // kHandshakeWait from the accept, then kProofWait from the challenge
  int stage = 0;            // 0: reading the hello, 1: reading the finish
  ClientHelloWire hello{};
  Nonce nonce{};
  FinishWire finish{};
  size_t have = 0;  // bytes of the current message received
};

Acceptor::Acceptor(int listenFd, const net::Secret& secret, int selfRank, std::string name)
    : listenFd_(listenFd), secret_(secret), selfRank_(selfRank), name_(std::move(name)) {}

Acceptor::~Acceptor() {
  for (auto& p : pending_) noteRejected(name_, p->from, "still in its handshake when the listener closed");
  std::lock_guard<std::mutex> lock(rejectLog().mutex);
  rejectLog().flushLocked();
}

// One accept per readiness of the listener (it may be a blocking socket: a second accept could wait).
void Acceptor::acceptMore() {
  while (true) {
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return;
      if (errno == EMFILE || errno == ENFILE) {  // out of descriptors: make room by dropping the oldest stranger
        if (pending_.empty()) throwSystemError(name_ + ": accept() failed", errno);
        noteRejected(name_, pending_.front()->from, "dropped to make room (the process is out of file descriptors)");
        pending_.erase(pending_.begin());
        continue;
      }
      throwSystemError(name_ + ": accept() failed", errno);
    }
    net::setNoDelay(fd);  // the handshake and everything after it are small messages that must not wait (socket.h)
    auto p = std::make_unique<Pending>();
    p->fd = net::Fd(fd);
    p->from = peerAddress(fd);
    p->until = Clock::now() + kHandshakeWait;
    if (pending_.size() >= kMaxHandshaking) {
      noteRejected(name_, pending_.front()->from,
                   fmt::format("dropped to make room ({} connections in their handshake at once)", kMaxHandshaking));
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
    return;
  }
}

// Advances one connection by what arrived; true once it is authenticated; false with *reason set to drop it.
bool Acceptor::step(Pending& p, std::string* reason) {
  char* buf = p.stage == 0 ? reinterpret_cast<char*>(&p.hello) : reinterpret_cast<char*>(&p.finish);
  const size_t need = p.stage == 0 ? sizeof(p.hello) : sizeof(p.finish);
  while (p.have < need) {
    ssize_t n = ::recv(p.fd.get(), buf + p.have, need - p.have, MSG_DONTWAIT);
    if (n > 0) {
      p.have += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    *reason = n == 0 ? (p.stage == 0 ? "it closed without a hello (a port scanner?)"
                                     : "it closed before proving the job secret")
                     : std::string("connection error: ") + std::strerror(errno);
    return false;
  }
  p.have = 0;
  if (p.stage == 0) {
    if (p.hello.magic != kMagic) {
      *reason = "it sent no hoccl handshake (another program, or a much older hoccl)";
      return false;
    }
    ChallengeWire c{};
    c.magic = kMagic;
    c.version = kVersion;
    if (p.hello.version != kVersion) {
      c.status = kBadVersion;
      *reason = fmt::format("it speaks handshake version {}, this process {}", p.hello.version, kVersion);
    } else {
      p.nonce = freshNonce();
      std::memcpy(c.nonce, p.nonce.data(), p.nonce.size());
      Mac mine = proof(secret_, kListenerLabel, p.hello, c.nonce);
      std::memcpy(c.proof, mine.data(), mine.size());
    }
    // A fresh socket's send buffer takes the 80 bytes at once; a peer that does not read them is dropped anyway.
    ssize_t n = ::send(p.fd.get(), &c, sizeof(c), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(sizeof(c)) && reason->empty())
      *reason = "it could not take the challenge (connection reset?)";
    p.stage = 1;
    p.until = Clock::now() + kProofWait;
    return false;
  }
  if (p.finish.magic != kMagic) {
    *reason = "it answered the challenge with garbage";
    return false;
  }
  const std::string who = p.hello.rank >= 0 ? fmt::format("rank {} ", p.hello.rank) : std::string();
  if (p.finish.status == kMismatch) {
    *reason = fmt::format(
        "{}does not hold this job's secret: it found this side's proof wrong (a different HOCCL_AUTH_TOKEN or unique "
        "id, or a process of another job)",
        who);
    return false;
  }
  // Step 4: the acceptance (or the refusal) goes back. A fresh socket's send buffer takes the 8 bytes at once.
  AcceptWire a{kMagic, kOk};
  if (p.finish.status != kOk || !sameMac(proof(secret_, kCallerLabel, p.hello, p.nonce.data()), p.finish.proof))
    *reason = fmt::format("{}sent a wrong proof of the job secret", who);
  else if (p.hello.peer != selfRank_)
    *reason = fmt::format("{}proved the job secret but wants to reach {}, and this is {}", who,
                          p.hello.peer < 0 ? std::string("the bootstrap root") : fmt::format("rank {}", p.hello.peer),
                          selfRank_ < 0 ? std::string("the bootstrap root") : fmt::format("rank {}", selfRank_));
  if (!reason->empty()) a.status = kRefused;
  const ssize_t n = ::send(p.fd.get(), &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(sizeof(a)) && reason->empty())
    *reason = fmt::format("{}proved the job secret but could not take the acceptance (connection reset?)", who);
  return reason->empty();
}

std::optional<Acceptor::Peer> Acceptor::next(net::Deadline deadline) {
  std::vector<pollfd> pfds;
  while (true) {
    const auto now = Clock::now();
    for (size_t i = 0; i < pending_.size();) {
      if (pending_[i]->until <= now) {
        noteRejected(name_, pending_[i]->from,
                     pending_[i]->stage == 0
                         ? fmt::format("it sent no hello within {} ms (idle, or not a hoccl rank)",
                                       kHandshakeWait.count())
                         : fmt::format("it sent no proof within {} ms of the challenge (a stalled rank, or not a "
                                       "hoccl rank); a rank of the job connects again",
                                       kProofWait.count()));
        pending_.erase(pending_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    if (now >= deadline) return std::nullopt;
    auto wake = deadline;
    for (auto& p : pending_) wake = std::min(wake, p->until);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    pfds.assign(1, pollfd{listenFd_, POLLIN, 0});
    for (auto& p : pending_) pfds.push_back({p->fd.get(), POLLIN, 0});
    int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::clamp<long long>(ms, 0, 1000)));
    if (rc < 0 && errno != EINTR) throwSystemError(name_ + ": poll() failed", errno);
    if (rc <= 0) continue;
    // Handshakes first (their indexes match pfds[1..]), then new connections.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (!pfds[i + 1].revents) continue;
      std::string reason;
      Pending& p = *pending_[i];
      if (step(p, &reason)) {
        Peer out;
        int flags = fcntl(p.fd.get(), F_GETFL, 0);
        if (flags >= 0) fcntl(p.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
        out.fd = std::move(p.fd);
        out.hello = Hello{p.hello.tag, p.hello.rank, p.hello.peer, p.hello.index};
        out.from = p.from;
        pending_.erase(pending_.begin() + static_cast<long>(i));
        return out;
      }
      if (!reason.empty()) {
        noteRejected(name_, p.from, reason);
        pending_.erase(pending_.begin() + static_cast<long>(i));
      }
    }
    if (pfds[0].revents) acceptMore();
  }
}

void releaseThreadCryptoState() { OPENSSL_thread_stop(); }

void initCrypto() { OPENSSL_init_crypto(0, nullptr); }

}  // namespace hoccl::boot
