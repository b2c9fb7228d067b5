/// @file cuda_ipc_protocol.h
/// The messages two ranks of one host exchange over their Channel (shm or tcp) to move device buffers between their
/// devices directly (cuda_ipc_channel.h). Every message has a fixed size, so that a receive posted for one kind can
/// take another: the receiver dispatches on `kind`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device/device.h"
#include "transports/transport.h"

namespace hoccl::transport::cuda_ipc {

/// "HocIpc01": the first 8 bytes of every message.
constexpr uint64_t kMagic = 0x3130637049636f48ull;

/// What a message says.
enum class Kind : uint32_t {
  Hello = 1,    ///< round 1: willing, device key, the sender's slot area (IPC handle or fd socket, slot size, count)
  Verdict = 2,  ///< round 2: whether the sender mapped the peer's area and its device reaches it
  Ready = 3,    ///< data: piece `seq` of an operation of `opBytes` lies in the receiver's slot seq % slots
  Credit = 4,   ///< data: the receiver has consumed piece `seq` (its slot is free again)
};

/// How a Hello's area is to be mapped.
enum class HandleKind : uint32_t {
  Legacy = 1,  ///< Device::importHandle of `area` (cudaIpcMemHandle; the sim's pid and memfd)
  Fd = 2,      ///< Device::importFd of a descriptor fetched over a Unix socket (fd_pass.h) with `nonce`
};

/// Round 1 of the agreement, one each way.
struct Hello {
  uint64_t magic = kMagic;
  Kind kind = Kind::Hello;
  uint32_t willing = 0;     ///< HOCCL_DEVICE_P2P=1 here and this rank exported its slot area
  int32_t rank = -1;        ///< the sender's rank (checked: a crossed wire is an internal error)
  int32_t pid = 0;          ///< the sender's pid, for messages
  uint64_t slotBytes = 0;   ///< bytes per slot of the sender's area
  uint64_t slots = 0;       ///< slots in the sender's area
  char deviceKey[64] = {};  ///< device::Device::peerKey() of the sender, NUL-terminated
  device::IpcHandle area;   ///< the sender's slot area (valid when willing): its size and offset for both kinds
  HandleKind handleKind = HandleKind::Legacy;  ///< how to map `area`
  uint32_t reserved = 0;
  uint64_t nonce = 0;  ///< HandleKind::Fd: names the sender's Unix socket (fd_pass.h: fdSocketName(pid, nonce))
};

/// Round 2 of the agreement, one each way: the direct path runs only when both say ok.
struct Verdict {
  uint64_t magic = kMagic;
  Kind kind = Kind::Verdict;
  uint32_t ok = 0;  ///< the peer's area is mapped here and this device reaches it
};

/// A data-path message (Ready or Credit).
struct Msg {
  uint64_t magic = kMagic;
  Kind kind = Kind::Ready;
  /// The call tag of the operation (transport.h: RecvTarget::tag), 0 when untagged: the receiver of a Ready, and the
  /// sender getting a Credit, fail a piece of the right size whose tag is another call's (both tags non-zero).
  CallTag tag = 0;
  uint64_t seq = 0;      ///< the piece's number in this direction's stream of pieces (0, 1, ...)
  uint64_t opBytes = 0;  ///< bytes of the whole operation the piece belongs to
  uint64_t len = 0;      ///< bytes of the piece
};

/// Every message travels in a frame of this many bytes.
constexpr size_t kFrameBytes = 256;
static_assert(sizeof(Hello) <= kFrameBytes && sizeof(Verdict) <= kFrameBytes && sizeof(Msg) <= kFrameBytes,
              "a message must fit one frame");

/// One frame (a message, zero padded).
struct Frame {
  alignas(8) char bytes[kFrameBytes] = {};
};

}  // namespace hoccl::transport::cuda_ipc
