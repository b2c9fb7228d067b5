/*
 * The staging pipeline (staged_channel.h). Sends: pieces move slot by slot through three queues, copying_ (the
 * device-to-host copy is launched and an event recorded after it), onWire_ (posted to the wire once the event has
 * completed, in order) and back to the free list once the wire no longer counts them. The wire's pending() counts
 * sends and receives together; receives are posted with sinks, so this channel knows how many receive pieces are
 * still open, and the rest of pending() are sends, which complete in posting order: the oldest
 * onWire_.size() - (pending() - open receives) pieces are done. (A receive the wire still counts after its last byte
 * only makes that estimate low, never high.) Receives: every arriving piece is copied into a free slot and a
 * host-to-device copy or a reduction is launched from it, with an event; the slot returns when the event completes.
 * With no free slot, the sink waits for the device (bounded: device work always finishes).
 */
#include "exec/staged_channel.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"
#include "kernels/cpu/copy.h"
#include "kernels/memory.h"

namespace hoccl::exec {
namespace {

constexpr uint64_t kHelloMagic = 0x6567617453636f48;  // "HocStage"

size_t pieceBytesFromParams() {
  const auto bytes = static_cast<size_t>(params::STAGING_CHUNK.get());
  return std::max<size_t>(64, bytes / 64 * 64);  // a multiple of every element size
}

}  // namespace

StagedChannel::StagedChannel(transport::Channel& wire, device::Device& dev, int self)
    : wire_(wire), dev_(dev), pieceBytes_(pieceBytesFromParams()), self_(self) {
  const auto slots = static_cast<size_t>(params::STAGING_SLOTS.get());
  auto make = [&](std::vector<Slot>& v, std::vector<int>& free) {
    for (size_t i = 0; i < slots; ++i) {
      Slot s;
      s.data = static_cast<char*>(dev_.mallocHost(pieceBytes_));
      v.push_back(s);  // before the event: the destructor frees what v holds
      v.back().done = dev_.createEvent();
      free.push_back(static_cast<int>(i));
    }
  };
  try {
    make(sendSlots_, freeSend_);
    make(recvSlots_, freeRecv_);
  } catch (...) {
    freeSlots();
    throw;
  }
}

StagedChannel::~StagedChannel() {
  try {
    if (busy_) dev_.synchronize(kernels::deviceStream());
  } catch (const Error&) {
  }
  freeSlots();
}

void StagedChannel::freeSlots() {
  for (auto* v : {&sendSlots_, &recvSlots_}) {
    for (Slot& s : *v) {
      try {
        if (s.done) dev_.destroyEvent(s.done);
        dev_.freeHost(s.data);
      } catch (const Error&) {
      }
    }
    v->clear();
  }
}

void StagedChannel::sayHello() {
  helloSent_ = true;
  helloOut_ = Hello{kHelloMagic, pieceBytes_};
  wire_.postSend(&helloOut_, sizeof helloOut_);
  onWire_.push_back(SendPiece{-1, 0, nullptr});
}

void StagedChannel::expectHello() {
  helloExpected_ = true;
  transport::RecvTarget t;
  t.granule = 1;
  auto got = std::make_shared<std::vector<char>>();
  t.sink = [this, got](const void* data, size_t, size_t n) {
    got->insert(got->end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
    if (got->size() < sizeof(Hello)) return;
    --wireRecvsOpen_;
    Hello h{};
    std::memcpy(&h, got->data(), sizeof h);
    helloReceived_ = true;
    if (h.magic != kHelloMagic)
      throw Error(hocclInvalidUsage,
                  fmt::format("rank {} passed host buffers where rank {} passes device buffers (staged through host "
                              "memory): its first message is not a staging hello. When one rank of a call passes "
                              "device buffers every rank must (as in NCCL)",
                              peer(), self_),
                  true);
    if (h.pieceBytes != pieceBytes_)
      throw Error(hocclInvalidUsage,
                  fmt::format("rank {} stages device buffers in pieces of {} bytes, this rank in pieces of {}: set "
                              "HOCCL_STAGING_CHUNK to the same value on every rank",
                              peer(), h.pieceBytes, pieceBytes_),
                  true);  // the ranks no longer agree on the messages: the communicator is unusable
  };
  wire_.postRecv(sizeof(Hello), std::move(t));
  ++wireRecvsOpen_;
}

void StagedChannel::postTaggedSend(const void* data, size_t bytes, transport::CallTag tag) {
  if (bytes == 0) return;
  if (!helloSent_) sayHello();
  sends_.push_back(SendOp{static_cast<const char*>(data), bytes, tag});
  launchCopies();
}

void StagedChannel::postRecv(size_t bytes, transport::RecvTarget target) {
  if (!target.direct)
    throwInternalError(fmt::format("staged channel to rank {}: a receive through a sink cannot be staged", peer()));
  if (bytes == 0) return;
  recvs_.push_back(
      RecvOp{static_cast<char*>(target.direct), nullptr, bytes, 1, hocclUint8, kernels::BinOp::Sum, target.tag});
  postRecvPieces(&recvs_.back());
}

void StagedChannel::postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                                   transport::CallTag tag) {
  if (n == 0) return;
  const size_t elem = kernels::typeSize(dt);
  recvs_.push_back(RecvOp{static_cast<char*>(dst), static_cast<const char*>(src), n * elem, elem, dt, op, tag});
  postRecvPieces(&recvs_.back());
}

void StagedChannel::postRecvPieces(RecvOp* op) {
  if (!helloExpected_) expectHello();
  for (size_t start = 0; start < op->bytes; start += pieceBytes_) {
    const size_t len = std::min(pieceBytes_, op->bytes - start);
    transport::RecvTarget t;
    t.granule = op->elemSize;
    t.tag = op->tag;  // every piece carries its call's tag: the wire compares it (shm, tcp, ucx)
    t.sink = [this, op, start, len](const void* data, size_t offset, size_t n) {
      deliver(op, start + offset, data, n);
      if (offset + n == len) --wireRecvsOpen_;
    };
    wire_.postRecv(len, std::move(t));
    ++wireRecvsOpen_;
  }
}

int StagedChannel::takeRecvSlot() {
  if (freeRecv_.empty()) {
    dev_.synchronize(kernels::deviceStream());  // every landing piece is done after this
    busy_ = false;
    while (!landing_.empty()) {
      const RecvPiece p = landing_.front();
      landing_.pop_front();
      p.op->landed += p.len;
      freeRecv_.push_back(p.slot);
    }
  }
  const int slot = freeRecv_.back();
  freeRecv_.pop_back();
  return slot;
}

void StagedChannel::deliver(RecvOp* op, size_t at, const void* data, size_t len) {
  if (len == 0) return;
  if (len > pieceBytes_ || at + len > op->bytes)
    throwInternalError(
        fmt::format("staged channel to rank {}: the wire delivered {} bytes at {} of a {}-byte receive "
                    "(pieces of {} bytes)",
                    peer(), len, at, op->bytes, pieceBytes_));
  const int slot = takeRecvSlot();
  Slot& s = recvSlots_[static_cast<size_t>(slot)];
  kernels::copy(s.data, data, len);  // host to pinned host: the transport reuses its buffer when the sink returns
  void* stream = kernels::deviceStream();
  if (op->src) dev_.launchReduce(stream, op->dst + at, op->src + at, s.data, len / op->elemSize, op->dtype, op->op);
  else dev_.launchCopy(stream, op->dst + at, s.data, len);
  dev_.record(s.done, stream);
  busy_ = true;
  landing_.push_back(RecvPiece{slot, len, op});
}

bool StagedChannel::launchCopies() {
  bool moved = false;
  void* stream = kernels::deviceStream();
  for (SendOp& op : sends_) {
    while (op.launched < op.bytes) {
      if (freeSend_.empty()) return moved;
      const int slot = freeSend_.back();
      freeSend_.pop_back();
      Slot& s = sendSlots_[static_cast<size_t>(slot)];
      const size_t len = std::min(pieceBytes_, op.bytes - op.launched);
      dev_.launchCopy(stream, s.data, op.src + op.launched, len);
      dev_.record(s.done, stream);
      busy_ = true;
      copying_.push_back(SendPiece{slot, len, &op});
      op.launched += len;
      moved = true;
    }
  }
  return moved;
}

bool StagedChannel::postCopied() {
  bool moved = false;
  while (!copying_.empty() && dev_.query(sendSlots_[static_cast<size_t>(copying_.front().slot)].done)) {
    const SendPiece p = copying_.front();
    copying_.pop_front();
    wire_.postTaggedSend(sendSlots_[static_cast<size_t>(p.slot)].data, p.len, p.op->tag);
    onWire_.push_back(p);
    moved = true;
  }
  return moved;
}

bool StagedChannel::reclaim() {
  bool moved = false;
  const size_t wirePending = wire_.pending();
  const size_t sendsOpen = wirePending > wireRecvsOpen_ ? wirePending - wireRecvsOpen_ : 0;
  while (onWire_.size() > sendsOpen) {
    const SendPiece p = onWire_.front();
    onWire_.pop_front();
    moved = true;
    if (!p.op) continue;  // the hello
    p.op->finished += p.len;
    freeSend_.push_back(p.slot);
  }
  while (!landing_.empty() && dev_.query(recvSlots_[static_cast<size_t>(landing_.front().slot)].done)) {
    const RecvPiece p = landing_.front();
    landing_.pop_front();
    p.op->landed += p.len;
    freeRecv_.push_back(p.slot);
    moved = true;
  }
  while (!sends_.empty() && sends_.front().finished == sends_.front().bytes) {
    sends_.pop_front();
    moved = true;
  }
  while (!recvs_.empty() && recvs_.front().landed == recvs_.front().bytes) {
    recvs_.pop_front();
    moved = true;
  }
  return moved;
}

void StagedChannel::finishIdle() {
  // Everything launched has completed (its events said so); this surfaces a failure of the device's work.
  busy_ = false;
  dev_.synchronize(kernels::deviceStream());
}

bool StagedChannel::progress() {
  bool moved = reclaim();
  moved |= launchCopies();
  moved |= postCopied();
  try {
    moved |= wire_.progress();
  } catch (const Error& e) {
    // The peer's first message did not fit the hello's 16 bytes: it sends unstaged data, from host buffers.
    if (!helloExpected_ || helloReceived_ || e.code() != hocclInvalidUsage) throw;
    throw Error(hocclInvalidUsage,
                fmt::format("rank {} passed host buffers where rank {} passes device buffers (staged through host "
                            "memory): its first message is not a staging hello ({}). When one rank of a call passes "
                            "device buffers every rank must (as in NCCL)",
                            peer(), self_, e.what()),
                true);
  }
  moved |= reclaim();
  moved |= launchCopies();
  if (busy_ && sends_.empty() && recvs_.empty()) finishIdle();
  return moved;
}

size_t StagedChannel::pending() const { return sends_.size() + recvs_.size(); }

void StagedChannel::waitForActivity(int timeoutMicros) {
  // Device copies in flight finish without the wire: only sleep on the wire when none is.
  if (copying_.empty() && landing_.empty()) wire_.waitForActivity(timeoutMicros);
}

}  // namespace hoccl::exec
