/// @file cuda_ipc_channel.h
/// Device buffers straight between the devices of two ranks on one host (CUDA IPC on a GPU; the simulated device's
/// shared memfd mappings under HOCCL_DEVICE=sim). One IpcChannel per peer, made by the registry for device tasks
/// (registry.h: makeDeviceChannel); the peer's Channel (shm or tcp, "the wire") carries only small control frames.
///
/// - Agreement, on first use, in two rounds over the wire (cuda_ipc_protocol.h): Hello (willing, the device's key, the
///   IPC handle of a receive area of `slots` x `slotBytes` device memory), then Verdict (this rank mapped the peer's
///   area, the area is as large as published, and this device reaches the peer's: Device::canAccessPeer). Both ok:
///   the direct path; otherwise both ranks fall back to the staging pipeline over the same wire (DeviceFallback).
///   The area is exported as a legacy IPC handle, or (cuMem memory, HOCCL_IPC_HANDLE) as a POSIX file descriptor
///   that the peer fetches over a Unix socket between the two rounds (fd_pass.h); the peer checks the descriptor's
///   offer against the Hello before mapping it.
///   Operations posted before the agreement wait in a queue and are replayed on the chosen path.
/// - Data: the sender copies piece k of its stream of pieces to the peer into the peer's slot k % slots with a device
///   copy on its proxy stream (the peer's memory, mapped here), then sends Ready(k, operation bytes, piece bytes).
///   The receiver checks the frame against its own posted receive (the operation sizes and piece sizes must be equal,
///   and the call tags when both ranks tag: otherwise hocclInvalidUsage naming both ranks, before a byte lands), copies or reduces the slot into its
///   destination on its device, and once that has run sends Credit(k): the sender writes slot k % slots again only
///   after Credit(k - slots). So one device-to-device copy crosses between the GPUs, and the receiver's reduction
///   reads its own memory.
/// - Memory safety: every write into the peer's area is inside the area the peer published, which was checked against
///   the size of the mapping when it was opened; the receiver computes its slot addresses itself.
/// - A dead or silent peer is reported by the wire (shm watches the peer's pid; tcp sees the connection close) while
///   this channel waits for frames; the executor's deadline bounds every wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "kernels/device/device.h"
#include "transports/cuda_ipc/cuda_ipc_protocol.h"
#include "transports/cuda_ipc/fd_pass.h"
#include "transports/device_channel.h"

namespace hoccl::transport::cuda_ipc {

/// How this rank's receive area is allocated and exported (HOCCL_IPC_HANDLE).
enum class HandleMode {
  Auto,    ///< cuMem memory with a POSIX fd handle when the device offers it (Device::fdHandles), else legacy
  Legacy,  ///< Device::malloc and a legacy IPC handle (cudaIpcMemHandle)
  Fd,      ///< cuMem memory and a POSIX fd handle; a device without them stages (logged)
};

/// HandleMode from HOCCL_IPC_HANDLE's text (auto, legacy or fd); throws hocclInvalidArgument naming the variable.
HandleMode parseHandleMode(const std::string& text);

/// See the file comment. Driven by one thread (the communicator's proxy).
class IpcChannel final : public DeviceChannel {
 public:
  /// Starts the agreement with `peer` over wire (which must outlive this channel). willing: this rank wants the
  /// direct path (HOCCL_DEVICE_P2P=1). slotBytes (a multiple of 64) and slots size this rank's receive area.
  IpcChannel(Channel& wire, device::Device& dev, int rank, int peer, bool willing, size_t slotBytes, size_t slots,
             DeviceFallback fallback, HandleMode handles = HandleMode::Auto);
  ~IpcChannel() override;
  IpcChannel(const IpcChannel&) = delete;
  IpcChannel& operator=(const IpcChannel&) = delete;

  int peer() const override { return wire_.peer(); }
  void postSend(const void* data, size_t bytes) override { postTaggedSend(data, bytes, 0); }
  void postTaggedSend(const void* data, size_t bytes, CallTag tag) override;
  void postRecv(size_t bytes, RecvTarget target) override;
  void postRecvReduce(void* dst, const void* src, size_t n, hocclDataType_t dt, kernels::BinOp op,
                      CallTag tag) override;
  bool progress() override;
  size_t pending() const override;
  void waitForActivity(int timeoutMicros) override;
  const Channel& wire() const override { return wire_; }
  const char* path() const override;

