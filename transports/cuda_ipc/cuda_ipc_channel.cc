/*
 * The direct device path between two ranks of one host (cuda_ipc_channel.h). States: Agreeing (Hello and Verdict on
 * the wire), Settling (both verdicts known; waits until the wire counts none of the agreement's frames, so that the
 * path chosen next owns the wire alone), then Direct or Fallback for the channel's lifetime.
 *
 * Frames: every control message is one 256-byte frame (cuda_ipc_protocol.h), so every receive posted to the wire is
 * the same and a frame is dispatched on its kind, whatever the order in which the peer's Ready and Credit frames
 * interleave. This rank keeps exactly as many frame receives posted as its posted operations still wait for
 * (creditsDue_ + readysDue_: one per piece), never more, so a receive never takes bytes of a later host-buffer
 * call: an operation completes only once every frame it sends has left the wire (pending()), so the peer's frames
 * of a call all precede its next call's bytes. A schedule's matching send and receive may sit in different steps
 * of the two ranks (the verifier's rendezvous rule only asks that they be current at once): a Ready may then arrive
 * before this rank posted its receive, in a frame receive meant for a Credit. It is kept (earlyReadys_) and
 * handled once the receive is posted, and a replacement frame receive is posted for the Credit.
 * The wire's pending() counts sends and receives together; this channel knows its open frame receives, so the rest
 * are its frame sends, which complete in posting order (as in the staging pipeline).
 */
#include "transports/cuda_ipc/cuda_ipc_channel.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "kernels/memory.h"

