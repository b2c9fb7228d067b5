/*
 * The shm host level of HO-Ring's all-reduce (see shm_host_level.h), on the ranks of one host.
 *
 * Two rounds in the host's arena (the protocol of shm_session.h), around the other levels' steps:
 *   1. address round, before HO-Ring's first step: each rank publishes the addresses and sizes of its input and
 *      output and, when they are registered shared memory, where they lie (shm_peer_maps.h: SharedDesc), stamped
 *      with its call. Every rank of the host sees the same descriptors, so all decide alike: mapped when every rank
 *      registered both buffers, else the op ends here and HO-Ring runs its ring steps over the slots (the fallback;
 *      nothing of a peer was touched). When mapped, each rank checks that every range it will touch lies inside
 *      what each peer published, maps the peers' buffers (cached), and reduces its own ranges (HO-Ring's level-0
 *      part of every chunk) from every host rank's input, its own first, into its own output.
 *   2. closing round, after HO-Ring's last step: each rank copies its ranges, now reduced over every host, into every
 *      host peer's output, then publishes; once all have published, every output is complete and nobody touches
 *      this rank's buffers any more.
 * Why it is safe in place: rank r writes its own output only in its own ranges (the reduction, then the upper
 * levels) and a peer's output only in r's ranges, which that peer neither reads nor writes itself (it works on its
 * own ranges). A peer p reads r's input only in p's ranges, in p's reduction, before p publishes round 2; r's output
 * in p's ranges is written only by p's copy, which comes after p's reduction. A rank's previous call is over before it
 * publishes round 1 of the next, so no copy lands in a buffer its owner still uses.
 */
#include "transports/shm/shm_host_level.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "kernels/memory.h"
#include "transports/shm/shm_arena.h"
#include "transports/shm/shm_transport.h"
#include "transports/shm/shm_zero_copy.h"

namespace hoccl::transport::shm {

/// What each rank of the host publishes in the address round.
struct HostBuffers {
  uint64_t send;          ///< address of the input
  uint64_t recv;          ///< address of the output
  uint64_t sendBytes;     ///< its length
  uint64_t recvBytes;     ///< its length
  SharedDesc sendShared;  ///< where the input lies in shared memory when registered (fd -1: not)
  SharedDesc recvShared;  ///< same for the output
};

/// One call's host level on this rank.
class HostLevelOpImpl final : public HostLevelOp {
 public:
  HostLevelOpImpl(ShmHostLevel& owner, const CollCall& call, std::vector<ElemRange> mine)
      : h_(owner), call_(call), mine_(std::move(mine)) {}
  bool agree() override;
  bool mapped() const override { return mapped_; }
  void reduceScatter() override;
  bool allGather() override;
  std::string missing() const override { return exchange_ ? exchange_->missing() : "nobody"; }

 private:
  void checkRanges(const std::vector<HostBuffers>& peers) const;
  size_t elem() const { return kernels::typeSize(call_.dtype); }
  void count(int pos, size_t sent, size_t received) {
    h_.comm_.counters->count(h_.comm_.topology->linkClass(h_.comm_.connect->rank, h_.ranks_[static_cast<size_t>(pos)]),
                             sent, received);
  }

