/// @file root_core.h
/// The bootstrap root's state and steps, shared by its two files (internal to base/boot): root_server.cc holds the
/// root of one id (the joins, the plans, the verdicts; its protocol is described at the top of that file) and
/// root_link.cc the part that only exists with several ids (hocclCommInitRankScalable): a sub-root's link to the head
/// root, the relay of its ranks' messages, and the head's side of both.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/handshake.h"
#include "base/boot/tree_shape.h"
#include "base/boot/wire.h"
#include "base/socket.h"

namespace hoccl::boot::server {

using Clock = net::Clock;

class RootServer;

/// Live root servers of this process, told at exit that their process is ending normally; and the head ids that
/// ranks of this process handed to the sub-roots this process serves (handHeadId), by the sub-root's nonce.
struct Registry {
  std::mutex mutex;                      ///< guards everything below (exiting is also read without it)
  /// The process's exit handlers have begun (set under the mutex by the atexit handler): root threads leave
  /// OpenSSL alone from then on and park (parkIfExiting), so they never race OpenSSL's own exit handler.
  std::atomic<bool> exiting{false};
  std::vector<RootServer*> servers;      ///< servers to tell at exit
  std::vector<uint64_t> serving;         ///< nonces of the roots started here and still running
  std::map<uint64_t, UniqueId> headIds;  ///< sub-root nonce -> the head root's id
};
/// The process's registry (never destroyed: used from an atexit handler).
Registry& registry();
/// For a root's thread: frees its OpenSSL state (releaseThreadCryptoState) unless the process is exiting, under the
/// registry's mutex, so that the exit handler (which takes it) runs before or after, never during; while the
/// process exits the thread parks for good instead (the exit ends it). Call between handshakes and at the thread's
/// end.
void releaseCryptoOrPark();
/// For a root's thread: parks it for good (never returns) once the process's exit handlers have begun, so that it
/// stops touching what they tear down (OpenSSL's state, the log). Called once per loop of its poll.
void parkIfExiting();

/// One message (a header of type H and a payload) in one buffer.
template <class H>
std::vector<char> frame(const H& h, const void* data, size_t bytes) {
  std::vector<char> buf(sizeof(H) + bytes);
  std::memcpy(buf.data(), &h, sizeof(h));
  if (bytes) std::memcpy(buf.data() + sizeof(h), data, bytes);
  return buf;
}

/// The root of one unique id: see root_server.h. One thread runs it (run()); only announceClosing comes from another.
class RootServer {
 public:
  /// A root serving `id` on the already-listening socket.
  RootServer(net::Fd listener, const UniqueId& id) : listener_(std::move(listener)), id_(id), pid_(::getpid()) {}
  /// Serves the communicator until every rank has disconnected or the job never assembled.
  void run();
  /// From the atexit handler: tells every connected rank that this process ends normally.
  void announceClosing();

 private:
  enum class State { Live, Leaving, Gone, Lost };
  struct Rank {
    net::Fd fd;            // direct connection (-1: not joined, relayed, or closed)
    int via = -1;          // the sub-root link that relays it (head root only; -1: direct or absent)
    bool present = false;  // joined (directly or through a link)
    RankInfo info;
    AddressWire listener{};  // where it accepts its gather-tree children
    State state = State::Live;
    bool answered = false;  // to the last ping (or reported: it runs)
    bool ready = false;     // sent kRankReady: its init is complete
    bool reported = false;  // sent a kRankReport (its own account of a failure)
    std::vector<char> in;   // bytes received, not yet a whole message
  };
  struct Link {  // a sub-root linked to this head root
    net::Fd fd;
    int idIndex = 0;
    int pid = 0;
    RankRange share;
    std::vector<char> in;
  };
  struct Report {
    int reporter;
    std::string text;
    std::vector<int> suspects;
    bool mismatch = false;  // kRankMismatch: the reporter found that the calls differ
  };

