// The ibverbs channel: queue-pair setup and the chunked, credit-controlled data path (see ibv_channel.h).
#include "transports/ibverbs/ibv_channel.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "kernels/cpu/copy.h"
#include "transports/ibverbs/wc_error.h"
#include "transports/transport_util.h"

namespace hoccl::transport::ibverbs {
namespace {

/// The header at the start of every slot.
struct ChunkHeader {
  uint64_t msgBytes;    ///< the whole message's length
  uint64_t offset;      ///< where this chunk starts in the message
  uint64_t seq;         ///< chunk sequence number of the direction
  uint32_t chunkBytes;  ///< payload bytes after the header
  uint32_t magic;       ///< kChunkMagic
  CallTag tag;          ///< the message's call tag (RecvTarget::tag), 0 when untagged
  char pad[28];
};
static_assert(sizeof(ChunkHeader) == kChunkHeaderBytes, "chunk header is 64 bytes");
constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"

// What a work request is, in the top byte of its wr_id; the chunk sequence number below.
constexpr uint64_t kKindShift = 56;
constexpr uint64_t kSeqMask = (uint64_t{1} << kKindShift) - 1;
enum Kind : uint64_t { kRecv = 1, kData = 2, kCredit = 3 };
uint64_t wrId(Kind k, uint64_t seq) { return (static_cast<uint64_t>(k) << kKindShift) | (seq & kSeqMask); }

constexpr size_t kWordsBytes = 4096;  // credit words: incoming at 0, outgoing at 64

}  // namespace

IbvChannel::IbvChannel(std::shared_ptr<IbvDevice> dev, const boot::RankInfo& self, const boot::RankInfo& peerInfo,
                       uint32_t slots, size_t slotBytes, bool adaptiveRouting)
    : dev_(std::move(dev)), self_(self), peer_(peerInfo), slots_(slots), slotBytes_(slotBytes),
      adaptiveRouting_(adaptiveRouting), credits_(slots), ret_(slots) {
  if (slots_ < 2 || slotBytes_ < 4096 || slotBytes_ % 4096 != 0)
    throwInternalError(fmt::format("ibverbs: bad ring shape ({} slots of {} bytes)", slots_, slotBytes_));
  const IbvLib& lib = dev_->lib();
  memBytes_ = 2 * static_cast<size_t>(slots_) * slotBytes_ + kWordsBytes;
  mem_ = static_cast<char*>(std::aligned_alloc(4096, memBytes_));
  if (!mem_)
    throwSystemError(fmt::format("ibverbs: allocating {} bytes of rings for {}", memBytes_, describePeer(peer_)),
                     ENOMEM);
  std::memset(mem_, 0, memBytes_);
  try {
    lease_ = dev_->regCache().acquire(mem_, memBytes_);
    const int cqe = static_cast<int>(3 * slots_ + 8);
    cq_ = lib.create_cq(dev_->context(), cqe, nullptr, nullptr, 0);
    if (!cq_)
      throwSystemError(fmt::format("ibverbs: ibv_create_cq ({} entries) on {}", cqe, dev_->port().name()), errno);
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = 2 * slots_ + 4;  // a chunk is two requests with adaptive routing; one credit write
    init.cap.max_recv_wr = slots_;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = 64;
    qp_ = lib.create_qp(dev_->pd(), &init);
    if (!qp_) {
      init.cap.max_inline_data = 0;  // some providers have no inline data
      qp_ = lib.create_qp(dev_->pd(), &init);
    }
    if (!qp_) throwSystemError(fmt::format("ibverbs: ibv_create_qp (RC) on {}", dev_->port().name()), errno);
    inlineCredit_ = init.cap.max_inline_data >= sizeof(uint64_t);

    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = static_cast<uint8_t>(dev_->port().port);
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (int rc = lib.modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      throwSystemError(fmt::format("ibverbs: queue pair to INIT on {}", dev_->port().name()), rc);
    for (uint64_t i = 0; i < slots_; ++i) postRecvRequest(i);
    psn_ = std::random_device{}() & 0xffffff;
  } catch (...) {
    if (qp_) lib.destroy_qp(qp_);
    if (cq_) lib.destroy_cq(cq_);
    lease_.reset();
    dev_->regCache().invalidate(mem_, memBytes_);
    std::free(mem_);
    throw;
  }
}

IbvChannel::~IbvChannel() {
  const IbvLib& lib = dev_->lib();
  if (qp_) lib.destroy_qp(qp_);
  if (cq_) lib.destroy_cq(cq_);
  lease_.reset();
  dev_->regCache().invalidate(mem_, memBytes_);  // the registration must not outlive the memory
  std::free(mem_);
}

uint32_t IbvChannel::lkey() const { return static_cast<ibv_mr*>(lease_.handle())->lkey; }
uint32_t IbvChannel::rkey() const { return static_cast<ibv_mr*>(lease_.handle())->rkey; }

ConnInfo IbvChannel::localInfo() const {
  const PortInfo& p = dev_->port();
  ConnInfo c;
  c.fromRank = static_cast<uint32_t>(self_.rank);
  c.toRank = static_cast<uint32_t>(peer_.rank);
  c.lid = p.lid;
  c.linkLayer = p.linkLayer;
  c.mtu = p.mtu;
  c.port = static_cast<uint8_t>(p.port);
  c.gidIndex = static_cast<uint8_t>(p.gidIndex);
  c.adaptiveRouting = adaptiveRouting_;
  c.gid = p.gid;
  c.qpn = qp_->qp_num;
  c.psn = psn_;
  c.ringAddr = reinterpret_cast<uintptr_t>(mem_);
  c.ringRkey = rkey();
  c.slots = slots_;
  c.slotBytes = slotBytes_;
  c.creditAddr = reinterpret_cast<uintptr_t>(mem_ + 2 * slots_ * slotBytes_);
  c.creditRkey = rkey();
  return c;
}

void IbvChannel::connect(const ConnInfo& remote) {
  const PortInfo& p = dev_->port();
  if (remote.slots != slots_ || remote.slotBytes != slotBytes_)
    throwInvalidUsage(
        fmt::format("ibverbs: rank {} and {} disagree on the ring ({} slots of {} bytes here, {} of {} "
                    "there); set HOCCL_IB_SLOTS and HOCCL_IB_SLOT_SIZE alike on every rank",
                    self_.rank, describePeer(peer_), slots_, slotBytes_, remote.slots, remote.slotBytes));
  if (remote.linkLayer != p.linkLayer)
    throwInvalidUsage(
        fmt::format("ibverbs: rank {} uses {} port {} but {} uses a port of the other link layer; pick "
                    "ports of one fabric with HOCCL_IB_HCA",
                    self_.rank, p.linkLayer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand", p.name(),
                    describePeer(peer_)));
  remote_ = remote;
  const IbvLib& lib = dev_->lib();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(p.mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = static_cast<uint8_t>(p.port);
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  const bool global = p.linkLayer == LinkLayer::Ethernet || remote.lid == 0;
  if (global) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(p.gidIndex);
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = 0;
  }
  const std::string what = fmt::format("ibverbs: rank {} connecting its queue pair on {} to {}", self_.rank, p.name(),
                                       describePeer(peer_));
  if (int rc = lib.modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    throwSystemError(what + " (state RTR; on RoCE check HOCCL_IB_GID_INDEX and that both hosts share a network)", rc);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = static_cast<uint8_t>(params::IB_TIMEOUT.get());
  attr.retry_cnt = static_cast<uint8_t>(params::IB_RETRY_CNT.get());
  attr.rnr_retry = 7;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = 1;
  if (int rc = lib.modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    throwSystemError(what + " (state RTS)", rc);
}

void IbvChannel::postRecvRequest(uint64_t seq) {
  ibv_recv_wr wr{};
  wr.wr_id = wrId(kRecv, seq);
  wr.sg_list = nullptr;  // writes with immediate place their data themselves
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad))
    fail(fmt::format("posting a receive request failed: {}", std::strerror(rc)));
}

void IbvChannel::postWrite(uint64_t id, const void* src, uint32_t lk, uint32_t len, uint64_t raddr, uint32_t rk,
                           bool withImm, uint32_t imm, bool inlineData) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(src);
  sge.length = len;
  sge.lkey = lk;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | (inlineData ? IBV_SEND_INLINE : 0);
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rk;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) fail(fmt::format("posting an RDMA write failed: {}", std::strerror(rc)));
}

