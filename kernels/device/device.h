/// @file device.h
/// The device interface: what hoccl asks of an accelerator, whichever implements it. Memory tagged as device memory
/// (allocate, free, classify a pointer, copy), streams (ordered work queues), events (record on a stream, query,
/// make another stream wait), host functions and flag waits enqueued on a stream, the copy/reduce/scale/divide
/// kernels launched on a stream, and IPC handles (export a device allocation, map a peer's on this host).
///
/// Two implementations: `sim` (kernels/device/sim_device.cc, HOCCL_DEVICE=sim) runs everything on the CPU so that
/// the device path executes end to end on machines without a GPU; `cuda` (kernels/device/cuda_device.cc) goes
/// through the CUDA driver loaded at run time (kernels/cuda/cuda_driver.*) and the kernels of kernels/cuda/ in the
/// libhoccl-cuda plugin. The sim is never chosen silently: only HOCCL_DEVICE=sim selects it, and name() says
/// "simulated device".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/one_shot_phases.h"

namespace hoccl::device {

/// A stream handle as the C API passes it (a CUstream / cudaStream_t for CUDA; null is the default stream).
using Stream = void*;
/// An event handle (a CUevent for CUDA).
using Event = void*;

/// What a peer on the same host needs to map a device allocation through exportHandle/importHandle (the owner's pid
/// and memfd for the sim, a CUipcMemHandle for CUDA), plus the allocation's size and the exported pointer's offset.
struct IpcHandle {
  char bytes[64] = {};  ///< implementation-defined, opaque
  size_t size = 0;      ///< bytes of the allocation
  size_t offset = 0;    ///< the exported pointer's offset from the allocation's start
};

/// One accelerator. Every method throws hoccl::Error naming the device and the failed operation.
class Device {
 public:
  virtual ~Device() = default;
  /// For logs and the perf tools' headers: "simulated device 0 (CPU)" or "CUDA device 0 (<name>)".
  virtual std::string name() const = 0;
  /// True for the simulated device.
  virtual bool simulated() const = 0;
  /// The device ordinal (hocclCommCuDevice).
  virtual int ordinal() const = 0;
  /// True when host code can read and write this device's memory directly (only the simulated device with
  /// HOCCL_SIM_HOST_ACCESS=1). When false, the executor stages device buffers through pinned host memory with device
  /// copies (src/exec/staged_channel.h) and never touches them from the host (docs/cuda.md).
  virtual bool hostAccessible() const = 0;

  /// Allocates bytes of device memory (at least 256-byte aligned; 0 bytes gives a valid unique pointer).
  virtual void* malloc(size_t bytes) = 0;
  /// Frees memory of malloc (null is ignored; anything else not from malloc is an error).
  virtual void free(void* ptr) = 0;
  /// True when ptr lies in device memory of this device (allocated here or mapped from a peer).
  virtual bool owns(const void* ptr) const = 0;
  /// Copies bytes between any two of host and device memory, synchronously: complete when it returns, and ordered
  /// with no stream (synchronise the stream that produced src, or that reads dst, yourself). CUDA: cuMemcpyAsync on a
  /// private non-blocking stream, then that stream's synchronisation.
  virtual void memcpy(void* dst, const void* src, size_t bytes) = 0;
  /// Allocates bytes of pinned host memory that the device's copies and kernels can read and write at the same
  /// address (CUDA: cuMemHostAlloc, device-mapped and portable); the host reads and writes it as usual.
  virtual void* mallocHost(size_t bytes) = 0;
  /// Frees memory of mallocHost (null is ignored).
  virtual void freeHost(void* ptr) = 0;

  /// A new stream.
  virtual Stream createStream() = 0;
  /// Destroys a stream after its queued work has run.
  virtual void destroyStream(Stream stream) = 0;
  /// False when stream is certainly not a live stream of this device (null, the default stream, is valid). The CUDA
  /// device cannot check a handle safely and says true.
  virtual bool validStream(Stream stream) const = 0;
  /// Waits until every operation queued on stream has run; throws the first error a queued operation raised.
  virtual void synchronize(Stream stream) = 0;

  /// A new event (not recorded: queries say complete).
  virtual Event createEvent() = 0;
  /// Destroys an event.
  virtual void destroyEvent(Event event) = 0;
  /// Captures the work queued on stream so far: the event completes once it has run.
  virtual void record(Event event, Stream stream) = 0;
  /// True once the work captured by the event's last record has run.
  virtual bool query(Event event) = 0;
  /// Work queued on stream after this call starts only once event has completed.
  virtual void streamWaitEvent(Stream stream, Event event) = 0;

  /// Runs fn on a host thread once the earlier work of stream has run; later work waits for it. fn must not call
  /// into the device.
  virtual void launchHostFunc(Stream stream, std::function<void()> fn) = 0;
  /// Later work on stream waits until *flag >= value. flag is host memory of allocFlag(), written by the host.
  virtual void streamWaitFlag(Stream stream, const uint32_t* flag, uint32_t value) = 0;
  /// A 32-bit word in host memory (zeroed) that the device can read, for streamWaitFlag; freeFlag releases it.
  virtual uint32_t* allocFlag() = 0;
  /// Releases a word of allocFlag.
  virtual void freeFlag(uint32_t* flag) = 0;

