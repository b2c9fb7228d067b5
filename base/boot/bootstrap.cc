// Rank side of the bootstrap: one authenticated connection to the root, used for the join and for all-gathers.
#include "base/boot/bootstrap.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/boot/wire.h"
#include "base/error.h"
#include "base/log.h"

namespace hoccl::boot {

class Bootstrap::Impl {
 public:
  net::Fd fd;
  std::string rootName;

  // Reads one message from the root; turns an error message into an Error that names the failed rank.
  std::vector<char> receive(int rank, const char* what) {
    RootHeader h{};
    std::string ctx = fmt::format("rank {}: bootstrap {} with root {}", rank, what, rootName);
    net::readAll(fd.get(), &h, sizeof(h), net::defaultDeadline(), ctx);
    std::vector<char> payload(h.bytes);
    net::readAll(fd.get(), payload.data(), payload.size(), net::defaultDeadline(), ctx);
    if (h.type == kRootError) throwRemoteError(fmt::format("rank {}: {}", rank, std::string(payload.begin(), payload.end())));
    return payload;
  }
};

Bootstrap::Bootstrap(const UniqueId& id, int rank, int nranks, const RankInfo& self)
    : impl_(std::make_unique<Impl>()), rank_(rank), nranks_(nranks), secret_(id.secret), commTag_(id.nonce) {
  impl_->rootName = id.root.toString();
  net::Deadline deadline = net::defaultDeadline();
  impl_->fd = net::connectUntil(id.root, deadline,
                                fmt::format("rank {}: joining the bootstrap root (HOCCL_COMM_ID / unique id)", rank));
  net::sendHello(impl_->fd.get(), secret_, net::Hello{id.nonce, rank, 0}, deadline);
  JoinMessage join{nranks, rank};
  RankInfo info = self;
  info.rank = rank;
  net::writeAll(impl_->fd.get(), &join, sizeof(join), deadline, "bootstrap join");
  net::writeAll(impl_->fd.get(), &info, sizeof(info), deadline, "bootstrap join");
  std::vector<char> table = impl_->receive(rank, "join");
  if (table.size() != sizeof(RankInfo) * static_cast<size_t>(nranks))
    throwInternalError(fmt::format("rank {}: bootstrap root sent a rank table of {} bytes", rank, table.size()));
  ranks_.resize(nranks);
  std::memcpy(ranks_.data(), table.data(), table.size());
  HOCCL_INFO(kBootstrap, "rank {}/{} joined the bootstrap at {}", rank, nranks, impl_->rootName);
}

Bootstrap::~Bootstrap() = default;

void Bootstrap::allGather(void* data, size_t bytes) {
  auto* slots = static_cast<char*>(data);
  uint64_t n = bytes;
  net::Deadline deadline = net::defaultDeadline();
  net::writeAll(impl_->fd.get(), &n, sizeof(n), deadline, "bootstrap all-gather");
  net::writeAll(impl_->fd.get(), slots + bytes * rank_, bytes, deadline, "bootstrap all-gather");
  std::vector<char> all = impl_->receive(rank_, "all-gather");
  if (all.size() != bytes * nranks_)
    throwInvalidUsage(fmt::format("rank {}: bootstrap all-gather got {} bytes, expected {} x {}: the ranks called "
                                  "different operations (a mismatched CommSplit or init?)", rank_, all.size(),
                                  nranks_, bytes));
  std::memcpy(slots, all.data(), all.size());
}

void Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  allGather(dummy.data(), 1);
}

}  // namespace hoccl::boot