void IbvChannel::postTaggedSend(const void* data, size_t bytes, CallTag tag) {
  if (bytes == 0) return;  // both sides skip empty messages
  if (!data)
    throwInvalidArgument(fmt::format("ibverbs: send of {} bytes to rank {} from a null buffer", bytes, peer_.rank));
  sendMsgs_.push_back(SendMsg{static_cast<const char*>(data), bytes, tag});
}

void IbvChannel::postRecv(size_t bytes, RecvTarget target) {
  if (bytes == 0) return;
  if (!target.direct && !target.sink)
    throwInvalidArgument(
        fmt::format("ibverbs: receive of {} bytes from rank {} has neither a buffer nor a sink", bytes, peer_.rank));
  recvMsgs_.push_back(RecvMsg{bytes, std::move(target)});
}

bool IbvChannel::progress() {
  bool moved = pollCompletions();
  // The credit word: the peer's cumulative count of our chunks it consumed.
  const auto* creditIn = reinterpret_cast<const uint64_t*>(mem_ + 2 * slots_ * slotBytes_);
  const uint64_t consumed = __atomic_load_n(creditIn, __ATOMIC_ACQUIRE);
  if (consumed != credits_.consumed()) {
    credits_.remoteConsumed(consumed);
    moved = true;
  }
  moved = deliverChunks() || moved;
  if (recvMsgs_.empty() && ret_.owed() && ret_.inFlight()) settleCredits();
  moved = returnCredits() || moved;
  moved = postChunks() || moved;
  while (!sendMsgs_.empty() && sendPostedFrom_ > 0 && credits_.completed() > sendMsgs_.front().lastSeq) {
    sendMsgs_.pop_front();  // every chunk of it was written
    --sendPostedFrom_;
    moved = true;
  }
  return moved;
}