  /// Enqueues dst = src (bytes, no overlap) on stream. Either side may be device memory, memory of mallocHost or
  /// (as for cuMemcpyAsync) ordinary host memory. The kernels below take only device memory and memory of mallocHost.
  virtual void launchCopy(Stream stream, void* dst, const void* src, size_t bytes) = 0;
  /// Enqueues dst[i] = op(a[i], b[i]) for n elements (dst may equal a or b exactly).
  virtual void launchReduce(Stream stream, void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt,
                            kernels::BinOp op) = 0;
  /// Enqueues dst[i] = src[i] * scalar (scalar: one element of dt in host memory, read before the call returns).
  virtual void launchScale(Stream stream, void* dst, const void* src, size_t n, hocclDataType_t dt,
                           const void* scalar) = 0;
  /// Enqueues data[i] /= divisor (Avg).
  virtual void launchDivide(Stream stream, void* data, size_t n, hocclDataType_t dt, int divisor) = 0;

  /// Enqueues the one-kernel all-reduce of args.count elements of dt with op (kernels/device/one_shot_phases.h): args' areas
  /// are device memory (this rank's, and its peers' mapped through importHandle), abort and status memory of
  /// mallocHost. How it ended is in args.status once the stream has run it.
  virtual void launchOneShotAllReduce(Stream stream, const kernels::one_shot::Args& args, hocclDataType_t dt,
                                      kernels::BinOp op) = 0;

  /// Exports the allocation holding ptr for a peer process on this host.
  virtual IpcHandle exportHandle(const void* ptr) = 0;
  /// Maps a peer's exported allocation; returns the pointer the peer exported (its offset applied).
  virtual void* importHandle(const IpcHandle& handle) = 0;
  /// Unmaps a pointer of importHandle or importFd.
  virtual void closeHandle(void* ptr) = 0;

  /// True when this device can allocate memory that exports as a POSIX file descriptor (CUDA: the driver has the
  /// cuMem virtual memory calls and the device supports CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the simulated
  /// device: always, its memory is memfd).
  virtual bool fdHandles() const = 0;
  /// Allocates bytes of device memory exportable with exportFd (CUDA: cuMemCreate asking for POSIX file descriptor
  /// handles, reserved, mapped and made read-write for this device, as NCCL's ncclMemAlloc does). free() releases
  /// it. Throws when fdHandles() is false.
  virtual void* mallocShareable(size_t bytes) = 0;
  /// True when ptr lies in an allocation of mallocShareable of this process.
  virtual bool shareable(const void* ptr) const = 0;
  /// Exports the mallocShareable allocation holding ptr as a new file descriptor that the caller owns and closes
  /// (CUDA: cuMemRetainAllocationHandle + cuMemExportToShareableHandle); *where gets the allocation's size and ptr's
  /// offset in it (its bytes are unused). The descriptor is meant for a peer on this host (SCM_RIGHTS).
  virtual int exportFd(const void* ptr, IpcHandle* where) = 0;
  /// Maps a peer's allocation from a descriptor of its exportFd (received over a Unix socket): `size` bytes from
  /// its start, returning the start plus `offset`. Refuses (throws, maps nothing) a descriptor whose allocation is
  /// smaller than size. The descriptor stays the caller's (close it after). closeHandle unmaps.
  virtual void* importFd(int fd, size_t size, size_t offset) = 0;
  /// What a peer process on this host passes to canAccessPeer to learn whether this device's memory, mapped through
  /// an IPC handle, is reachable from its device: "sim" for the simulated device, the PCI bus id for CUDA.
  virtual std::string peerKey() const = 0;
  /// Whether this device's copies and kernels can reach memory of the device named by a peer's peerKey() once mapped
  /// through importHandle (CUDA: the same GPU, or cuDeviceCanAccessPeer for one visible in this process; the
  /// simulated device: any simulated device of this host). False rather than throwing when unsure.
  virtual bool canAccessPeer(const std::string& peerKey) = 0;
};

/// The device of this process: the simulated one when HOCCL_DEVICE=sim; when HOCCL_DEVICE is unset or "cuda" and the
/// driver finds a GPU, the CUDA device of the calling thread's current context (cudaSetDevice, torch.cuda.set_device)
/// or device 0 when it has none; else none (null; HOCCL_DEVICE=none forces that). Chosen once, on first use.
Device* current();

/// current(), or throws hoccl::Error(hocclInvalidArgument) saying that there is no device and how to get one.
Device& require(const char* what);

/// Throws hoccl::Error(hocclInvalidUsage) when stream (null: the default stream) is being captured into a CUDA graph
/// (cuda::streamCapturing): hoccl's stream-ordered calls run on a host proxy, so a graph would hold only the
/// stream's wait for it and every replay would communicate nothing; a host-buffer call cannot wait for a capturing
/// stream either. Does nothing without a CUDA driver.
void refuseCapture(Stream stream);

}  // namespace hoccl::device
