/// @file handshake.h
/// Mutual authentication of every connection of a job (rank -> bootstrap root, rank -> rank over tcp): both sides
/// prove that they hold the job secret without sending it, each with a challenge-response over fresh nonces of both
/// sides (HMAC-SHA256, OpenSSL libcrypto). The connecting side reveals its proof only after it has checked the
/// listener's, so a fake listener learns nothing it could use. The protocol and the threat model are described at
/// the top of handshake.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/socket.h"

namespace hoccl::boot {

/// Who is calling and why: the connecting side's claim, covered by both proofs.
struct Hello {
  uint64_t tag = 0;   ///< which communicator / purpose (both sides agree)
  int32_t rank = -1;  ///< caller's rank
  int32_t peer = -1;  ///< the rank the caller wants to reach (-1: the bootstrap root)
  int32_t index = 0;  ///< connection index (several per peer)
};

/// How long a listener gives a connection to complete the handshake: a stranger or an idle socket is dropped then,
/// and never holds up the others (they are served at the same time).
constexpr std::chrono::milliseconds kHandshakeWait{2000};
/// How long a listener waits for the caller's proof once it has sent its challenge, and a bootstrap root for the
/// first message after the acceptance: the caller sent a well-formed hello, so it is most likely a rank of the job
/// whose thread is slow to be scheduled (many ranks on few cores), not a stranger.
constexpr std::chrono::milliseconds kProofWait{10000};

/// The connecting side of the handshake on a connected socket: sends the hello and a fresh nonce, checks the
/// listener's proof, sends its own, and waits for the listener to accept. True once accepted; false when the listener
/// closed the connection before accepting it (it dropped a stalled handshake, or made room): connect again (see
/// connectAuthenticated). Throws InvalidUsage when the listener's proof does not match (the token differs; `what`
/// names the connection, `advice` says what to try) or it refuses the proven caller, RemoteError when it answers
/// garbage, hocclTimeout when nothing comes before `deadline`.
[[nodiscard]] bool authenticate(int fd, const net::Secret& secret, const Hello& hello, net::Deadline deadline,
                                const std::string& what, const std::string& advice);

/// Opens a connection with `open` and authenticates it (as authenticate), opening another while the listener drops
/// them before accepting, until `deadline` (then RemoteError with the last reason). Errors of `open` pass through.
net::Fd connectAuthenticated(const std::function<net::Fd()>& open, const net::Secret& secret, const Hello& hello,
                             net::Deadline deadline, const std::string& what, const std::string& advice);

/// Sends only the first message of the handshake (for tests that play a stranger).
void sendHelloOnly(int fd, const Hello& hello, net::Deadline deadline);

/// The listening side: accepts connections and runs the handshake on all of them at once, each with its own
/// deadline (kHandshakeWait), so strangers and idle sockets cannot delay the real ranks. Rejections are logged with a
/// rate limit (see rejectedConnections).
class Acceptor {
 public:
  /// An authenticated connection (a blocking socket again).
  struct Peer {
    net::Fd fd;        ///< the socket
    Hello hello;       ///< what the caller claimed (proven: both proofs cover it)
    std::string from;  ///< its address, for messages
  };
  /// Serves `listenFd` (not owned) as rank `selfRank` (-1: the bootstrap root); `name` says who listens, for logs.
  Acceptor(int listenFd, const net::Secret& secret, int selfRank, std::string name);
  /// Logs the count of rejections not yet reported.
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  /// The next connection that completed the handshake; nullopt at `deadline`.
  std::optional<Peer> next(net::Deadline deadline);
  /// Connections accepted and still in their handshake.
  size_t handshaking() const { return pending_.size(); }

 private:
  struct Pending;
  bool step(Pending& p, std::string* reason);
  void acceptMore();

  int listenFd_;
  net::Secret secret_;
  int selfRank_;
  std::string name_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

/// Connections rejected by listeners of this process so far (any reason: wrong token, garbage, silence).
uint64_t rejectedConnections();
/// Logs one rejected connection, with the rate limit of the listeners (the first few of every interval one line
/// each, then one summary line with the count).
void noteRejected(const std::string& listener, const std::string& from, const std::string& reason);

/// Frees the calling thread's OpenSSL state (its error queue and random generators, about 1 KB, made by the first
/// handshake on that thread). For threads hoccl owns that live on after their handshakes (the bootstrap root):
/// OpenSSL frees this state when a thread ends, except when the thread ends while the process's exit handlers run
/// (OPENSSL_cleanup has then deleted the thread-local keys, so the memory is lost; LeakSanitizer reported it from
/// ranks whose process exited as the root's thread finished). Never called on a caller's thread: the error queue
/// there belongs to the application.
void releaseThreadCryptoState();
/// Initializes OpenSSL now if nothing has (it registers its exit handler then): called before hoccl registers an exit
/// handler of its own that must run before OpenSSL's (exit handlers run in the reverse order of registration).
void initCrypto();

}  // namespace hoccl::boot
