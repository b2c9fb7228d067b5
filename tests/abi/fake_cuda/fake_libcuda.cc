/// @file fake_libcuda.cc
/// A stand-in for the CUDA driver (libcuda.so.1) with just the entry points hoccl's NCCL shim loads, so that the
/// shim's device-memory and stream paths can be tested on machines without a GPU. It is found only by the test
/// that puts its folder on LD_LIBRARY_PATH. Behaviour:
/// - one device; cuInit succeeds;
/// - cuPointerGetAttribute calls the range in HOCCL_FAKE_CUDA_DEVICE_RANGE ("ADDR:BYTES", hex address) device
///   memory, any other pointer unknown to CUDA (CUDA_ERROR_INVALID_VALUE);
/// - cuStreamSynchronize succeeds for the stream 0x5700 (and counts the calls), and fails with
///   CUDA_ERROR_INVALID_HANDLE (400) for any other;
/// - cuStreamIsCapturing says the stream 0x5701 is being captured into a graph (and its synchronisation fails, as a
///   capturing stream's does), every other stream is not.
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {
int syncCalls = 0;

bool inDeviceRange(unsigned long long p) {
  const char* range = std::getenv("HOCCL_FAKE_CUDA_DEVICE_RANGE");
  if (!range) return false;
  char* end = nullptr;
  const unsigned long long base = std::strtoull(range, &end, 16);
  if (!end || *end != ':') return false;
  const unsigned long long bytes = std::strtoull(end + 1, nullptr, 10);
  return p >= base && p < base + bytes;
}
}  // namespace

extern "C" {

int cuInit(unsigned) { return 0; }

int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}

int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  if (!inDeviceRange(ptr)) return 1;  // CUDA_ERROR_INVALID_VALUE: not a CUDA pointer
  unsigned value = 0;
  if (attribute == 2) value = 2;       // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CU_MEMORYTYPE_DEVICE
  else if (attribute == 8) value = 0;  // CU_POINTER_ATTRIBUTE_IS_MANAGED: no
  else return 1;
  std::memcpy(data, &value, sizeof value);
  return 0;
}

int cuStreamSynchronize(void* stream) {
  if (reinterpret_cast<uintptr_t>(stream) != 0x5700) return 400;
  ++syncCalls;
  return 0;
}

int cuStreamIsCapturing(void* stream, int* status) {
  *status = reinterpret_cast<uintptr_t>(stream) == 0x5701 ? 1 : 0;  // CU_STREAM_CAPTURE_STATUS_ACTIVE : NONE
  return 0;
}

int cuGetErrorString(int error, const char** text) {
  *text = error == 400 ? "invalid resource handle" : "fake driver error";
  return 0;
}

/// Test hook: how many times cuStreamSynchronize succeeded.
int hocclFakeCudaSyncCalls() { return syncCalls; }

}  // extern "C"
