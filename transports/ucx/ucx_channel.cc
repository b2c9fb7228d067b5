// The ucx channel: tagged send/receive through the communicator's worker (see ucx_channel.h).
#include "transports/ucx/ucx_channel.h"

#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "transports/transport_util.h"

namespace hoccl::transport::ucx {
namespace {

void onSent(void*, ucs_status_t status, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->done = true;
}

void onReceived(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  if (info) {
    op->senderTag = info->sender_tag;
    op->length = info->length;
  }
  op->done = true;
}

}  // namespace

UcxChannel::UcxChannel(std::shared_ptr<Worker> worker, const boot::RankInfo& self, const boot::RankInfo& peerInfo)
    : worker_(std::move(worker)), self_(self), peer_(peerInfo) {
  if (!worker_ || !worker_->peer(peer_.rank).ep)
    throwInternalError(fmt::format("ucx: channel to rank {} without an endpoint", peer_.rank));
  // UCX's shared-memory transports report no peer failure: a same-host peer's death is seen by its pid, as shm does.
  // The host identity (hostname and boot id), not the hostname alone: another host's pid means nothing here.
  watchPid_ = self_.hostHash == peer_.hostHash && peer_.pid != self_.pid && processAlive(peer_.pid);
}

UcxChannel::~UcxChannel() {
  auto lock = worker_->lock();
  if (markedBusy_) worker_->markBusy(false);
  std::vector<std::unique_ptr<Op>> live;
  auto drop = [&](std::unique_ptr<Op>& op, bool cancel) {
    if (!op || !op->request) return;
    if (!op->done) {
      if (cancel) worker_->api().request_cancel(worker_->handle(), op->request);  // sends end with the endpoint's close
      worker_->api().request_free(op->request);  // UCX frees it once it completes; the record must outlive that
      live.push_back(std::move(op));
    } else {
      worker_->api().request_free(op->request);
    }
  };
  for (auto& op : sends_) drop(op, false);
  for (auto& r : recvs_) {
    // A staging buffer UCX may still write goes back to the pool only once its receive is over.
    if (r.op && r.op->staging && (!r.op->request || r.op->done)) worker_->releaseStaging(r.op->staging);
    drop(r.op, true);
  }
  if (!live.empty()) worker_->adoptOrphans(std::move(live));
}

void UcxChannel::postTaggedSend(const void* data, size_t bytes, CallTag tag) {
  if (bytes == 0) return;  // both sides skip empty messages
  CallScope scope(*this);
  if (!data)
    throwInvalidArgument(fmt::format("ucx: send of {} bytes to rank {} from a null buffer", bytes, peer_.rank));
  if (bytes > kMaxMessage)
    throwInvalidArgument(
        fmt::format("ucx: a message of {} bytes to rank {} is larger than the {} bytes a tag "
                    "describes; split it",
                    bytes, peer_.rank, kMaxMessage));
  PeerEp& p = worker_->peer(peer_.rank);
  if (p.error != UCS_OK) fail(statusText(p.error));
  auto op = std::make_unique<Op>();
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.send = onSent;
  rp.user_data = op.get();
  void* req = worker_->api().tag_send_nbx(p.ep, data, bytes, makeTag(self_.rank, bytes, tag), &rp);
  if (req == nullptr) {
    op->done = true;  // sent (or buffered by UCX) at once
  } else if (UCS_PTR_IS_ERR(req)) {
    fail(fmt::format("sending {} bytes failed: {}", bytes, statusText(UCS_PTR_STATUS(req))));
  } else {
    op->request = req;
  }
  sends_.push_back(std::move(op));
}

void UcxChannel::postRecv(size_t bytes, RecvTarget target) {
  if (bytes == 0) return;
  CallScope scope(*this);
  if (!target.direct && !target.sink)
    throwInvalidArgument(
        fmt::format("ucx: receive of {} bytes from rank {} has neither a buffer nor a sink", bytes, peer_.rank));
  auto op = std::make_unique<Op>();
  void* buffer = target.direct;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  rp.cb.recv = onReceived;
  rp.user_data = op.get();
  if (!buffer) {
    op->staging = worker_->acquireStaging(bytes);
    buffer = op->staging->data.get();
    if (op->staging->memh) {
      rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      rp.memh = op->staging->memh;
    }
  }
  void* req = worker_->api().tag_recv_nbx(worker_->handle(), buffer, bytes, makeTag(peer_.rank, 0), kRankMask, &rp);
  if (UCS_PTR_IS_ERR(req)) {
    if (op->staging) worker_->releaseStaging(op->staging);
    fail(fmt::format("posting a receive of {} bytes failed: {}", bytes, statusText(UCS_PTR_STATUS(req))));
  }
  op->request = req;
  recvs_.push_back({std::move(op), bytes, std::move(target)});
}

void UcxChannel::retireRecv(Recv& r) {
  Op& op = *r.op;
  const uint64_t sent = op.senderTag & kMaxMessage;
  if (op.status == UCS_ERR_MESSAGE_TRUNCATED || (op.status == UCS_OK && (sent != r.bytes || op.length != r.bytes))) {
    throwMismatch(fmt::format(
        "ucx: message size mismatch with {}: this rank posted a receive of {} bytes, the peer sent {} bytes; "
        "nothing beyond this rank's buffer was written. The two ranks' calls differ (count, type, collective or "
        "order)",
        describePeer(peer_), r.bytes, sent));
  }
  const uint64_t theirs = callTagBitsOf(op.senderTag), mine = callTagBits(r.target.tag);
  if (op.status == UCS_OK && theirs && mine && theirs != mine)
    throwMismatch(fmt::format(
        "ucx: the message from {} belongs to another call: its size ({} bytes) matches this rank's receive, but it "
        "is tagged for call {:#04x} where this rank receives for call {:#04x}. The two ranks' calls differ (type, op, "
        "count, collective or order) in a way their message sizes do not show; HOCCL_CHECK_MISMATCH=2 names both "
        "calls",
        describePeer(peer_), sent, theirs, mine));
  if (op.status != UCS_OK) fail(fmt::format("receiving {} bytes failed: {}", r.bytes, statusText(op.status)));
  if (op.staging) {
    r.target.sink(op.staging->data.get(), 0, r.bytes);
    worker_->releaseStaging(op.staging);
    op.staging = nullptr;
  }
}

bool UcxChannel::progress() {
  if (sends_.empty() && recvs_.empty()) return false;
  CallScope scope(*this);
  bool moved = worker_->progress();
  while (!recvs_.empty() && recvs_.front().op->done) {
    Recv& r = recvs_.front();
    if (r.op->request) {
      worker_->api().request_free(r.op->request);
      r.op->request = nullptr;
    }
    retireRecv(r);
    recvs_.pop_front();
    moved = true;
  }
  while (!sends_.empty() && sends_.front()->done) {
    Op& op = *sends_.front();
    if (op.request) {
      worker_->api().request_free(op.request);
      op.request = nullptr;
    }
    if (op.status != UCS_OK) fail(fmt::format("a send failed: {}", statusText(op.status)));
    sends_.pop_front();
    moved = true;
  }
  if (!sends_.empty() || !recvs_.empty()) {
    const PeerEp& p = worker_->peer(peer_.rank);
    if (p.error != UCS_OK) fail(fmt::format("its endpoint failed: {}", statusText(p.error)));
    if (!moved && watchPid_ && (++idlePolls_ & 255) == 0 && !processAlive(peer_.pid))
      fail("its process has exited or was killed");
  }
  return moved;
}

void UcxChannel::waitForActivity(int timeoutMicros) { worker_->waitForActivity(timeoutMicros); }

void UcxChannel::fail(const std::string& what) const {
  std::string selfHost(self_.hostname, strnlen(self_.hostname, sizeof(self_.hostname)));
  throwRemoteError(
      fmt::format("ucx: rank {} lost its peer {}: {} ({} send(s), {} receive(s) pending). The peer process "
                  "probably exited, crashed or was killed: check its output. If it is still running, check the "
                  "network between {} and the peer's host (UCX_TLS, UCX_NET_DEVICES)",
                  self_.rank, describePeer(peer_), what, sends_.size(), recvs_.size(),
                  selfHost.empty() ? "this host" : selfHost));
}

}  // namespace hoccl::transport::ucx
