// Device memory and streams at the C edge (hoccl extensions): what programs without the CUDA runtime (the perf tools,
// tests on the simulated device) need to make device buffers and streams for hoccl's stream-ordered calls.
#include <fmt/format.h>

#include "api/guard.h"
#include "kernels/device/device.h"

using hoccl::api::guarded;
namespace device = hoccl::device;

extern "C" {

hocclResult_t hocclDeviceName(const char** name) {
  return guarded("hocclDeviceName", [&] {
    if (!name) hoccl::throwInvalidArgument("name is NULL");
    static thread_local std::string text;
    device::Device* d = device::current();
    text = d ? d->name() : std::string();
    *name = d ? text.c_str() : nullptr;
    return hocclSuccess;
  });
}

hocclResult_t hocclDeviceMalloc(void** ptr, size_t bytes) {
  return guarded("hocclDeviceMalloc", [&] {
    if (!ptr) hoccl::throwInvalidArgument("ptr is NULL");
    *ptr = device::require("hocclDeviceMalloc").malloc(bytes);
    return hocclSuccess;
  });
}

hocclResult_t hocclDeviceFree(void* ptr) {
  return guarded("hocclDeviceFree", [&] {
    if (ptr) device::require("hocclDeviceFree").free(ptr);
    return hocclSuccess;
  });
}

hocclResult_t hocclDeviceMemcpy(void* dst, const void* src, size_t bytes) {
  return guarded("hocclDeviceMemcpy", [&] {
    if (bytes && (!dst || !src)) hoccl::throwInvalidArgument("dst or src is NULL with bytes > 0");
    device::require("hocclDeviceMemcpy").memcpy(dst, src, bytes);
    return hocclSuccess;
  });
}

hocclResult_t hocclStreamCreate(hocclStream_t* stream) {
  return guarded("hocclStreamCreate", [&] {
    if (!stream) hoccl::throwInvalidArgument("stream is NULL");
    *stream = static_cast<hocclStream_t>(device::require("hocclStreamCreate").createStream());
    return hocclSuccess;
  });
}

hocclResult_t hocclStreamDestroy(hocclStream_t stream) {
  return guarded("hocclStreamDestroy", [&] {
    if (!stream) hoccl::throwInvalidArgument("stream is NULL (the default stream cannot be destroyed)");
    device::require("hocclStreamDestroy").destroyStream(stream);
    return hocclSuccess;
  });
}

hocclResult_t hocclStreamSynchronize(hocclStream_t stream) {
  return guarded("hocclStreamSynchronize", [&] {
    device::Device& d = device::require("hocclStreamSynchronize");
    if (!d.validStream(stream))
      hoccl::throwInvalidArgument(
          fmt::format("stream {} is not a live stream of {}", static_cast<void*>(stream), d.name()));
    d.synchronize(stream);
    return hocclSuccess;
  });
}

}  // extern "C"