namespace hoccl::transport::cuda_ipc {

HandleMode parseHandleMode(const std::string& text) {
  if (text.empty() || text == "auto") return HandleMode::Auto;
  if (text == "legacy") return HandleMode::Legacy;
  if (text == "fd") return HandleMode::Fd;
  throwInvalidArgument(fmt::format("HOCCL_IPC_HANDLE={} is not auto, legacy or fd", text));
}

IpcChannel::IpcChannel(Channel& wire, device::Device& dev, int rank, int peer, bool willing, size_t slotBytes,
                       size_t slots, DeviceFallback fallback, HandleMode handles)
    : wire_(wire), dev_(dev), rank_(rank), willing_(willing), makeFallback_(std::move(fallback)), slotBytes_(slotBytes),
      slots_(slots) {
  if (wire.peer() != peer)
    throwInternalError(
        fmt::format("rank {}: a device channel to rank {} over the channel to rank {}", rank, peer, wire.peer()));
  Hello h;
  h.rank = rank;
  h.pid = static_cast<int32_t>(getpid());
  h.slotBytes = slotBytes_;
  h.slots = slots_;
  const std::string key = dev_.peerKey();
  std::strncpy(h.deviceKey, key.c_str(), sizeof h.deviceKey - 1);
  if (willing_) {
    try {
      exportArea(handles, &h);
    } catch (const Error& e) {
      HOCCL_WARN(kNet,
                 "rank {} -> rank {}: cannot export a device receive area of {} bytes for the direct device path ({}); "
                 "device buffers between them are staged through host memory",
                 rank_, peer, slotBytes_ * slots_, e.what());
      release();
      willing_ = false;
    }
  }
  h.willing = willing_ ? 1 : 0;
  postFrameRecv();  // the peer's Hello
  postFrameRecv();  // and its Verdict
  sendFrame(&h, sizeof h);
}

// Allocates this rank's receive area and exports it: cuMem memory (the kind ncclMemAlloc gives) is exported as a
// POSIX file descriptor behind a Unix socket, other memory as a legacy IPC handle.
void IpcChannel::exportArea(HandleMode handles, Hello* h) {
  const size_t bytes = slotBytes_ * slots_;
  if (handles == HandleMode::Fd && !dev_.fdHandles())
    throw Error(hocclInvalidUsage, fmt::format("HOCCL_IPC_HANDLE=fd, but {} cannot export cuMem memory as a POSIX "
                                               "file descriptor",
                                               dev_.name()));
  const bool cuMem = handles == HandleMode::Fd || (handles == HandleMode::Auto && dev_.fdHandles());
  area_ = static_cast<char*>(cuMem ? dev_.mallocShareable(bytes) : dev_.malloc(bytes));
  if (handles != HandleMode::Legacy && dev_.shareable(area_)) {
    exportFd_ = net::Fd(dev_.exportFd(area_, &h->area));
    nonce_ = fdNonce();
    fdServer_ = std::make_unique<FdServer>(rank_, wire_.peer(), nonce_);
    myKind_ = HandleKind::Fd;
    h->nonce = nonce_;
    myArea_ = h->area;
  } else {
    h->area = dev_.exportHandle(area_);
    myKind_ = HandleKind::Legacy;
  }
  h->handleKind = myKind_;
}

IpcChannel::~IpcChannel() {
  fallback_.reset();
  try {
    if (busy_) dev_.synchronize(kernels::deviceStream());
  } catch (const Error&) {
  }
  release();
}

void IpcChannel::release() {
  fdServer_.reset();
  fdClient_.reset();
  exportFd_.reset();
  try {
    for (device::Event e : sendEvents_) dev_.destroyEvent(e);
    for (device::Event e : recvEvents_) dev_.destroyEvent(e);
  } catch (const Error&) {
  }
  sendEvents_.clear();
  recvEvents_.clear();
  try {
    if (peerArea_) dev_.closeHandle(peerArea_);
  } catch (const Error& e) {
    HOCCL_WARN(kNet, "rank {}: unmapping rank {}'s device receive area: {}", rank_, peer(), e.what());
  }
  peerArea_ = nullptr;
  try {
    if (area_) dev_.free(area_);
  } catch (const Error& e) {
    HOCCL_WARN(kNet, "rank {}: freeing the device receive area for rank {}: {}", rank_, peer(), e.what());
  }
  area_ = nullptr;
}

const char* IpcChannel::path() const {
  switch (state_) {
    case State::Direct: return "p2p";
    case State::Fallback: return "staged";
    default: return "negotiating";
  }
}

void IpcChannel::sendFrame(const void* msg, size_t bytes) {
  out_.emplace_back();
  std::memcpy(out_.back().bytes, msg, bytes);
  wire_.postSend(out_.back().bytes, kFrameBytes);
}

void IpcChannel::sendPieceFrame(Kind kind, const Piece& p) {
  Msg m;
  m.kind = kind;
  m.seq = p.seq;
  m.opBytes = p.op->bytes;
  m.len = p.len;
  m.tag = p.op->tag;
  sendFrame(&m, sizeof m);
}

void IpcChannel::postFrameRecv() {
  arriving_.push_back(std::make_unique<Arriving>());
  Arriving* a = arriving_.back().get();
  RecvTarget t;
  t.granule = 8;
  t.sink = [this, a](const void* data, size_t offset, size_t len) {
    if (offset != a->fill || a->fill + len > kFrameBytes)
      throwInternalError(
          fmt::format("rank {}: the channel to rank {} delivered {} bytes at {} of a {}-byte frame "
                      "(expected offset {})",
                      rank_, peer(), len, offset, kFrameBytes, a->fill));
    std::memcpy(a->frame.bytes + a->fill, data, len);
    a->fill += len;
    // Handle every whole frame at the front, in posting order (a later one may be whole first).
    while (!arriving_.empty() && arriving_.front()->fill == kFrameBytes) {
      std::unique_ptr<Arriving> done = std::move(arriving_.front());
      arriving_.pop_front();
      --recvsOpen_;
      onFrame(done->frame);
    }
  };
  wire_.postRecv(kFrameBytes, std::move(t));
  ++recvsOpen_;
}

void IpcChannel::mismatch(const std::string& what) const {
  throw Error(hocclInvalidUsage,
              fmt::format("{} (device buffers between rank {} and rank {} on one host, moved directly between their "
                          "devices: both calls must move the same bytes; check the count and datatype on both ranks)",
                          what, peer(), rank_),
              true);  // the ranks no longer agree on the frames: the communicator is unusable
}

void IpcChannel::checkTag(CallTag theirs, CallTag mine, const char* verb) const {
  if (theirs && mine && theirs != mine)
    mismatch(fmt::format("rank {} {} a piece of the right size for call {:#010x} where rank {} is in call {:#010x}: "
                         "the two ranks' calls differ (type, op, count, collective or order) in a way their sizes do "
                         "not show; HOCCL_CHECK_MISMATCH=2 names both calls",
                         peer(), verb, theirs, rank_, mine));
}

void IpcChannel::onFrame(const Frame& f) {
  uint64_t magic = 0;
  Kind kind{};
  std::memcpy(&magic, f.bytes, sizeof magic);
  std::memcpy(&kind, f.bytes + sizeof magic, sizeof kind);
  if (magic != kMagic)
    throw Error(hocclInvalidUsage,
                fmt::format("rank {} sent rank {} something other than the device channel's frames: every rank of a "
                            "call must pass device buffers when one does",
                            peer(), rank_),
                true);
  switch (kind) {
    case Kind::Hello:
      if (helloArrived_) break;
      std::memcpy(&helloIn_, f.bytes, sizeof helloIn_);
      helloIn_.deviceKey[sizeof helloIn_.deviceKey - 1] = 0;
      if (helloIn_.rank != peer())
        throwInternalError(fmt::format("rank {}: the device channel to rank {} received rank {}'s hello", rank_, peer(),
                                       helloIn_.rank));
      helloArrived_ = true;
      return;
    case Kind::Verdict: {
      if (!helloArrived_ || verdictArrived_) break;
      Verdict v;
      std::memcpy(&v, f.bytes, sizeof v);
      peerOk_ = v.ok != 0;
      verdictArrived_ = true;
      return;
    }
    case Kind::Ready:
    case Kind::Credit: {
      if (state_ != State::Direct) break;
      Msg m;
      std::memcpy(&m, f.bytes, sizeof m);
      if (kind == Kind::Ready) onReady(m);
      else onCredit(m);
      return;
    }
  }
  throwInternalError(fmt::format("rank {}: the device channel to rank {} got an unexpected frame (kind {}) while {}",
                                 rank_, peer(), static_cast<unsigned>(kind), path()));
}

// Round 2: whether this rank can map the peer's area. A legacy handle is mapped at once; a descriptor is first
// fetched over the peer's Unix socket (fetchPeerFd, from progress), and the verdict waits for it.
void IpcChannel::decideRound2() {
  std::string why;
  const Hello& h = helloIn_;
  if (!willing_) {
    why = "this rank does not take part (HOCCL_DEVICE_P2P=0, or its receive area could not be exported)";
  } else if (!h.willing) {
    why = fmt::format("rank {} does not take part (HOCCL_DEVICE_P2P=0 there, or its area could not be exported)",
                      peer());
  } else if (h.slotBytes == 0 || h.slotBytes % 64 != 0 || h.slots == 0 || h.slots > 4096 ||
             h.slotBytes > (size_t{1} << 40) / h.slots) {
    why = fmt::format("rank {} published an unusable receive area ({} slots of {} bytes)", peer(), h.slots,
                      h.slotBytes);
  } else if (!dev_.canAccessPeer(h.deviceKey)) {
    why = fmt::format("{} cannot reach rank {}'s device {} (no peer access)", dev_.name(), peer(), h.deviceKey);
  } else if (h.handleKind == HandleKind::Fd) {
    try {
      fdClient_ = std::make_unique<FdClient>(rank_, peer(), h.pid, h.nonce);
      return;  // decided once the descriptor is here (fetchPeerFd)
    } catch (const Error& e) {
      if (e.code() == hocclRemoteError) throw;  // the peer died: no fallback can help
      why = e.what();
    }
  } else if (h.handleKind == HandleKind::Legacy) {
    try {
      peerArea_ = static_cast<char*>(dev_.importHandle(h.area));
      mappedKind_ = HandleKind::Legacy;
    } catch (const Error& e) {
      why = fmt::format("mapping rank {}'s receive area failed: {}", peer(), e.what());
    }
  } else {
    why = fmt::format("rank {} exports its area with an unknown kind of handle ({})", peer(),
                      static_cast<unsigned>(h.handleKind));
  }
  finishRound2(std::move(why));
}

// Polls for the peer's descriptor; once here, checks its offer against the peer's Hello (both sides agree on the
// allocation's size and the area's offset before anything is mapped), maps it and decides.
bool IpcChannel::fetchPeerFd() {
  FdOffer offer;
  net::Fd fd;
  std::string why;
  try {
    if (!fdClient_->poll(&offer, &fd)) return false;
  } catch (const Error& e) {
    if (e.code() == hocclRemoteError) throw;
    why = e.what();
  }
  fdClient_.reset();
  const Hello& h = helloIn_;
  if (why.empty() && (offer.magic != kFdOfferMagic || offer.rank != peer() || offer.peer != rank_ ||
                      offer.nonce != h.nonce || offer.size != h.area.size || offer.offset != h.area.offset)) {
    why = fmt::format(
        "rank {}'s descriptor came with an offer that does not match its hello (rank {} for rank {}, "
        "{} bytes at offset {}; the hello said {} bytes at offset {})",
        peer(), offer.rank, offer.peer, offer.size, offer.offset, h.area.size, h.area.offset);
    HOCCL_WARN(kNet, "rank {}: {}", rank_, why);
  }
  if (why.empty()) {
    try {
      peerArea_ = static_cast<char*>(dev_.importFd(fd.get(), offer.size, offer.offset));
      mappedKind_ = HandleKind::Fd;
    } catch (const Error& e) {
      why = fmt::format("mapping rank {}'s receive area from its cuMem descriptor failed: {}", peer(), e.what());
    }
  }
  finishRound2(std::move(why));
  return true;
}

void IpcChannel::finishRound2(std::string why) {
  const Hello& h = helloIn_;
  if (why.empty()) {
    const size_t need = h.slotBytes * h.slots;
    if (h.area.offset > h.area.size || h.area.size - h.area.offset < need)
      why = fmt::format("rank {} published {} bytes of receive area, but its handle maps only {} bytes", peer(), need,
                        h.area.size > h.area.offset ? h.area.size - h.area.offset : 0);
  }
  const bool ok = why.empty();
  myOk_ = ok;
  if (!ok) HOCCL_INFO(kNet, "rank {} -> rank {}: no direct device path: {}", rank_, peer(), why);
  Verdict v;
  v.ok = ok ? 1 : 0;
  sendFrame(&v, sizeof v);
  verdictSent_ = true;
}

// Passes this rank's descriptor once the peer connected; true when it did just now.
bool IpcChannel::serveFd() {
  if (!fdServer_ || !helloArrived_) return false;  // the peer's pid, which alone may connect, is in its Hello
  const FdOffer offer{kFdOfferMagic, rank_, peer(), nonce_, myArea_.size, myArea_.offset};
  if (!fdServer_->poll(exportFd_.get(), offer, helloIn_.pid)) return false;
  fdServer_.reset();
  exportFd_.reset();
  return true;
}

void IpcChannel::settle() {
  out_.clear();  // the wire counts none of them any more
  auto& stats = deviceChannelStats();
  std::vector<Op> early;
  early.swap(early_);
  if (myOk_ && peerOk_) {
    peerSlotBytes_ = helloIn_.slotBytes;
    peerSlots_ = helloIn_.slots;
    try {
      for (size_t i = 0; i < peerSlots_; ++i) sendEvents_.push_back(dev_.createEvent());
      for (size_t i = 0; i < slots_; ++i) recvEvents_.push_back(dev_.createEvent());
    } catch (...) {
      release();
      throw;
    }
    state_ = State::Direct;
    ++stats.p2pChannels;
    ++(mappedKind_ == HandleKind::Fd ? stats.fdMappedChannels : stats.legacyMappedChannels);
    HOCCL_INFO(kNet,
               "rank {} -> rank {} (pid {}): device buffers go directly between the devices ({} slots of {} bytes "
               "there, mapped from {}; {} of {} here)",
               rank_, peer(), helloIn_.pid, peerSlots_, peerSlotBytes_,
               mappedKind_ == HandleKind::Fd ? "a cuMem file descriptor" : "a legacy IPC handle", slots_, slotBytes_);
    for (const Op& op : early) postDirect(op);
    return;
  }
  if (!peerOk_ && myOk_)
    HOCCL_INFO(kNet,
               "rank {} -> rank {}: no direct device path: rank {} could not use it (its HOCCL_DEBUG=INFO says why)",
               rank_, peer(), peer());
  release();
  fallback_ = makeFallback_();
  state_ = State::Fallback;
  ++stats.fallbackChannels;
  for (const Op& op : early) post(op);
}

void IpcChannel::post(const Op& op) {
  if (op.bytes == 0) return;
  switch (state_) {
    case State::Agreeing:
    case State::Settling: early_.push_back(op); return;
    case State::Direct: postDirect(op); return;
    case State::Fallback:
      if (op.send) {
        fallback_->postTaggedSend(op.src, op.bytes, op.tag);
      } else if (op.src) {
        fallback_->postRecvReduce(op.dst, op.src, op.bytes / op.elemSize, op.dtype, op.op, op.tag);
      } else {
        RecvTarget t;
        t.direct = op.dst;
        t.granule = op.elemSize;
        t.tag = op.tag;
        fallback_->postRecv(op.bytes, std::move(t));
      }
      return;
  }
}

void IpcChannel::postDirect(const Op& op) {
  const size_t piece = op.send ? peerSlotBytes_ : slotBytes_;
  const size_t frames = (op.bytes + piece - 1) / piece;  // Credits for a send, Readys for a receive
  if (op.send) {
    sends_.push_back(op);
    creditsDue_ += frames;
    launchSends();
  } else {
    recvs_.push_back(op);
    readysDue_ += frames;
    while (!earlyReadys_.empty() && recvs_.back().launched < recvs_.back().bytes) {
      const Msg m = earlyReadys_.front();
      earlyReadys_.pop_front();
      land(m, recvs_.back());
    }
  }
  topUpFrameRecvs();
}

void IpcChannel::topUpFrameRecvs() {
  while (recvsOpen_ < creditsDue_ + readysDue_) postFrameRecv();
}

void IpcChannel::postTaggedSend(const void* data, size_t bytes, CallTag tag) {
  Op op;
  op.send = true;
  op.src = static_cast<const char*>(data);
  op.bytes = bytes;
  op.tag = tag;
  post(op);
}

void IpcChannel::postRecv(size_t bytes, RecvTarget target) {
  if (!target.direct)
    throwInternalError(
        fmt::format("rank {}: device channel to rank {}: a receive through a sink cannot run on device memory", rank_,
                    peer()));
  Op op;
  op.dst = static_cast<char*>(target.direct);
  op.bytes = bytes;
  op.tag = target.tag;
  post(op);
}

void IpcChannel::postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                                CallTag tag) {
  Op o;
  o.tag = tag;
  o.dst = static_cast<char*>(dst);
  o.src = static_cast<const char*>(src);
  o.elemSize = kernels::typeSize(dt);
  o.bytes = n * o.elemSize;
  o.dtype = dt;
  o.op = op;
  post(o);
}