 private:
  enum class State { Agreeing, Settling, Direct, Fallback };
  struct Op {  // a posted operation (send: src, bytes; receive: dst, src for reductions)
    bool send = false;
    const char* src = nullptr;
    char* dst = nullptr;
    size_t bytes = 0, elemSize = 1;
    hocclDataType_t dtype = hocclUint8;
    kernels::BinOp op = kernels::BinOp::Sum;
    CallTag tag = 0;                // the call's tag, on every frame of the operation
    size_t launched = 0, done = 0;  // send: bytes copied out / credited; receive: bytes arrived / landed
  };
  struct Piece {
    uint64_t seq;
    size_t len;
    Op* op;
  };

  void post(const Op& op);
  void postDirect(const Op& op);
  void sendFrame(const void* msg, size_t bytes);
  void sendPieceFrame(Kind kind, const Piece& p);  // a Ready or a Credit for piece p
  void postFrameRecv();
  void onFrame(const Frame& f);
  void onReady(const Msg& m);
  void land(const Msg& m, Op& op);
  void topUpFrameRecvs();
  void onCredit(const Msg& m);
  void exportArea(HandleMode handles, Hello* h);
  void decideRound2();
  bool fetchPeerFd();
  void finishRound2(std::string why);
  bool serveFd();
  void settle();
  bool launchSends();
  bool sendReadies();
  bool reclaim();
  [[noreturn]] void mismatch(const std::string& what) const;
  void checkTag(CallTag theirs, CallTag mine, const char* verb) const;  // a mismatch when both tag and differ
  void release();

  Channel& wire_;
  device::Device& dev_;
  int rank_;
  State state_ = State::Agreeing;
  bool willing_;
  DeviceFallback makeFallback_;
  std::unique_ptr<DeviceChannel> fallback_;
  std::vector<Op> early_;  // posted while agreeing

  // Agreement.
  Hello helloIn_{};
  bool helloArrived_ = false, verdictSent_ = false, verdictArrived_ = false;
  bool myOk_ = false, peerOk_ = false;
  HandleKind myKind_ = HandleKind::Legacy;      // how this rank's area is exported
  HandleKind mappedKind_ = HandleKind::Legacy;  // how the peer's area was mapped here
  uint64_t nonce_ = 0;                          // names this rank's fd socket (HandleKind::Fd)
  device::IpcHandle myArea_{};                  // HandleKind::Fd: the exported allocation's size and the area's offset
  bool decided_ = false;                        // decideRound2 ran
  net::Fd exportFd_;                            // this rank's area as a descriptor, until passed
  std::unique_ptr<FdServer> fdServer_;          // passes exportFd_ to the peer
  std::unique_ptr<FdClient> fdClient_;          // fetches the peer's descriptor

  // This rank's receive area, and the peer's (mapped here).
  char* area_ = nullptr;
  size_t slotBytes_, slots_;
  char* peerArea_ = nullptr;
  size_t peerSlotBytes_ = 0, peerSlots_ = 0;
  std::vector<device::Event> sendEvents_, recvEvents_;  // per peer slot / per own slot

  // Frames on the wire.
  std::deque<Frame> out_;  // posted sends, oldest first, until the wire no longer counts them
  size_t recvsOpen_ = 0;   // frame receives posted to the wire and not yet complete
  // The frames arriving, one per open frame receive, in posting order: a wire may hand the bytes of a later
  // receive to its sink before an earlier one is whole (tcp stripes messages over several connections), so each
  // receive fills its own frame and frames are handled in posting order once the oldest is whole.
  struct Arriving {
    Frame frame{};
    size_t fill = 0;
  };
  std::deque<std::unique_ptr<Arriving>> arriving_;

  // The direct path.
  std::deque<Op> sends_, recvs_;  // in posting order, until complete
  std::deque<Piece> copying_;     // sends: copy into the peer's slot launched, Ready not yet sent
  std::deque<Piece> landing_;     // receives: copy or reduction out of this rank's slot launched
  uint64_t sendSeq_ = 0, creditSeq_ = 0, readySeq_ = 0;
  std::deque<Msg> earlyReadys_;  // Readys that arrived before this rank posted their receive (stashed, in order)
  size_t creditsDue_ = 0, readysDue_ = 0;  // frames the posted operations still wait for
  bool busy_ = false;                      // device work launched since the last synchronisation
};

}  // namespace hoccl::transport::cuda_ipc
