/// @file ibv_channel.h
/// The ibverbs channel: one RC queue pair to one peer, carrying messages in chunks through a ring of registered
/// bounce buffers with credit-based flow control (credits.h).
///
/// Each side owns a receive ring of `slots` slots of `slotBytes` bytes (registered for remote write), a staging ring
/// of the same shape, and a credit word the peer writes into. Chunk n of a direction is copied into staging slot
/// n % slots with a 64-byte header (the message's length and call tag, the chunk's offset and length, n) and
/// RDMA-written with
/// immediate (the immediate is n) into the peer's ring slot n % slots; with HOCCL_IB_ADAPTIVE_ROUTING=1 it is a
/// plain RDMA write followed by an empty write with immediate. The write with immediate consumes one of the `slots`
/// receive requests the receiver keeps posted, and its completion tells the receiver that the slot is full. The
/// receiver copies (or hands to the sink) the chunk when a receive is posted for it, after comparing the header's
/// message length with the length it posted and, when both are set, its call tag with the receive's (a mismatch is
/// hocclInvalidUsage naming both lengths or tags, nothing is written), then RDMA-writes its cumulative consumed count into the sender's credit word. A sender posts chunk n
/// only when chunk n - slots is consumed by the peer and its own write of it completed.
///
/// When the last posted receive completes while a credit write is still in flight, progress() waits for that write
/// (about one round trip) and writes the final count, so that the peer never waits for credits of chunks already
/// consumed while this rank no longer drives the channel.
///
/// A failed completion is an error naming the peer, the device, the status and what to try (wc_error.h); a peer that
/// goes silent is caught by the executor's wait (HOCCL_TIMEOUT). Not thread-safe: one thread drives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/credits.h"
#include "transports/ibverbs/ibv_device.h"
#include "transports/transport.h"

namespace hoccl::transport::ibverbs {

/// Bytes of the header at the start of every slot.
constexpr size_t kChunkHeaderBytes = 64;

/// A channel to one peer over one RC queue pair.
class IbvChannel final : public Channel {
 public:
  /// Creates the queue pair (state INIT, receives posted) and the rings. `slotBytes` is a multiple of 4096.
  IbvChannel(std::shared_ptr<IbvDevice> dev, const boot::RankInfo& self, const boot::RankInfo& peerInfo, uint32_t slots,
             size_t slotBytes, bool adaptiveRouting);
  ~IbvChannel() override;

  /// This side's connection data for the peer.
  ConnInfo localInfo() const;
  /// Moves the queue pair to RTR and RTS towards the peer's end. The peer's ring must have the same shape.
  void connect(const ConnInfo& remote);

  /// The peer's rank.
  int peer() const override { return peer_.rank; }
  /// Queues an untagged send.
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  /// Queues a send of call `tag`: every chunk's header carries it.
  void postTaggedSend(const void* data, size_t bytes, CallTag tag) override;
  /// Queues a receive (target.tag is compared with each chunk's, when both are set).
  void postRecv(size_t bytes, RecvTarget target) override;
  /// Polls the completion queue, delivers arrived chunks, returns credits and posts chunks.
  bool progress() override;
  /// Posted operations not yet complete.
  size_t pending() const override { return sendMsgs_.size() + recvMsgs_.size(); }

 private:
  struct SendMsg {
    const char* data;
    size_t bytes;
    CallTag tag = 0;       ///< in every chunk's header
    size_t offset = 0;     ///< bytes already cut into chunks
    uint64_t lastSeq = 0;  ///< sequence number of its last chunk, once every chunk is posted
  };
  struct RecvMsg {
    size_t bytes;
    RecvTarget target;
    size_t delivered = 0;
  };

  bool pollCompletions();
  bool deliverChunks();
  bool returnCredits();
  void settleCredits();
  bool postChunks();
  void postRecvRequest(uint64_t seq);
  void postWrite(uint64_t wrId, const void* src, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
                 bool withImm, uint32_t imm, bool inlineData);
  [[noreturn]] void fail(const std::string& what) const;
  std::string where() const;
  uint32_t lkey() const;
  uint32_t rkey() const;

  std::shared_ptr<IbvDevice> dev_;
  boot::RankInfo self_;
  boot::RankInfo peer_;
  uint32_t slots_;
  size_t slotBytes_;
  bool adaptiveRouting_;
  char* mem_ = nullptr;  // ring | staging | credit words (one page)
  size_t memBytes_ = 0;
  RegCache::Lease lease_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  bool inlineCredit_ = false;
  ConnInfo remote_{};
  SendCredits credits_;
  CreditReturn ret_;
  std::deque<SendMsg> sendMsgs_;
  std::deque<RecvMsg> recvMsgs_;
  size_t sendPostedFrom_ = 0;  ///< index in sendMsgs_ of the first message with bytes left to cut
};

}  // namespace hoccl::transport::ibverbs