bool IpcChannel::launchSends() {
  bool moved = false;
  void* stream = kernels::deviceStream();
  for (Op& op : sends_) {
    while (op.launched < op.bytes) {
      if (sendSeq_ - creditSeq_ >= peerSlots_) return moved;  // every slot of the peer holds an unconsumed piece
      const size_t slot = static_cast<size_t>(sendSeq_ % peerSlots_);
      const size_t len = std::min(peerSlotBytes_, op.bytes - op.launched);
      // Inside the area the peer published (slot < peerSlots_, len <= peerSlotBytes_), which the mapping covers.
      dev_.launchCopy(stream, peerArea_ + slot * peerSlotBytes_, op.src + op.launched, len);
      dev_.record(sendEvents_[slot], stream);
      busy_ = true;
      copying_.push_back(Piece{sendSeq_, len, &op});
      ++sendSeq_;
      op.launched += len;
      moved = true;
    }
  }
  return moved;
}

bool IpcChannel::sendReadies() {
  bool moved = false;
  while (!copying_.empty() && dev_.query(sendEvents_[static_cast<size_t>(copying_.front().seq % peerSlots_)])) {
    const Piece p = copying_.front();
    copying_.pop_front();
    sendPieceFrame(Kind::Ready, p);
    deviceChannelStats().p2pBytesSent += p.len;
    moved = true;
  }
  return moved;
}