bool IbvChannel::pollCompletions() {
  ibv_wc wc[32];
  bool moved = false;
  while (true) {
    const int n = ibv_poll_cq(cq_, 32, wc);
    if (n < 0) fail(fmt::format("polling the completion queue failed ({})", n));
    for (int i = 0; i < n; ++i) {
      const Kind kind = static_cast<Kind>(wc[i].wr_id >> kKindShift);
      const uint64_t seq = wc[i].wr_id & kSeqMask;
      if (wc[i].status != IBV_WC_SUCCESS) {
        WcWhere w{self_.rank, describePeer(peer_), dev_->port().name(),
                  kind == kRecv     ? fmt::format("receiving chunk {}", seq)
                  : kind == kData   ? fmt::format("the RDMA write of chunk {}", seq)
                  : kind == kCredit ? std::string("the credit write")
                                    : fmt::format("work request {:#x}", wc[i].wr_id)};
        throw wcError(wc[i].status, w);
      }
      switch (kind) {
        case kRecv: {
          const uint64_t got = ret_.arrived();
          if (!(wc[i].wc_flags & IBV_WC_WITH_IMM) || ntohl(wc[i].imm_data) != static_cast<uint32_t>(got))
            fail(fmt::format("chunk {} arrived with immediate {:#x} (expected {:#x})", got, ntohl(wc[i].imm_data),
                             static_cast<uint32_t>(got)));
          postRecvRequest(got + slots_);
          break;
        }
        case kData: credits_.localComplete(); break;
        case kCredit: ret_.returnCompleted(); break;
        default: fail(fmt::format("a completion with unknown work request {:#x}", wc[i].wr_id));
      }
      moved = true;
    }
    if (n < 32) break;
  }
  return moved;
}

bool IbvChannel::deliverChunks() {
  bool moved = false;
  while (ret_.waiting() > 0 && !recvMsgs_.empty()) {
    const uint64_t seq = ret_.consumedCount();
    const char* slot = mem_ + (seq % slots_) * slotBytes_;
    ChunkHeader h;
    std::memcpy(&h, slot, sizeof(h));
    RecvMsg& m = recvMsgs_.front();
    if (h.magic != kChunkMagic || h.seq != seq || h.chunkBytes == 0 || h.chunkBytes > slotBytes_ - kChunkHeaderBytes)
      fail(fmt::format("chunk {} has a corrupt header (magic {:#x}, sequence {}, {} bytes)", seq, h.magic, h.seq,
                       h.chunkBytes));
    if (h.msgBytes != m.bytes)
      throwMismatch(
          fmt::format("ibverbs: message size mismatch with {}: this rank posted a receive of {} bytes, the "
                      "peer sent {} bytes; nothing beyond this rank's buffer was written. The two ranks' "
                      "calls differ (count, type, collective or order)",
                      describePeer(peer_), m.bytes, h.msgBytes));
    if (h.tag && m.target.tag && h.tag != m.target.tag)
      throwMismatch(fmt::format(
          "ibverbs: the message from {} belongs to another call: its size ({} bytes) matches this rank's receive, "
          "but it is tagged for call {:#010x} where this rank receives for call {:#010x} ({} bytes of it delivered "
          "so far; nothing more was written). The two ranks' calls differ (type, op, count, collective or order) in "
          "a way their message sizes do not show; HOCCL_CHECK_MISMATCH=2 names both calls",
          describePeer(peer_), h.msgBytes, h.tag, m.target.tag, m.delivered));
    if (h.offset != m.delivered || h.chunkBytes > m.bytes - m.delivered)
      fail(fmt::format("chunk {} claims bytes {}..{} of a {}-byte message, {} delivered so far", seq, h.offset,
                       h.offset + h.chunkBytes, m.bytes, m.delivered));
    const char* payload = slot + kChunkHeaderBytes;
    if (m.target.direct) kernels::copy(static_cast<char*>(m.target.direct) + m.delivered, payload, h.chunkBytes);
    else m.target.sink(payload, m.delivered, h.chunkBytes);
    m.delivered += h.chunkBytes;
    ret_.consumed();
    if (m.delivered == m.bytes) recvMsgs_.pop_front();
    moved = true;
  }
  return moved;
}

