/*
 * The shm host level of HO-Ring (see shm_host_level.h), on the ranks of one host, for all-reduce, reduce-scatter
 * and all-gather. Each rank's share is a list of pieces (transports/shortcut.h: HostPiece): elements at `off` of
 * the host ranks' inputs or outputs, held at `work` of the rank's working buffer (all-reduce: its output;
 * reduce-scatter and all-gather: HO-Ring's scratch).
 *
 * Two rounds in the host's arena (the protocol of shm_session.h), around the other levels' steps:
 *   1. address round, before HO-Ring's first step: each rank publishes the addresses and sizes of its input and
 *      output and, when they are registered shared memory, where they lie (shm_peer_maps.h: SharedDesc), stamped
 *      with its call. Every rank of the host sees the same descriptors, so all decide alike: mapped when every rank
 *      registered the buffers its peers touch (all-reduce: both; reduce-scatter: the input; all-gather: the
 *      output), else the op ends here and HO-Ring runs its ring steps over the slots (the fallback; nothing of a
 *      peer was touched). When mapped, each rank checks that every piece it will touch lies inside what each peer
 *      published and not in the peer's other buffer (in place), maps the peers' buffers (cached), and, for
 *      all-reduce and reduce-scatter, reduces each piece from every host rank's input, its own first, into its
 *      working buffer.
 *   2. closing round, after HO-Ring's last step: for all-reduce and all-gather each rank copies its pieces, now
 *      complete over every host, into every host rank's output (all-reduce: the peers'; all-gather: its own too),
 *      then every rank publishes; once all have published, every output is complete and nobody touches this rank's
 *      buffers any more.
 * Why it is safe in place: a rank's pieces are HO-Ring's level-0 part of each chunk, which holds no host peer's own
 * block (ho_ring.cc), and the check of round 1 refuses a piece that would read a peer's output (reduce-scatter) or
 * write a peer's input (all-gather) all the same. All-reduce: rank r writes its own output only in its own ranges
 * (the reduction, then the upper levels) and a peer's output only in r's ranges, which that peer neither reads nor
 * writes itself; a peer p reads r's input only in p's ranges, in p's reduction, before p publishes round 2; r's
 * output in p's ranges is written only by p's copy, which comes after p's reduction. A rank's previous call is over
 * before it publishes round 1 of the next, so no copy lands in a buffer its owner still uses.
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
  HostLevelOpImpl(ShmHostLevel& owner, const CollCall& call, std::vector<HostPiece> mine)
      : h_(owner), call_(call), mine_(std::move(mine)) {}
  bool agree() override;
  bool mapped() const override { return mapped_; }
  void reduceScatter(char* work) override;
  bool allGather(const char* work) override;
  std::string missing() const override { return exchange_ ? exchange_->missing() : "nobody"; }

 private:
  void checkRanges(const std::vector<HostBuffers>& peers) const;
  size_t elem() const { return kernels::typeSize(call_.dtype); }
  // Whether the host peers read this rank's input (all-reduce, reduce-scatter) and write its output (all-reduce,
  // all-gather).
  bool peersRead() const { return call_.coll != Coll::AllGather; }
  bool peersWrite() const { return call_.coll != Coll::ReduceScatter; }
  void count(int pos, size_t sent, size_t received) {
    h_.comm_.counters->count(h_.comm_.topology->linkClass(h_.comm_.connect->rank, h_.ranks_[static_cast<size_t>(pos)]),
                             sent, received);
  }

  ShmHostLevel& h_;
  CollCall call_;
  std::vector<HostPiece> mine_;
  HostBuffers published_{};
  std::unique_ptr<Exchange> exchange_;
  bool agreed_ = false, mapped_ = false, pushed_ = false;
  MappedBuffers mb_;
};

bool HostLevelOpImpl::agree() {
  ArenaSession& s = *h_.session_;
  if (agreed_) return true;
  if (!exchange_) {
    const int nranks = h_.comm_.connect->nranks;
    const size_t in = inputBytes(call_, nranks), out = outputBytes(call_, nranks);
    published_ = HostBuffers{reinterpret_cast<uint64_t>(call_.sendbuf),
                             reinterpret_cast<uint64_t>(call_.recvbuf),
                             in,
                             out,
                             describeShared(h_.comm_.registrations, call_.sendbuf, in),
                             describeShared(h_.comm_.registrations, call_.recvbuf, out)};
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
    all &= b.send != 0 && b.recv != 0 && (!peersRead() || b.sendShared.fd >= 0) &&
           (!peersWrite() || b.recvShared.fd >= 0);
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
    if (peersRead())
      mb_.send[static_cast<size_t>(q)] = h_.maps_->map(q, b.sendShared, b.send, b.sendBytes, h_.comm_.who);
    if (peersWrite())
      mb_.recv[static_cast<size_t>(q)] = h_.maps_->map(q, b.recvShared, b.recv, b.recvBytes, h_.comm_.who);
  }
  mapped_ = true;
  ++h_.mappedCalls_;
  return true;
}

// Every piece this rank touches lies inside the call's buffers, and inside what each peer published (it made the
// same call, so it published the same sizes; a peer that did not is named, and nothing is touched). In place, no
// piece reads a peer's output (reduce-scatter) or writes a peer's input (all-gather): the peer works there itself.
void HostLevelOpImpl::checkRanges(const std::vector<HostBuffers>& peers) const {
  const size_t e = elem();
  const size_t limit = call_.coll == Coll::AllReduce ? call_.count
                                                     : call_.count * static_cast<size_t>(h_.comm_.connect->nranks);
  size_t end = 0;
  for (const HostPiece& r : mine_) {
    if (r.off > limit || r.len > limit - r.off || r.work > limit || r.len > limit - r.work)
      throwInternalError(
          fmt::format("{}: {} [shm host level]: piece [{}, {}) at {} of the working buffer passes the "
                      "{} elements of the buffers",
                      h_.comm_.who, describeCall(call_), r.off, r.off + r.len, r.work, limit));
    end = std::max(end, (r.off + r.len) * e);
  }
  const int me = h_.session_->rank();
  for (size_t q = 0; q < peers.size(); ++q) {
    const HostBuffers& b = peers[q];
    if ((peersRead() && end > b.sendBytes) || (peersWrite() && end > b.recvBytes))
      throw Error(hocclInvalidUsage,
                  fmt::format("{}: {} [shm host level] would touch bytes up to {} of the {} of {}, which published {} "
                              "(input) and {} (output) bytes. Nothing was read or written. Do all ranks pass buffers "
                              "of the documented size?",
                              h_.comm_.who, describeCall(call_), end, peersRead() ? "input" : "output",
                              h_.session_->describeRank(static_cast<int>(q)), b.sendBytes, b.recvBytes));
    if (call_.coll == Coll::AllReduce || static_cast<int>(q) == me) continue;
    // The peer's address range this rank touches, against the peer's other buffer.
    const uint64_t touched = peersRead() ? b.send : b.recv, other = peersRead() ? b.recv : b.send;
    const uint64_t otherBytes = peersRead() ? b.recvBytes : b.sendBytes;
    for (const HostPiece& r : mine_) {
      const uint64_t lo = touched + r.off * e, hi = lo + r.len * e;
      if (lo < other + otherBytes && other < hi)
        throw Error(hocclInvalidUsage,
                    fmt::format("{}: {} [shm host level]: bytes [{}, {}) of the {} of {} overlap its {}, which that "
                                "rank works on itself. Nothing was read or written. An in-place call must pass the "
                                "output at the input's own block (recvbuff == sendbuff + rank * count for "
                                "reduce-scatter, sendbuff == recvbuff + rank * count for all-gather).",
                                h_.comm_.who, describeCall(call_), r.off * e, r.off * e + r.len * e,
                                peersRead() ? "input" : "output", h_.session_->describeRank(static_cast<int>(q)),
                                peersRead() ? "output" : "input"));
    }
  }
}

void HostLevelOpImpl::reduceScatter(char* work) {
  if (!mapped_ || !peersRead()) throwInternalError("shm host level: reduceScatter without mappings of the inputs");
  ArenaSession& s = *h_.session_;
  const int n = s.nranks(), me = s.rank();
  CollCall sum = call_;
  if (sum.op == hocclAvg) sum.op = hocclSum;  // the schedule's task divides the whole output at the end
  MappedBuffers into = mb_;                   // the reduction lands in the working buffer
  into.recv[static_cast<size_t>(me)] = work;
  size_t bytes = 0;
  for (const HostPiece& r : mine_) {
    zeroCopyReduce(sum, me, n, into, r.off * elem(), r.work * elem(), r.len * elem(), false);
    bytes += r.len * elem();
  }
  for (int q = 0; q < n; ++q)
    if (q != me) count(q, 0, bytes);
}

bool HostLevelOpImpl::allGather(const char* work) {
  if (!mapped_) return true;
  ArenaSession& s = *h_.session_;
  const int n = s.nranks(), me = s.rank();
  if (!pushed_) {
    if (peersWrite()) {
      const kernels::MemoryOps& mem = kernels::hostMemoryOps();
      size_t bytes = 0;
      for (int k = 0; k < n; ++k) {  // peers in a rotated order, so the ranks do not all write one rank at once
        const int q = (me + k) % n;
        for (const HostPiece& r : mine_) {
          char* dst = mb_.recv[static_cast<size_t>(q)] + r.off * elem();
          const char* src = work + r.work * elem();
          if (dst != src) mem.copy(dst, src, r.len * elem());  // all-reduce's own output already holds it
        }
      }
      for (const HostPiece& r : mine_) bytes += r.len * elem();
      for (int q = 0; q < n; ++q)
        if (q != me) count(q, bytes, 0);
    }
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
             "shm: rank {} joined the host level of {} ranks (all-reduce, reduce-scatter, all-gather through mapped "
             "registered buffers "
             "from {} bytes)",
             c.rank, ranks_.size(), minBytes_);
}

bool ShmHostLevel::canRun(const CollCall& call) const {
  const bool reduces = call.coll == Coll::AllReduce || call.coll == Coll::ReduceScatter;
  if (!reduces && call.coll != Coll::AllGather) return false;
  const int nranks = comm_.connect->nranks;
  return (!reduces || call.op < hocclNumOps) && kernels::isHostKind(call.sendKind) &&
         kernels::isHostKind(call.recvKind) && minBytes_ > 0 &&
         std::max(inputBytes(call, nranks), outputBytes(call, nranks)) >= minBytes_;
}

std::unique_ptr<HostLevelOp> ShmHostLevel::start(const CollCall& call, std::vector<HostPiece> mine) {
  return std::make_unique<HostLevelOpImpl>(*this, call, std::move(mine));
}

}  // namespace hoccl::transport::shm