void IpcChannel::onReady(const Msg& m) {
  if (m.seq != readySeq_)
    throwInternalError(fmt::format("rank {}: rank {} announced device piece {} where piece {} was next", rank_, peer(),
                                   m.seq, readySeq_));
  ++readySeq_;
  auto it = std::find_if(recvs_.begin(), recvs_.end(), [](const Op& o) { return o.launched < o.bytes; });
  if (it == recvs_.end() || !earlyReadys_.empty()) {  // its receive is not posted yet: kept until it is
    earlyReadys_.push_back(m);
    return;
  }
  land(m, *it);
}

void IpcChannel::land(const Msg& m, Op& op) {
  if (m.opBytes != op.bytes)
    mismatch(fmt::format("rank {} sends {} bytes where rank {} receives {} bytes", peer(), m.opBytes, rank_, op.bytes));
  const size_t expect = std::min(slotBytes_, op.bytes - op.launched);
  if (m.len != expect)
    mismatch(fmt::format("rank {} sent a piece of {} bytes where rank {} expects {} (slots of {} bytes)", peer(), m.len,
                         rank_, expect, slotBytes_));
  checkTag(m.tag, op.tag, "sent");
  const size_t slot = static_cast<size_t>(m.seq % slots_);
  const char* from = area_ + slot * slotBytes_;
  void* stream = kernels::deviceStream();
  if (op.src)
    dev_.launchReduce(stream, op.dst + op.launched, op.src + op.launched, from, expect / op.elemSize, op.dtype, op.op);
  else dev_.launchCopy(stream, op.dst + op.launched, from, expect);
  dev_.record(recvEvents_[slot], stream);
  busy_ = true;
  landing_.push_back(Piece{m.seq, expect, &op});
  op.launched += expect;
  --readysDue_;
}

