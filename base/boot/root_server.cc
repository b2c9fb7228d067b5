// The bootstrap root (see root_server.h). One detached thread per communicator; it owns its sockets and ends by
// itself when all ranks are gone or the job never assembled.
#include "base/boot/root_server.h"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {
namespace {

class RootServer {
 public:
  RootServer(net::Fd listener, const UniqueId& id) : listener_(std::move(listener)), id_(id) {}

  void run() {
    try {
      if (!assemble()) return;
      relay();
    } catch (const std::exception& e) {
      HOCCL_WARN(kBootstrap, "bootstrap root at {} stopped: {}", id_.root.toString(), e.what());
      broadcastError(-1, std::string("the bootstrap root failed: ") + e.what());
    }
  }

 private:
  // Accepts nranks authenticated ranks, then sends each the RankInfo table.
  bool assemble() {
    net::Deadline deadline = net::defaultDeadline();
    int nranks = -1;
    while (nranks < 0 || static_cast<int>(joined_) < nranks) {
      net::Fd fd;
      try {
        fd = net::acceptUntil(listener_.get(), deadline);
      } catch (const Error&) {
        reportMissing(nranks);
        return false;
      }
      net::Hello hello;
      if (!net::readHello(fd.get(), id_.secret, &hello, deadline) || hello.tag != id_.nonce) continue;
      JoinMessage join{};
      RankInfo info;
      try {
        net::readAll(fd.get(), &join, sizeof(join), deadline, "bootstrap join");
        net::readAll(fd.get(), &info, sizeof(info), deadline, "bootstrap join");
      } catch (const Error&) {
        continue;
      }
      if (nranks < 0) {
        nranks = join.nranks;
        fds_.resize(nranks);
        infos_.resize(nranks);
      }
      std::string problem;
      if (join.nranks != nranks)
        problem = fmt::format("rank {} says the communicator has {} ranks but rank(s) before it said {}", join.rank,
                              join.nranks, nranks);
      else if (join.rank < 0 || join.rank >= nranks)
        problem = fmt::format("rank {} is outside 0..{}", join.rank, nranks - 1);
      else if (fds_[join.rank])
        problem = fmt::format("two processes both claim rank {} (check HOCCL_RANK / the launcher)", join.rank);
      if (!problem.empty()) {
        HOCCL_WARN(kBootstrap, "bootstrap root: {}", problem);
        sendError(fd.get(), join.rank, problem);
        continue;
      }
      fds_[join.rank] = std::move(fd);
      infos_[join.rank] = info;
      ++joined_;
    }
    for (int r = 0; r < nranks; ++r)
      sendData(r, infos_.data(), infos_.size() * sizeof(RankInfo));
    return true;
  }

  void reportMissing(int nranks) {
    std::string missing;
    for (int r = 0; r < nranks; ++r)
      if (!fds_[r]) missing += (missing.empty() ? "" : ",") + std::to_string(r);
    std::string msg = nranks < 0
        ? "no rank connected to the bootstrap root before HOCCL_TIMEOUT"
        : fmt::format("rank(s) {} never joined the bootstrap at {} before HOCCL_TIMEOUT; check that every rank was "
                      "started with the same unique id / HOCCL_COMM_ID", missing, id_.root.toString());
    HOCCL_WARN(kBootstrap, "{}", msg);
    broadcastError(-1, msg);
  }

  // Rounds of all-gather: every rank sends a slot; when all slots are in, everyone gets the whole array.
  void relay() {
    const int n = static_cast<int>(fds_.size());
    while (true) {
      std::vector<std::vector<char>> slots(n);
      std::vector<bool> have(n, false);
      int got = 0, closed = 0;
      while (got + closed < n) {
        std::vector<pollfd> pfds;
        std::vector<int> who;
        for (int r = 0; r < n; ++r)
          if (!have[r] && fds_[r]) { pfds.push_back({fds_[r].get(), POLLIN, 0}); who.push_back(r); }
        if (pfds.empty()) break;
        int rc = ::poll(pfds.data(), pfds.size(), 1000);
        if (rc < 0 && errno != EINTR) return;
        for (size_t i = 0; i < pfds.size(); ++i) {
          if (!pfds[i].revents) continue;
          int r = who[i];
          uint64_t bytes = 0;
          try {
            net::readAll(fds_[r].get(), &bytes, sizeof(bytes), net::defaultDeadline(), "bootstrap relay");
            slots[r].resize(bytes);
            net::readAll(fds_[r].get(), slots[r].data(), bytes, net::defaultDeadline(), "bootstrap relay");
            have[r] = true;
            ++got;
          } catch (const Error&) {
            fds_[r].reset();
            ++closed;
            if (got > 0 || closed < n) lost_.push_back(r);
          }
        }
      }
      if (closed == n || (got == 0 && closed > 0 && allClosed())) return;  // orderly shutdown
      if (closed > 0) {
        std::string who;
        for (int r : lost_) who += (who.empty() ? "" : ",") + std::to_string(r) + " (" + infos_[r].hostname + ")";
        broadcastError(lost_.empty() ? -1 : lost_.front(),
                       fmt::format("rank(s) {} left the communicator (process exited or crashed) while the others "
                                   "waited for it in a bootstrap exchange", who));
        return;
      }
      std::vector<char> all;
      for (auto& s : slots) all.insert(all.end(), s.begin(), s.end());
      // Ranks of this process last: once one of them has its answer it may destroy its communicator and exit,
      // which ends this thread; by then every other rank's answer is already in its socket (barrier before exit).
      for (int r = 0; r < n; ++r)
        if (infos_[r].pid != static_cast<int32_t>(::getpid())) sendData(r, all.data(), all.size());
      for (int r = 0; r < n; ++r)
        if (infos_[r].pid == static_cast<int32_t>(::getpid())) sendData(r, all.data(), all.size());
    }
  }

  bool allClosed() const {
    for (const auto& fd : fds_)
      if (fd) return false;
    return true;
  }

  void sendData(int r, const void* data, size_t bytes) {
    if (!fds_[r]) return;
    RootHeader h{kRootData, -1, bytes};
    try {
      net::writeAll(fds_[r].get(), &h, sizeof(h), net::defaultDeadline(), "bootstrap root send");
      net::writeAll(fds_[r].get(), data, bytes, net::defaultDeadline(), "bootstrap root send");
    } catch (const Error&) {
      fds_[r].reset();
    }
  }

  static void sendError(int fd, int rank, const std::string& text) {
    RootHeader h{kRootError, rank, text.size()};
    try {
      net::Deadline d = net::Clock::now() + std::chrono::seconds(2);
      net::writeAll(fd, &h, sizeof(h), d, "bootstrap root error");
      net::writeAll(fd, text.data(), text.size(), d, "bootstrap root error");
    } catch (const Error&) {
    }
  }

  void broadcastError(int rank, const std::string& text) {
    for (auto& fd : fds_)
      if (fd) sendError(fd.get(), rank, text);
  }

  net::Fd listener_;
  UniqueId id_;
  std::vector<net::Fd> fds_;
  std::vector<RankInfo> infos_;
  std::vector<int> lost_;
  size_t joined_ = 0;
};

}  // namespace

void startRootServer(net::Fd listener, const UniqueId& id) {
  auto server = std::make_shared<RootServer>(std::move(listener), id);
  std::thread([server] { server->run(); }).detach();
}

}  // namespace hoccl::boot