bool IbvChannel::returnCredits() {
  if (!ret_.shouldReturn()) return false;
  auto* creditOut = reinterpret_cast<uint64_t*>(mem_ + 2 * slots_ * slotBytes_ + 64);
  *creditOut = ret_.startReturn();  // not touched again until this write completes
  postWrite(wrId(kCredit, 0), creditOut, lkey(), sizeof(uint64_t), remote_.creditAddr, remote_.creditRkey, false, 0,
            inlineCredit_);
  return true;
}

void IbvChannel::settleCredits() {
  // One round trip on a healthy link; a broken one completes the write with an error after the transport's retries
  // (HOCCL_IB_TIMEOUT, HOCCL_IB_RETRY_CNT), and HOCCL_TIMEOUT bounds it in any case.
  const auto limit = std::chrono::seconds(params::TIMEOUT.get());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Backoff backoff(false);
  while (ret_.inFlight()) {
    if (pollCompletions()) continue;
    if (std::chrono::steady_clock::now() > deadline)
      fail(fmt::format("the credit write did not complete within {} s (HOCCL_TIMEOUT)", limit.count()));
    backoff.pause();
  }
}

bool IbvChannel::postChunks() {
  bool moved = false;
  const size_t payloadMax = slotBytes_ - kChunkHeaderBytes;
  while (sendPostedFrom_ < sendMsgs_.size() && credits_.canPost()) {
    SendMsg& m = sendMsgs_[sendPostedFrom_];
    const uint64_t seq = credits_.post();
    const size_t len = std::min(payloadMax, m.bytes - m.offset);
    char* staging = mem_ + (slots_ + seq % slots_) * slotBytes_;
    ChunkHeader h{};
    h.msgBytes = m.bytes;
    h.offset = m.offset;
    h.seq = seq;
    h.chunkBytes = static_cast<uint32_t>(len);
    h.magic = kChunkMagic;
    h.tag = m.tag;
    std::memcpy(staging, &h, sizeof(h));
    kernels::copy(staging + kChunkHeaderBytes, m.data + m.offset, len);
    const uint64_t raddr = remote_.ringAddr + (seq % slots_) * slotBytes_;
    const uint32_t total = static_cast<uint32_t>(kChunkHeaderBytes + len);
    if (adaptiveRouting_) {
      // The data first, then an empty write with immediate that completes at the receiver after it.
      ibv_sge sge{reinterpret_cast<uintptr_t>(staging), total, lkey()};
      ibv_send_wr data{};
      data.wr_id = wrId(kData, seq);
      data.sg_list = &sge;
      data.num_sge = 1;
      data.opcode = IBV_WR_RDMA_WRITE;
      data.wr.rdma.remote_addr = raddr;
      data.wr.rdma.rkey = remote_.ringRkey;
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(qp_, &data, &bad))
        fail(fmt::format("posting an RDMA write failed: {}", std::strerror(rc)));
      postWrite(wrId(kData, seq), nullptr, 0, 0, raddr, remote_.ringRkey, true, static_cast<uint32_t>(seq), false);
    } else {
      postWrite(wrId(kData, seq), staging, lkey(), total, raddr, remote_.ringRkey, true, static_cast<uint32_t>(seq),
                false);
    }
    m.offset += len;
    if (m.offset == m.bytes) {
      m.lastSeq = seq;
      ++sendPostedFrom_;
    }
    moved = true;
  }
  return moved;
}

std::string IbvChannel::where() const {
  return fmt::format("rank {} on {} with {}", self_.rank, dev_->port().name(), describePeer(peer_));
}

void IbvChannel::fail(const std::string& what) const {
  throwRemoteError(
      fmt::format("ibverbs: {}: {} ({} send(s), {} receive(s) pending). Check `ibv_devinfo` on both "
                  "hosts; HOCCL_IB_DISABLE=1 makes the job use tcp",
                  where(), what, sendMsgs_.size(), recvMsgs_.size()));
}

}  // namespace hoccl::transport::ibverbs