void IpcChannel::onCredit(const Msg& m) {
  if (m.seq != creditSeq_)
    throwInternalError(fmt::format("rank {}: rank {} returned device slot credit {} where {} was next", rank_, peer(),
                                   m.seq, creditSeq_));
  auto it = std::find_if(sends_.begin(), sends_.end(), [](const Op& o) { return o.done < o.bytes; });
  if (it == sends_.end() || it->done + m.len > it->launched)
    throwInternalError(
        fmt::format("rank {}: rank {} returned a credit for device piece {} that was not sent", rank_, peer(), m.seq));
  if (m.opBytes != it->bytes)
    mismatch(
        fmt::format("rank {} receives {} bytes where rank {} sends {} bytes", peer(), m.opBytes, rank_, it->bytes));
  checkTag(m.tag, it->tag, "received");
  it->done += m.len;
  ++creditSeq_;
  --creditsDue_;
}

bool IpcChannel::reclaim() {
  bool moved = false;
  const size_t wirePending = wire_.pending();
  const size_t sendsOpen = wirePending > recvsOpen_ ? wirePending - recvsOpen_ : 0;
  while (out_.size() > sendsOpen) {
    out_.pop_front();
    moved = true;
  }
  if (state_ != State::Direct) return moved;
  while (!landing_.empty() && dev_.query(recvEvents_[static_cast<size_t>(landing_.front().seq % slots_)])) {
    const Piece p = landing_.front();
    landing_.pop_front();
    p.op->done += p.len;
    sendPieceFrame(Kind::Credit, p);
    deviceChannelStats().p2pBytesReceived += p.len;
    moved = true;
  }
  while (!sends_.empty() && sends_.front().done == sends_.front().bytes) {
    sends_.pop_front();
    moved = true;
  }
  while (!recvs_.empty() && recvs_.front().done == recvs_.front().bytes) {
    recvs_.pop_front();
    moved = true;
  }
  return moved;
}

