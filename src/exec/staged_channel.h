/// @file staged_channel.h
/// Device buffers over a transport that reads and writes host memory (shm slots, tcp): the staging pipeline. A
/// StagedChannel wraps the channel to one peer for the executor's device tasks when the host cannot touch device
/// memory (a GPU; the simulated device in strict mode, device::Device::hostAccessible). Nothing in it reads or writes
/// device memory from the host: every byte crosses between device memory and pinned host memory (Device::mallocHost)
/// by the device's copies and kernels on the calling thread's device stream (the proxy's internal stream).
///
/// - A send is cut into pieces of HOCCL_STAGING_CHUNK bytes; each piece is copied device-to-host into a pinned slot
///   and put on the wire as soon as its copy is done, so the copy of piece k+1 runs while piece k is on the wire.
/// - A receive is cut the same way (both sides cut by the same rule, so the wire's messages match: the parameter must
///   be the same on every rank, like HOCCL_CHUNK_SIZE). Each arriving piece is copied by the host from the
///   transport's buffer into a pinned slot, then host-to-device into the destination, or reduced into it by the
///   device's reduce kernel reading the (device-mapped) slot; the wire keeps receiving while the device works.
/// - Slots: HOCCL_STAGING_SLOTS pinned buffers per direction and peer, allocated once and kept.
/// - Zero-byte transfers complete at once and never reach the wire (on both sides).
/// - Every piece goes on the wire with its operation's call tag (transport.h: RecvTarget::tag), and every piece's
///   receive expects it, so the wire fails a piece of the right size sent for another call.
/// - Agreement: the first staged send to a peer is preceded by a 16-byte hello (a magic word and the piece size), and
///   the first staged receive checks the peer's: different piece sizes, or a peer that sends unstaged data where
///   this rank stages (host buffers there, device buffers here: its first message is not a hello, or not 16 bytes
///   long), fail with hocclInvalidUsage naming both ranks and what to set, instead of mismatched messages. (The
///   mismatch check, comm/call_check.h, compares the buffers' kind before any data moves when it runs.)
/// - An operation is complete once its bytes are on the wire (sends) or in device memory (receives); a failed device
///   operation is reported by the stream's synchronisation when the channel goes idle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/device.h"
#include "transports/transport.h"

namespace hoccl::exec {

/// See the file comment. Driven by one thread (the proxy's).
class StagedChannel final : public transport::Channel {
 public:
  /// Wraps wire (which must outlive it) for dev; slot sizes and counts from HOCCL_STAGING_CHUNK / _SLOTS. `self` is
  /// this rank (for messages).
  StagedChannel(transport::Channel& wire, device::Device& dev, int self = -1);
  ~StagedChannel() override;
  StagedChannel(const StagedChannel&) = delete;
  StagedChannel& operator=(const StagedChannel&) = delete;

  /// The wrapped channel.
  const transport::Channel& wire() const { return wire_; }
  int peer() const override { return wire_.peer(); }
  /// Sends bytes of device memory at data (untagged).
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  /// Sends bytes of device memory at data; every piece goes on the wire with the call's tag.
  void postTaggedSend(const void* data, size_t bytes, transport::CallTag tag) override;
  /// Receives bytes into device memory at target.direct (a sink is refused: use postRecvReduce); target.tag is
  /// compared by the wire with each piece's.
  void postRecv(size_t bytes, transport::RecvTarget target) override;
  /// Receives n elements of dt and stores dst[i] = op(src[i], received[i]) (device memory; dst may equal src); each
  /// piece's tag must be `tag` (0: not compared).
  void postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                      transport::CallTag tag);
  bool progress() override;
  size_t pending() const override;
  void waitForActivity(int timeoutMicros) override;

 private:
  struct Slot {
    char* data = nullptr;
    device::Event done = nullptr;  // recorded after the device operation on the slot
  };
  struct SendOp {
    const char* src;
    size_t bytes;
    transport::CallTag tag;  // on every piece
    size_t launched = 0, finished = 0;
  };
  struct SendPiece {
    int slot;
    size_t len;
    SendOp* op;
  };
  struct RecvOp {
    char* dst;
    const char* src;  // reductions: the other operand; null for a plain receive
    size_t bytes, elemSize;
    hocclDataType_t dtype;
    kernels::BinOp op;
    transport::CallTag tag;  // each piece's expected tag (0: not compared)
    size_t landed = 0;
  };
  struct RecvPiece {
    int slot;
    size_t len;
    RecvOp* op;
  };

  struct Hello {
    uint64_t magic;
    uint64_t pieceBytes;
  };
  void sayHello();
  void expectHello();
  void postRecvPieces(RecvOp* op);
  void deliver(RecvOp* op, size_t at, const void* data, size_t len);
  int takeRecvSlot();
  bool launchCopies();
  bool postCopied();
  bool reclaim();
  void finishIdle();
  void freeSlots();

  transport::Channel& wire_;
  device::Device& dev_;
  size_t pieceBytes_;
  std::vector<Slot> sendSlots_, recvSlots_;
  std::vector<int> freeSend_, freeRecv_;
  std::deque<SendOp> sends_;       // in posting order, until their last piece left the wire
  std::deque<RecvOp> recvs_;       // in posting order, until their last piece is in device memory
  std::deque<SendPiece> copying_;  // device-to-host copy launched, not yet on the wire
  std::deque<SendPiece> onWire_;   // posted to the wire, in order
  std::deque<RecvPiece> landing_;  // host-to-device copy or reduction launched
  size_t wireRecvsOpen_ = 0;       // receive pieces posted to the wire and not yet fully delivered
  bool busy_ = false;              // device work launched since the last synchronisation
  bool helloSent_ = false, helloExpected_ = false, helloReceived_ = false;
  int self_;          // this rank
  Hello helloOut_{};  // what this side sends (stays valid while on the wire)
};

}  // namespace hoccl::exec