  ShmHostLevel& h_;
  CollCall call_;
  std::vector<ElemRange> mine_;
  HostBuffers published_{};
  std::unique_ptr<Exchange> exchange_;
  bool agreed_ = false, mapped_ = false, pushed_ = false;
  MappedBuffers mb_;
};

bool HostLevelOpImpl::agree() {
  ArenaSession& s = *h_.session_;
  if (agreed_) return true;
  if (!exchange_) {
    const size_t bytes = call_.count * elem();
    published_ = HostBuffers{reinterpret_cast<uint64_t>(call_.sendbuf),
                             reinterpret_cast<uint64_t>(call_.recvbuf),
                             bytes,
                             bytes,
                             describeShared(h_.comm_.registrations, call_.sendbuf, bytes),
                             describeShared(h_.comm_.registrations, call_.recvbuf, bytes)};
    exchange_ = std::make_unique<Exchange>(s, call_, Protocol::HostAddresses, &published_, sizeof(HostBuffers), true);
  }
  if (!exchange_->poll()) return false;
  agreed_ = true;
  const int n = s.nranks(), me = s.rank();
  std::vector<HostBuffers> peers(static_cast<size_t>(n));
  bool all = true;
  for (int q = 0; q < n; ++q) {
    std::memcpy(&peers[static_cast<size_t>(q)], exchange_->payloadOf(q), sizeof(HostBuffers));
    const HostBuffers& b = peers[static_cast<size_t>(q)];
    all &= b.send != 0 && b.recv != 0 && b.sendShared.fd >= 0 && b.recvShared.fd >= 0;
  }
  exchange_.reset();
  if (!all) return true;  // every rank of the host saw the same: all fall back to the ring steps
  checkRanges(peers);
  mb_.send.assign(static_cast<size_t>(n), nullptr);
  mb_.recv.assign(static_cast<size_t>(n), nullptr);
  for (int q = 0; q < n; ++q) {
    const HostBuffers& b = peers[static_cast<size_t>(q)];
    if (q == me) {
      mb_.send[static_cast<size_t>(q)] = static_cast<const char*>(call_.sendbuf);
      mb_.recv[static_cast<size_t>(q)] = static_cast<char*>(call_.recvbuf);
      continue;
    }
    mb_.send[static_cast<size_t>(q)] = h_.maps_->map(q, b.sendShared, b.send, b.sendBytes, h_.comm_.who);
    mb_.recv[static_cast<size_t>(q)] = h_.maps_->map(q, b.recvShared, b.recv, b.recvBytes, h_.comm_.who);
  }
  mapped_ = true;
  ++h_.mappedCalls_;
  return true;
}

// Every range this rank touches in a peer's buffers lies inside what that peer published (it made the same call,
// so it published count * element size; a peer that did not is named, and nothing is touched).
void HostLevelOpImpl::checkRanges(const std::vector<HostBuffers>& peers) const {
  size_t end = 0;
  for (const ElemRange& r : mine_) {
    if (r.off > call_.count || r.len > call_.count - r.off)
      throwInternalError(fmt::format("{}: {} [shm host level]: range [{}, {}) passes the count", h_.comm_.who,
                                     describeCall(call_), r.off, r.off + r.len));
    end = std::max(end, (r.off + r.len) * elem());
  }
  for (size_t q = 0; q < peers.size(); ++q) {
    const HostBuffers& b = peers[q];
    if (end <= b.sendBytes && end <= b.recvBytes) continue;
    throw Error(hocclInvalidUsage,
                fmt::format("{}: {} [shm host level] would touch bytes up to {} of the buffers of {}, which published "
                            "{} (input) and {} (output) bytes. Nothing was read or written. Do all ranks pass buffers "
                            "of the documented size?",
                            h_.comm_.who, describeCall(call_), end, h_.session_->describeRank(static_cast<int>(q)),
                            b.sendBytes, b.recvBytes));
  }
}

void HostLevelOpImpl::reduceScatter() {
  if (!mapped_) throwInternalError("shm host level: reduceScatter without mappings");
  ArenaSession& s = *h_.session_;
  const int n = s.nranks(), me = s.rank();
  CollCall sum = call_;
  if (sum.op == hocclAvg) sum.op = hocclSum;  // the schedule's task divides the whole output at the end
  size_t bytes = 0;
  for (const ElemRange& r : mine_) {
    zeroCopyReduce(sum, me, n, mb_, r.off * elem(), r.off * elem(), r.len * elem(), false);
    bytes += r.len * elem();
  }
  for (int q = 0; q < n; ++q)
    if (q != me) count(q, 0, bytes);
}

bool HostLevelOpImpl::allGather() {
  if (!mapped_) return true;
  ArenaSession& s = *h_.session_;
  const int n = s.nranks(), me = s.rank();
  if (!pushed_) {
    const kernels::MemoryOps& mem = kernels::hostMemoryOps();
    const char* out = static_cast<const char*>(call_.recvbuf);
    size_t bytes = 0;
    for (int k = 1; k < n; ++k) {  // peers in a rotated order, so the ranks do not all write one rank at once
      const int q = (me + k) % n;
      for (const ElemRange& r : mine_)
        mem.copy(mb_.recv[static_cast<size_t>(q)] + r.off * elem(), out + r.off * elem(), r.len * elem());
    }
    for (const ElemRange& r : mine_) bytes += r.len * elem();
    for (int q = 0; q < n; ++q)
      if (q != me) count(q, bytes, 0);
    pushed_ = true;
    exchange_ = std::make_unique<Exchange>(s, call_, Protocol::HostDone, nullptr, 0, true);
  }
  return exchange_->poll();
}

ShmHostLevel::ShmHostLevel(const ShortcutContext& ctx, std::vector<int> ranks)
    : comm_(ctx), ranks_(std::move(ranks)),
      minBytes_(params::CMA_MIN_BYTES.isSet() ? static_cast<size_t>(params::CMA_MIN_BYTES.get()) : size_t{256} << 10) {
  const ConnectContext& c = *ctx.connect;
  group_.bootstrap = c.bootstrap;
  group_.nranks = static_cast<int>(ranks_.size());
  group_.rank = static_cast<int>(std::find(ranks_.begin(), ranks_.end(), c.rank) - ranks_.begin());
  for (int r : ranks_) group_.peers.push_back(c.peers.at(static_cast<size_t>(r)));
  group_.jobTag = c.jobTag;
  group_.health = c.health;
  const std::string name = fmt::format("{}-host{}", ShmTransport::namePrefix(c.jobTag), ranks_.front());
  ShortcutContext hostCtx = ctx;
  hostCtx.connect = &group_;
  session_ = std::make_unique<ArenaSession>(Arena::openGroup(group_, name, sizeof(HostBuffers)), hostCtx);
  maps_ = std::make_unique<PeerMaps>(group_);
  HOCCL_INFO(kShm,
             "shm: rank {} joined the host level of {} ranks (all-reduce through mapped registered buffers "
             "from {} bytes)",
             c.rank, ranks_.size(), minBytes_);
}

bool ShmHostLevel::canRun(const CollCall& call) const {
  return call.coll == Coll::AllReduce && call.op < hocclNumOps && kernels::isHostKind(call.sendKind) &&
         kernels::isHostKind(call.recvKind) && minBytes_ > 0 && call.count * kernels::typeSize(call.dtype) >= minBytes_;
}

std::unique_ptr<HostLevelOp> ShmHostLevel::start(const CollCall& call, std::vector<ElemRange> mine) {
  return std::make_unique<HostLevelOpImpl>(*this, call, std::move(mine));
}

}  // namespace hoccl::transport::shm
