/*
 * The CUDA device (cuda_device.h). Memory, streams, events, host functions, flag waits (cuStreamWaitValue32 on a
 * word of pinned, device-mapped host memory) and IPC handles are driver calls on the device's primary context;
 * copies are cuMemcpyAsync; reductions, scaling and division launch the kernels of kernels/cuda/reduce_kernels.cu,
 * which live in the libhoccl-cuda plugin (built with nvcc and the static CUDA runtime) that this file dlopens next
 * to libhoccl on first use. Every failure names the driver call, its CUresult text and the device.
 */
#include "kernels/device/cuda_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/one_shot_phases.h"

namespace hoccl::device {
namespace {

constexpr unsigned kHostAllocDeviceMap = 0x02;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned kHostAllocPortable = 0x01;   // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kWaitValueGeq = 0x0;         // CU_STREAM_WAIT_VALUE_GEQ
constexpr unsigned kEventDisableTiming = 0x2;   // CU_EVENT_DISABLE_TIMING
constexpr unsigned kStreamNonBlocking = 0x1;    // CU_STREAM_NON_BLOCKING
constexpr unsigned kIpcLazyPeerAccess = 0x1;    // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
constexpr int kNotReady = 600;                  // CUDA_ERROR_NOT_READY
// cuMem (virtual memory management) constants, checked against cuda.h by kernels/cuda/link_check.cu.
constexpr int kAllocPinned = 1;             // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kHandlePosixFd = 1;           // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kLocationDevice = 1;          // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kAccessReadWrite = 3;         // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int kGranularityRecommended = 1;  // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
constexpr int kAttrVmm = 102;               // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
constexpr int kAttrPosixFd = 103;           // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED

// The plugin's launchers (kernels/cuda/reduce_cuda.h).
struct Kernels {
  int (*reduce)(void*, const void*, const void*, size_t, hocclDataType_t, kernels::BinOp, hocclStream_t) = nullptr;
  int (*scale)(void*, const void*, size_t, hocclDataType_t, const void*, hocclStream_t) = nullptr;
  int (*divide)(void*, size_t, hocclDataType_t, int, hocclStream_t) = nullptr;
  int (*preload)() = nullptr;
  int (*oneShot)(const kernels::one_shot::Args*, hocclDataType_t, int, hocclStream_t) = nullptr;
  int (*oneShotPreload)() = nullptr;
  std::string error;  // why they are missing
};

// Where libhoccl is, so the plugin is looked for next to it first.
std::string pluginPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pluginPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + "libhoccl-cuda.so";
  }
  return "libhoccl-cuda.so";
}