bool IpcChannel::progress() {
  bool moved = wire_.progress();
  if (state_ == State::Agreeing) {
    if (helloArrived_ && !decided_) {
      decided_ = true;
      decideRound2();
      moved = true;
    }
    if (fdClient_) moved |= fetchPeerFd();
    moved |= serveFd();
    // The peer's Verdict comes after its fetch of this rank's descriptor (or its decision not to fetch it).
    if (verdictSent_ && verdictArrived_) {
      fdServer_.reset();
      exportFd_.reset();
      state_ = State::Settling;
    }
  }
  moved |= reclaim();
  if (state_ == State::Settling) {
    moved |= wire_.progress();
    if (wire_.pending() != 0) return moved;
    settle();
    moved = true;
  }
  if (state_ == State::Fallback) return fallback_->progress() || moved;
  if (state_ != State::Direct) return moved;
  moved |= launchSends();
  moved |= sendReadies();
  moved |= wire_.progress();
  moved |= reclaim();
  moved |= launchSends();
  topUpFrameRecvs();  // after a Ready came early, in a receive meant for a Credit
  if (busy_ && sends_.empty() && recvs_.empty() && copying_.empty() && landing_.empty()) {
    busy_ = false;
    dev_.synchronize(kernels::deviceStream());  // surfaces a failure of the device's work
  }
  return moved;
}

size_t IpcChannel::pending() const {
  switch (state_) {
    case State::Direct: return sends_.size() + recvs_.size() + (out_.empty() ? 0 : 1);
    case State::Fallback: return fallback_->pending();
    default: return 1 + early_.size();
  }
}

void IpcChannel::waitForActivity(int timeoutMicros) {
  if (state_ == State::Fallback) return fallback_->waitForActivity(timeoutMicros);
  if (fdClient_ || (fdServer_ && helloArrived_)) {  // a descriptor in flight on a Unix socket, not on the wire
    pollfd fds[2];
    nfds_t n = 0;
    if (fdClient_) fds[n++] = pollfd{fdClient_->waitFd(), POLLIN, 0};
    if (fdServer_) fds[n++] = pollfd{fdServer_->waitFd(), POLLIN | POLLOUT, 0};
    ::poll(fds, n, std::clamp(timeoutMicros / 1000, 0, 1));
    return;
  }
  // Device copies in flight finish without the wire: only sleep on the wire when none is.
  if (copying_.empty() && landing_.empty()) wire_.waitForActivity(timeoutMicros);
}

}  // namespace hoccl::transport::cuda_ipc
