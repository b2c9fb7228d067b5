/// @file raw_rank.h
/// A rank of a bootstrap test played by hand (tests/unit): it joins the root and links into the gather tree with the
/// real wire messages and GatherTree, but has no watcher: it never answers the root (a stopped process) and can close
/// everything without a goodbye (a killed one). joinRoot alone plays a rank that joins and drops out before its init
/// is complete.
#pragma once

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/boot/bootstrap.h"
#include "base/boot/gather_tree.h"
#include "base/boot/handshake.h"
#include "base/boot/wire.h"
#include "base/error.h"
#include "base/socket.h"

namespace hoccl::boot::test {

/// The RankInfo that the bootstrap tests give rank `rank`.
inline RankInfo infoFor(int rank, int pid, const char* host) {
  RankInfo info;
  info.rank = rank;
  info.pid = pid;
  std::strncpy(info.hostname, host, sizeof(info.hostname) - 1);
  return info;
}

/// Joins rank `rank` of `n` on the root of `id` with `info` (a plain init: one id, unless `share` says otherwise) and
/// returns the connection, without reading the answer: a rank that can then drop out before its init is complete.
/// `listener` receives the tree listener whose address the join announces.
inline net::Fd joinRoot(const UniqueId& id, int rank, int n, const RankInfo& info, net::Fd* listener,
                        const Share& share = Share{}) {
  net::Deadline d = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  net::Fd root = net::connectUntil(id.root, d, "test raw join");
  if (!authenticate(root.get(), id.secret, Hello{id.nonce, rank, -1, 0}, d, "test raw join", ""))
    throw std::runtime_error("test raw join: the root dropped the connection during the handshake");
  net::Address bound;
  *listener = net::listenOn(net::Address::parse("127.0.0.1:0"), &bound);
  JoinMessage join{n, rank, share.lo, share.hi > 0 ? share.hi : n, share.idIndex, share.nIds, {}};
  join.listener.length = bound.length;
  std::memcpy(join.listener.bytes, &bound.storage, bound.length);
  net::writeAll(root.get(), &join, sizeof(join), d, "test");
  net::writeAll(root.get(), &info, sizeof(info), d, "test");
  return root;
}

/// A hand-played rank: see the file comment.
struct RawRank {
  net::Fd root;                      ///< the connection to the root (never read after the join)
  std::unique_ptr<GatherTree> tree;  ///< its gather-tree links
  std::vector<RankInfo> table;       ///< every rank's info, from the first all-gather

  /// Joins rank `rank` of `n` on the root of `id` with `info`, links the tree and takes part in the all-gather of
  /// the rank table (collective with the other ranks of the job). Throws like Bootstrap's constructor.
  RawRank(const UniqueId& id, int rank, int n, const RankInfo& info) {
    net::Deadline d = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    net::Fd listener;
    root = joinRoot(id, rank, n, info, &listener);
    while (true) {
      RootHeader h{};
      net::readAll(root.get(), &h, sizeof(h), d, "test raw join");
      std::vector<char> payload(h.bytes);
      net::readAll(root.get(), payload.data(), payload.size(), d, "test raw join");
      if (h.type != kRootPlan) continue;
      PlanWire plan{};
      std::memcpy(&plan, payload.data(), sizeof(plan));
      std::vector<RankInfo> known((payload.size() - sizeof(plan)) / sizeof(RankInfo));
      std::memcpy(known.data(), payload.data() + sizeof(plan), known.size() * sizeof(RankInfo));
      net::Address parent;
      parent.length = plan.parentAddr.length;
      std::memcpy(&parent.storage, plan.parentAddr.bytes, parent.length);
      tree = std::make_unique<GatherTree>(rank, n, plan.fanout, describeRank(info));
      TreeOutcome o = tree->link(listener.get(), parent, id.secret, id.nonce, known, d, -1);
      if (o.kind != TreeOutcome::Ok) throwRemoteError("test raw rank: " + o.text);
      break;
    }
    table.resize(n);
    table[rank] = info;
    TreeOutcome o = tree->allGather(reinterpret_cast<char*>(table.data()), sizeof(RankInfo), d, -1);
    if (o.kind != TreeOutcome::Ok) throwRemoteError("test raw rank: " + o.text);
    const RankHeader ready{kRankReady, 0, 0};  // as Bootstrap does: from now on its close alone is no failure
    net::writeAll(root.get(), &ready, sizeof(ready), d, "test raw ready");
  }

  /// Closes the root connection and the tree links without a goodbye: a killed process.
  void crash() {
    root.reset();
    if (tree) tree->drop();
  }
};

}  // namespace hoccl::boot::test