const Kernels& kernelsPlugin() {
  static const Kernels k = [] {
    Kernels x;
    const std::string path = pluginPath();
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libhoccl-cuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      x.error = fmt::format(
          "cannot load the CUDA kernels plugin libhoccl-cuda.so ({}); build hoccl with nvcc "
          "(meson option cuda) and install the plugin next to libhoccl",
          e ? e : "not found");
      return x;
    }
    x.reduce = reinterpret_cast<decltype(x.reduce)>(dlsym(lib, "hocclCudaReduce"));
    x.scale = reinterpret_cast<decltype(x.scale)>(dlsym(lib, "hocclCudaScale"));
    x.divide = reinterpret_cast<decltype(x.divide)>(dlsym(lib, "hocclCudaDivide"));
    x.preload = reinterpret_cast<decltype(x.preload)>(dlsym(lib, "hocclCudaPreload"));
    x.oneShot = reinterpret_cast<decltype(x.oneShot)>(dlsym(lib, "hocclCudaOneShotAllReduce"));
    x.oneShotPreload = reinterpret_cast<decltype(x.oneShotPreload)>(dlsym(lib, "hocclCudaOneShotPreload"));
    if (!x.reduce || !x.scale || !x.divide) x.error = "libhoccl-cuda.so lacks hocclCudaReduce/Scale/Divide";
    return x;
  }();
  return k;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(const cuda::DriverApi& api, int ordinal, void* ctx, std::string name)
      : api_(api), ordinal_(ordinal), ctx_(ctx), name_(std::move(name)) {}

  std::string name() const override { return fmt::format("CUDA device {} ({})", ordinal_, name_); }
  bool simulated() const override { return false; }
  int ordinal() const override { return ordinal_; }
  bool hostAccessible() const override { return false; }

  void* malloc(size_t bytes) override {
    bind();
    unsigned long long p = 0;
    check(api_.memAlloc(&p, bytes == 0 ? 1 : bytes), fmt::format("cuMemAlloc of {} bytes", bytes));
    return reinterpret_cast<void*>(p);
  }
  void free(void* ptr) override {
    if (!ptr) return;
    bind();
    VmmMapping m;
    if (takeMapping(ptr, false, &m)) return unmapVmm(m, "free");
    check(api_.memFree(addr(ptr)), fmt::format("cuMemFree of {}", ptr));
  }
  bool owns(const void* ptr) const override {
    const cuda::PtrKind k = cuda::classify(ptr);
    return k == cuda::PtrKind::Device;
  }
  // On a stream of its own (non-blocking) and complete on return. cuMemcpy is not: from pageable host memory it
  // returns once the bytes are staged, before they land, and it runs on the legacy default stream, which a stream
  // created without CU_STREAM_NON_BLOCKING (torch's default stream is the legacy one) waits for, so a copy by the
  // proxy could wait for a caller's stream that waits for the proxy (both seen on an H200: kernels read inputs
  // before cuMemcpy's bytes had landed).
  void memcpy(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    bind();
    std::lock_guard<std::mutex> l(copyMu_);
    if (!copyStream_) check(api_.streamCreate(&copyStream_, kStreamNonBlocking), "cuStreamCreate (copies)");
    check(api_.memcpyAsync(addr(dst), addr(src), bytes, copyStream_), "cuMemcpyAsync");
    check(api_.streamSynchronize(copyStream_), "cuStreamSynchronize after a copy");
  }

  /// Loads every kernel of the plugin now (hocclCudaPreload: CUDA's lazy loading would otherwise load each on its
  /// first launch, which can wait for a caller's stream that waits for hoccl). A missing plugin is reported at the
  /// first launch instead, so that host collectives on a machine with a GPU need no plugin.
  void preloadKernels() {
    const Kernels& k = kernelsPlugin();
    if (!k.error.empty()) return;
    bind();
    if (!k.preload) {
      HOCCL_WARN(kInit,
                 "{}: libhoccl-cuda.so has no hocclCudaPreload (an older plugin?); its kernels load on first "
                 "use, which can hang a first collective whose caller's stream waits for hoccl",
                 name());
      return;
    }
    int r = k.preload();
    if (r == 0 && k.oneShotPreload) r = k.oneShotPreload();
    if (r != 0) HOCCL_WARN(kInit, "{}: loading the CUDA kernels failed (cudaError {}); launches will fail", name(), r);
  }

  void* mallocHost(size_t bytes) override {
    bind();
    void* p = nullptr;
    check(api_.memHostAlloc(&p, bytes == 0 ? 1 : bytes, kHostAllocDeviceMap | kHostAllocPortable),
          fmt::format("cuMemHostAlloc of {} bytes", bytes));
    return p;
  }
  void freeHost(void* ptr) override {
    if (!ptr) return;
    bind();
    check(api_.memFreeHost(ptr), fmt::format("cuMemFreeHost of {}", ptr));
  }

  Stream createStream() override {
    bind();
    void* s = nullptr;
    check(api_.streamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
    return s;
  }
  void destroyStream(Stream stream) override {
    bind();
    check(api_.streamDestroy(stream), "cuStreamDestroy");
  }
  // The driver may crash on a handle that is not a stream, so none is refused here.
  bool validStream(Stream) const override { return true; }
  void synchronize(Stream stream) override {
    bind();
    check(api_.streamSynchronize(stream), "cuStreamSynchronize");
  }

  Event createEvent() override {
    bind();
    void* e = nullptr;
    check(api_.eventCreate(&e, kEventDisableTiming), "cuEventCreate");
    return e;
  }
  void destroyEvent(Event event) override {
    bind();
    check(api_.eventDestroy(event), "cuEventDestroy");
  }
  void record(Event event, Stream stream) override {
    bind();
    check(api_.eventRecord(event, stream), "cuEventRecord");
  }
  bool query(Event event) override {
    bind();
    const int r = api_.eventQuery(event);
    if (r == kNotReady) return false;
    check(r, "cuEventQuery");
    return true;
  }
  void streamWaitEvent(Stream stream, Event event) override {
    bind();
    check(api_.streamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
  }

  void launchHostFunc(Stream stream, std::function<void()> fn) override {
    bind();
    auto* heap = new std::function<void()>(std::move(fn));
    const int r = api_.launchHostFunc(
        stream,
        [](void* p) {
      std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(p));
      (*f)();
        },
        heap);
    if (r != 0) delete heap;
    check(r, "cuLaunchHostFunc");
  }
  void streamWaitFlag(Stream stream, const uint32_t* flag, uint32_t value) override {
    bind();
    unsigned long long dev = 0;
    check(api_.memHostGetDevicePointer(&dev, const_cast<uint32_t*>(flag), 0), "cuMemHostGetDevicePointer");
    check(api_.streamWaitValue32(stream, dev, value, kWaitValueGeq), "cuStreamWaitValue32");
  }
  uint32_t* allocFlag() override {
    bind();
    void* p = nullptr;
    check(api_.memHostAlloc(&p, sizeof(uint32_t), kHostAllocDeviceMap | kHostAllocPortable), "cuMemHostAlloc");
    *static_cast<uint32_t*>(p) = 0;
    return static_cast<uint32_t*>(p);
  }
  void freeFlag(uint32_t* flag) override {
    bind();
    check(api_.memFreeHost(flag), "cuMemFreeHost");
  }

  void launchCopy(Stream stream, void* dst, const void* src, size_t bytes) override {
    bind();
    if (bytes) check(api_.memcpyAsync(addr(dst), addr(src), bytes, stream), "cuMemcpyAsync");
  }
  void launchOneShotAllReduce(Stream stream, const kernels::one_shot::Args& args, hocclDataType_t dt,
                              kernels::BinOp op) override {
    bind();
    if (!plugin().oneShot)
      throwInvalidUsage(fmt::format("{}: libhoccl-cuda.so has no hocclCudaOneShotAllReduce (an older plugin?): set "
                                    "HOCCL_DEVICE_ONE_SHOT=0",
                                    name()));
    checkLaunch(plugin().oneShot(&args, dt, static_cast<int>(op), static_cast<hocclStream_t>(stream)),
                "the one-kernel all-reduce");
  }
  void launchReduce(Stream stream, void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt,
                    kernels::BinOp op) override {
    bind();
    checkLaunch(plugin().reduce(dst, a, b, n, dt, op, static_cast<hocclStream_t>(stream)), "the reduce kernel");
  }
  void launchScale(Stream stream, void* dst, const void* src, size_t n, hocclDataType_t dt,
                   const void* scalar) override {
    bind();
    checkLaunch(plugin().scale(dst, src, n, dt, scalar, static_cast<hocclStream_t>(stream)), "the scale kernel");
  }
  void launchDivide(Stream stream, void* data, size_t n, hocclDataType_t dt, int divisor) override {
    bind();
    checkLaunch(plugin().divide(data, n, dt, divisor, static_cast<hocclStream_t>(stream)), "the divide kernel");
  }

  IpcHandle exportHandle(const void* ptr) override {
    bind();
    unsigned long long base = 0;
    size_t size = 0;
    check(api_.memGetAddressRange(&base, &size, addr(ptr)), "cuMemGetAddressRange");
    cuda::CuIpcMemHandle h{};
    check(api_.ipcGetMemHandle(&h, base), "cuIpcGetMemHandle");
    IpcHandle out;
    static_assert(sizeof out.bytes == sizeof h.reserved, "IPC handle size");
    std::memcpy(out.bytes, h.reserved, sizeof h.reserved);
    out.size = size;
    out.offset = addr(ptr) - base;
    return out;
  }
  void* importHandle(const IpcHandle& handle) override {
    bind();
    cuda::CuIpcMemHandle h{};
    std::memcpy(h.reserved, handle.bytes, sizeof h.reserved);
    unsigned long long p = 0;
    check(api_.ipcOpenMemHandle(&p, h, kIpcLazyPeerAccess), "cuIpcOpenMemHandle");
    return reinterpret_cast<char*>(p) + handle.offset;
  }
  void closeHandle(void* ptr) override {
    bind();
    VmmMapping m;
    if (takeMapping(ptr, true, &m)) return unmapVmm(m, "closeHandle");
    unsigned long long base = 0;
    size_t size = 0;
    check(api_.memGetAddressRange(&base, &size, addr(ptr)), "cuMemGetAddressRange");
    check(api_.ipcCloseMemHandle(base), "cuIpcCloseMemHandle");
  }

  // cuMem allocations with POSIX file descriptor handles (what NCCL's ncclMemAlloc makes): the physical memory is
  // cuMemCreate'd, mapped into a reserved range and made read-write for this device; an importer maps the same
  // physical memory from the descriptor into a range of its own.
  bool fdHandles() const override {
    if (!api_.memCreate || !api_.memRelease || !api_.memAddressReserve || !api_.memAddressFree || !api_.memMap ||
        !api_.memUnmap || !api_.memSetAccess || !api_.memGetAllocationGranularity || !api_.memExportToShareableHandle ||
        !api_.memImportFromShareableHandle || !api_.memRetainAllocationHandle || !api_.deviceGetAttribute)
      return false;
    int dev = 0, vmm = 0, fd = 0;
    return api_.deviceGet(&dev, ordinal_) == 0 && api_.deviceGetAttribute(&vmm, kAttrVmm, dev) == 0 && vmm != 0 &&
           api_.deviceGetAttribute(&fd, kAttrPosixFd, dev) == 0 && fd != 0;
  }
  void* mallocShareable(size_t bytes) override {
    if (!fdHandles())
      throw Error(hocclUnhandledCudaError,
                  name() + ": this driver or device cannot allocate cuMem memory with POSIX file descriptor handles");
    bind();
    const cuda::CuMemAllocationProp prop = allocationProp();
    size_t gran = 0;
    check(api_.memGetAllocationGranularity(&gran, &prop, kGranularityRecommended), "cuMemGetAllocationGranularity");
    if (gran == 0) gran = size_t{2} << 20;
    const size_t size = (std::max<size_t>(bytes, 1) + gran - 1) / gran * gran;
    unsigned long long handle = 0;
    check(api_.memCreate(&handle, size, &prop, 0), fmt::format("cuMemCreate of {} bytes", size));
    try {
      const unsigned long long base = mapVmm(handle, size, gran);
      api_.memRelease(handle);  // the mapping keeps the memory alive until cuMemUnmap
      std::lock_guard<std::mutex> l(mu_);
      vmm_[base] = VmmMapping{base, size, false};
      return reinterpret_cast<void*>(base);
    } catch (...) {
      api_.memRelease(handle);
      throw;
    }
  }
  bool shareable(const void* ptr) const override {
    std::lock_guard<std::mutex> l(mu_);
    const VmmMapping* m = findMapping(ptr);
    return m && !m->imported;
  }
  int exportFd(const void* ptr, IpcHandle* where) override {
    bind();
    VmmMapping m;
    {
      std::lock_guard<std::mutex> l(mu_);
      const VmmMapping* found = findMapping(ptr);
      if (!found || found->imported)
        throw Error(hocclInvalidArgument,
                    fmt::format("{}: {} is not in a cuMem allocation of this process (mallocShareable)", name(), ptr));
      m = *found;
    }
    unsigned long long handle = 0;
    check(api_.memRetainAllocationHandle(&handle, reinterpret_cast<void*>(m.base)), "cuMemRetainAllocationHandle");
    int fd = -1;
    const int r = api_.memExportToShareableHandle(&fd, handle, kHandlePosixFd, 0);
    api_.memRelease(handle);  // balances the retain
    check(r, "cuMemExportToShareableHandle (POSIX file descriptor)");
    *where = IpcHandle{};
    where->size = m.size;
    where->offset = addr(ptr) - m.base;
    return fd;
  }
  void* importFd(int fd, size_t size, size_t offset) override {
    bind();
    if (size == 0 || offset >= size)
      throw Error(hocclInvalidArgument, fmt::format("{}: importFd of {} bytes at offset {}", name(), size, offset));
    unsigned long long handle = 0;
    check(api_.memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                            kHandlePosixFd),
          "cuMemImportFromShareableHandle (POSIX file descriptor)");
    try {
      const cuda::CuMemAllocationProp prop = allocationProp();
      size_t gran = 0;
      check(api_.memGetAllocationGranularity(&gran, &prop, kGranularityRecommended), "cuMemGetAllocationGranularity");
      // cuMemMap fails when size exceeds the imported allocation, so nothing past its end is ever mapped.
      const unsigned long long base = mapVmm(handle, size, gran == 0 ? size_t{2} << 20 : gran);
      api_.memRelease(handle);
      std::lock_guard<std::mutex> l(mu_);
      vmm_[base] = VmmMapping{base, size, true};
      return reinterpret_cast<char*>(base) + offset;
    } catch (...) {
      api_.memRelease(handle);
      throw;
    }
  }

  std::string peerKey() const override {
    int dev = 0;
    char bus[64] = {};
    if (!api_.deviceGetPCIBusId || api_.deviceGet(&dev, ordinal_) != 0 ||
        api_.deviceGetPCIBusId(bus, sizeof bus - 1, dev) != 0)
      return fmt::format("cuda:unknown-bus:{}", ordinal_);  // never matches a device: no peer access
    return bus;
  }
  bool canAccessPeer(const std::string& key) override {
    int mine = 0, theirs = 0, can = 0;
    if (!api_.deviceGetByPCIBusId || !api_.deviceCanAccessPeer || api_.deviceGet(&mine, ordinal_) != 0) return false;
    // A GPU hidden from this process (CUDA_VISIBLE_DEVICES) has no bus id here: no peer access.
    if (api_.deviceGetByPCIBusId(&theirs, key.c_str()) != 0) return false;
    if (theirs == mine) return true;  // the same GPU: IPC mappings of one device always work
    return api_.deviceCanAccessPeer(&can, mine, theirs) == 0 && can != 0;
  }

 private:
  struct VmmMapping {  // a range mapped with cuMemMap: this process's mallocShareable or an importFd
    unsigned long long base = 0;
    size_t size = 0;
    bool imported = false;
  };

  cuda::CuMemAllocationProp allocationProp() const {
    cuda::CuMemAllocationProp prop;
    prop.type = kAllocPinned;
    prop.requestedHandleTypes = kHandlePosixFd;
    prop.location.type = kLocationDevice;
    int dev = 0;
    api_.deviceGet(&dev, ordinal_);
    prop.location.id = dev;
    return prop;
  }
  // Reserves a range, maps handle's first size bytes there and makes it read-write for this device.
  unsigned long long mapVmm(unsigned long long handle, size_t size, size_t align) {
    unsigned long long base = 0;
    check(api_.memAddressReserve(&base, size, align, 0, 0), fmt::format("cuMemAddressReserve of {} bytes", size));
    int r = api_.memMap(base, size, 0, handle, 0);
    if (r != 0) {
      api_.memAddressFree(base, size);
      check(r, fmt::format("cuMemMap of {} bytes", size));
    }
    cuda::CuMemAccessDesc access;
    access.location = allocationProp().location;
    access.flags = kAccessReadWrite;
    r = api_.memSetAccess(base, size, &access, 1);
    if (r != 0) {
      api_.memUnmap(base, size);
      api_.memAddressFree(base, size);
      check(r, "cuMemSetAccess (read-write for this device)");
    }
    return base;
  }
  void unmapVmm(const VmmMapping& m, const char* what) {
    check(api_.memUnmap(m.base, m.size), fmt::format("{}: cuMemUnmap of {} bytes", what, m.size));
    check(api_.memAddressFree(m.base, m.size), fmt::format("{}: cuMemAddressFree", what));
  }
  // The cuMem mapping holding ptr, or null (caller holds mu_).
  const VmmMapping* findMapping(const void* ptr) const {
    auto it = vmm_.upper_bound(addr(ptr));
    if (it == vmm_.begin()) return nullptr;
    --it;
    return addr(ptr) < it->first + it->second.size ? &it->second : nullptr;
  }
  // Removes the cuMem mapping that ptr starts (free: this process's, at its base) or lies in (closeHandle: an
  // imported one); false when ptr is not one.
  bool takeMapping(const void* ptr, bool imported, VmmMapping* out) {
    std::lock_guard<std::mutex> l(mu_);
    const VmmMapping* m = findMapping(ptr);
    if (!m || m->imported != imported || (!imported && m->base != addr(ptr))) return false;
    *out = *m;
    vmm_.erase(m->base);
    return true;
  }

  static unsigned long long addr(const void* p) { return reinterpret_cast<unsigned long long>(p); }
  // Makes the primary context current on the calling thread (cheap when it already is).
  void bind() const { api_.ctxSetCurrent(ctx_); }
  void check(int result, const std::string& what) const {
    if (result != 0)
      throw Error(hocclUnhandledCudaError,
                  fmt::format("{}: {} failed: {}", name(), what, cuda::driverErrorText(result)));
  }
  void checkLaunch(int cudaError, const char* what) const {
    if (cudaError != 0)
      throw Error(hocclUnhandledCudaError,
                  fmt::format("{}: launching {} failed (cudaError {})", name(), what, cudaError));
  }
  const Kernels& plugin() const {
    const Kernels& k = kernelsPlugin();
    if (!k.error.empty()) throw Error(hocclUnhandledCudaError, name() + ": " + k.error);
    return k;
  }

  const cuda::DriverApi& api_;
  int ordinal_;
  void* ctx_;
  std::string name_;
  std::mutex copyMu_;           // memcpy's stream
  void* copyStream_ = nullptr;  // created on the first memcpy, kept for the process
  mutable std::mutex mu_;
  std::map<unsigned long long, VmmMapping> vmm_;  // cuMem mappings by base address
};

}  // namespace

std::unique_ptr<Device> makeCudaDevice(int ordinal) {
  const cuda::DriverApi* api = cuda::driverApi();
  if (!api || !api->init || !api->deviceGet || !api->primaryCtxRetain || !api->ctxSetCurrent || !api->memAlloc ||
      !api->streamCreate || !api->eventCreate || !api->streamWaitValue32 || !api->launchHostFunc)
    return nullptr;
  if (api->init(0) != 0 || ordinal >= cuda::deviceCount()) return nullptr;
  int dev = 0;
  void* ctx = nullptr;
  if (api->deviceGet(&dev, ordinal) != 0 || api->primaryCtxRetain(&ctx, dev) != 0) return nullptr;
  char name[256] = "unknown";
  if (api->deviceGetName) api->deviceGetName(name, sizeof name, dev);
  auto device = std::make_unique<CudaDevice>(*api, ordinal, ctx, name);
  device->preloadKernels();
  return device;
}

}  // namespace hoccl::device
