/// @file gather_tree.h
/// The rank side of the bootstrap's exchanges: every rank's links to its parent and children in the gather tree
/// (tree_shape.h), and the all-gather over them. The root is not on this path: it only tells each rank where its
/// parent listens (bootstrap.h, root_server.cc). The algorithm is described at the top of gather_tree.cc.
#pragma once

#include <string>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/tree_shape.h"
#include "base/socket.h"

namespace hoccl::boot {

/// How an exchange over the tree ended.
struct TreeOutcome {
  /// Ok: done. Blame: a neighbour failed (died, or never answered); `text` names it as describeRank does, for a
  /// report to the root. Local: the ranks called different operations (a neighbour destroyed its communicator, or
  /// sent another exchange): an error of this call, no failure of the communicator. Follow: a neighbour gave up
  /// because of a failure elsewhere (its words are in `text`); the root's verdict is on its way. Verdict: the root's
  /// verdict ended the wait.
  enum Kind { Ok, Blame, Local, Follow, Verdict };
  Kind kind = Ok;    ///< see Kind
  int code = 0;      ///< hocclResult_t for Blame / Follow (hocclRemoteError, hocclTimeout, ...)
  std::string text;  ///< what happened (Blame, Follow)
};

/// One rank's links in the gather tree and the exchanges over them. Not thread-safe: one exchange at a time.
class GatherTree {
 public:
  /// Rank `rank` of `nranks` in the tree of the given fanout; `who` names this rank in messages.
  GatherTree(int rank, int nranks, int fanout, std::string who);
  /// Tells every neighbour that this rank leaves (see leave()) and closes the links.
  ~GatherTree();
  GatherTree(const GatherTree&) = delete;
  GatherTree& operator=(const GatherTree&) = delete;

  /// Connects to the parent at `parentAddr` and accepts every child on `listenFd`, each connection authenticated
  /// with the job secret (handshake.h, tag `tag`). `known` holds at least the parent's and the children's RankInfo
  /// (for messages). Returns early with Verdict when `alertFd` becomes readable.
  TreeOutcome link(int listenFd, const net::Address& parentAddr, const net::Secret& secret, uint64_t tag,
                   const std::vector<RankInfo>& known, net::Deadline deadline, int alertFd);
  /// All-gather: slots holds nranks slots of `bytes`; this rank's is filled in, the others are received. Waits in
  /// poll() only (on the links and `alertFd`), never spins.
  TreeOutcome allGather(char* slots, size_t bytes, net::Deadline deadline, int alertFd);
  /// Tells the neighbours that this rank leaves: normally (`failure` empty: a neighbour still waiting for it learns
  /// that the ranks called different operations) or after a failure (its text, so neighbours do not blame it;
  /// `reported`: the root's verdict follows, so they wait for it; else they fail with the text at once).
  void leave(const std::string& failure, bool reported = true);
  /// Closes the links without a word, as a killed process would (for tests that play a crashed rank).
  void drop();
  /// The place of this rank in the tree.
  const TreePlace& place() const { return place_; }

 private:
  struct Link {
    int rank = -1;     // the neighbour
    std::string name;  // describeRank of it
    net::Fd fd;
  };
  TreeOutcome receive(Link& from, uint32_t seq, char* into, size_t bytes, net::Deadline deadline, int alertFd);
  TreeOutcome send(Link& to, uint32_t seq, const char* data, size_t bytes, net::Deadline deadline, int alertFd);

  int rank_;
  int nranks_;
  std::string who_;
  TreePlace place_;
  Link parent_;
  std::vector<Link> children_;  // in rank order, as place_.children
  uint32_t seq_ = 0;            // exchanges done
  bool left_ = false;
};

}  // namespace hoccl::boot