  // --- root_server.cc: the root of one id
  void enroll();
  void withdraw();
  int nranks() const { return static_cast<int>(ranks_.size()); }
  std::string who(int r) const { return describeRank(ranks_[r].info); }
  // The ranks this root waits for: its share (a sub-root) or all (the head).
  RankRange domain() const { return idIndex_ > 0 ? share_ : RankRange{0, nranks()}; }
  // Every rank of the domain joined (or, at the head, was accounted for by a sub-root).
  bool complete() const;
  // What a join says about the communicator, checked against the first join: "" when it agrees.
  std::string configure(const JoinMessage& j);
  // Accepts the ranks of this root's share, each authenticated (handshake.h: all connections at once, each with its
  // own short deadline, so strangers and idle sockets cannot delay the job); the head root also accepts the links of
  // the sub-roots, each bringing its share. A sub-root then tells its ranks who it is. False when the job failed.
  bool assemble();
  // While the root waits for the other ranks: reads the connections of those that joined (they send nothing before
  // their plan, so anything readable is a close or an error), fails the job when one dropped out (decide(), rule 0)
  // and, on a sub-root, tells the head root.
  void watchJoined();
  // The pid and host of this root's process (kRootInfo).
  RootInfoWire myInfo() const;
  // The head root: every rank's place in the gather tree, and its neighbours' names.
  void sendPlans();
  // HOCCL_TIMEOUT passed with ranks missing: tells the ranks that joined which ones.
  void reportMissing();
  // The head root: serves failures (its own ranks and the sub-roots' links) until every rank has disconnected.
  void serve();
  // Handles every whole message at the front of `in` from rank r; false when one is malformed.
  bool parse(int r, std::vector<char>& in);
  // Takes what arrived from rank r and handles every whole message in it.
  void readFrom(int r);
  // One whole message of rank r.
  void handle(int r, uint32_t type, std::vector<char> payload);
  // Rank r's connection closed (or could not take a message): its new state.
  void closeRank(int r);
  // Picks the culprit when the reports allow it (see the comment at the top of root_server.cc) and tells every rank.
  void decide();
  // Rule 0: rank r's connection closed before its init was complete (`died`: without a goodbye).
  std::string initLossText(int r, bool died) const;
  // Decides the verdict and sends it to every rank.
  void sendVerdict(Verdict::Kind kind, int culprit, int reporter, const std::string& text);
  // The verdict already decided, to rank r (one that joined or linked after it, or every rank when it is decided).
  void sendVerdictTo(int r);
  // Sends one message to rank r (header and payload in one write; through its sub-root when it is relayed); a rank
  // that cannot take it is disconnected.
  void send(int r, uint32_t type, int32_t rank, const void* data, size_t bytes, net::Deadline deadline);
  void sendText(int r, uint32_t type, int32_t rank, const std::string& text);
  // A kRootError on a connection that is no rank's yet (a refused join).
  static void sendError(int fd, int rank, const std::string& text);
  void broadcastError(const std::string& text);

  // --- root_link.cc: several ids
  // The head root: a sub-root's link and the joins of its share (or its loss notice: acceptLoss).
  void acceptLink(Acceptor::Peer peer, net::Deadline deadline);
  // The head root: a sub-root lost rank h.rank of its share before the share was complete (kLinkLost).
  void acceptLoss(int fd, const LinkHeader& h, const ShareWire& sw, net::Deadline by, const std::string& from);
  // The head root: takes what arrived from sub-root link l: its ranks' messages and closes.
  void readLink(int l);
  // The head root: a sub-root's link closed: the ranks of its process are lost; the others of its share can no
  // longer be reached.
  void loseLink(int l);
  // A sub-root whose share is complete: links to the head root and sends it the share's joins. False (after telling
  // its ranks why) when it cannot.
  bool linkToHead();
  // A sub-root whose share lost a rank before it was complete: tells the head root (kLinkLost).
  void tellHeadLost();
  // A sub-root: relays whole messages between its ranks and the head root until every rank has disconnected or the
  // head is gone (then its ranks' connections close: they warn that failures are no longer shared).
  void relay();
  // A sub-root: one message to the head root (a failed write drops the link).
  void toHead(const LinkHeader& h, const void* data, size_t bytes);

  net::Fd listener_;
  UniqueId id_;
  pid_t pid_;
  std::mutex mutex_;  // the sockets of ranks_, links_ and head_ against announceClosing (another thread, at exit)
  std::vector<Rank> ranks_;
  std::vector<Link> links_;  // head root: the sub-roots
  net::Fd head_;             // sub-root: its link to the head root
  bool configured_ = false;  // the first rank of this root's own share has joined
  int nIds_ = 1;
  int idIndex_ = 0;
  RankRange share_;
  std::vector<Report> reports_;  // received, not yet decided
  bool settling_ = false;
  Clock::time_point settleEnd_{};
  Clock::time_point pingEnd_{};
  int abortBy_ = -1;
  std::vector<int> initLost_;  // ranks whose connection closed before their kRankReady, in order
  bool verdictSent_ = false;
  std::vector<char> verdict_;  // the verdict's payload (VerdictWire and text), for ranks that join after it
  int verdictCulprit_ = -1;
  bool headTold_ = false;  // sub-root: the head root knows of the rank its share lost (kLinkLost)
};

}  // namespace hoccl::boot::server
