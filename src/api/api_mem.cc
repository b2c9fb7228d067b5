// Memory for collectives and buffer registration at the C edge. hocclMemAlloc/hocclMemFree: device memory when this
// process has a device (a GPU, or the simulated one: HOCCL_DEVICE=sim), as NCCL's ncclMemAlloc; otherwise shared host
// memory that peers on the host can map (kernels/shared_mem.h, zero copy). hocclCommRegister/hocclCommDeregister
// (kernels/registrations.h: the communicator's table, which the shm transport consults to read and write registered
// peers' buffers directly).
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "api/guard.h"
#include "comm/communicator.h"
#include "kernels/device/device.h"
#include "kernels/shared_mem.h"

using hoccl::api::guarded;
using hoccl::api::liveComm;

namespace {

// The device allocations handed out by hocclMemAlloc, so that hocclMemFree frees only those (and not, say, memory
// of hocclDeviceMalloc or a pointer into the middle of a block).
struct DeviceBlocks {
  std::mutex mu;
  std::set<const void*> live;
};

DeviceBlocks& deviceBlocks() {
  static DeviceBlocks* b = new DeviceBlocks;  // never destroyed: frees may come from other libraries' destructors
  return *b;
}

}  // namespace

extern "C" {

hocclResult_t hocclMemAlloc(void** ptr, size_t size) {
  return guarded("hocclMemAlloc", [&] {
    if (!ptr) hoccl::throwInvalidArgument("ptr is NULL; pass the address of a pointer");
    if (hoccl::device::Device* d = hoccl::device::current()) {
      void* p = d->malloc(size);
      DeviceBlocks& b = deviceBlocks();
      std::lock_guard<std::mutex> lock(b.mu);
      b.live.insert(p);
      *ptr = p;
      return hocclSuccess;
    }
    *ptr = hoccl::kernels::sharedAlloc(size);
    return hocclSuccess;
  });
}

hocclResult_t hocclMemFree(void* ptr) {
  return guarded("hocclMemFree", [&] {
    if (!ptr) return hocclSuccess;
    if (hoccl::device::Device* d = hoccl::device::current(); d && d->owns(ptr)) {
      DeviceBlocks& b = deviceBlocks();
      std::lock_guard<std::mutex> lock(b.mu);
      if (b.live.count(ptr) == 0)
        hoccl::throwInvalidArgument(
            fmt::format("{} is device memory of {} that hocclMemAlloc did not hand out (already freed, a pointer "
                        "inside a block, or memory of hocclDeviceMalloc / cudaMalloc: free it with what allocated "
                        "it)",
                        ptr, d->name()));
      d->free(ptr);
      b.live.erase(ptr);
      return hocclSuccess;
    }
    hoccl::kernels::sharedFree(ptr);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommRegister(hocclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("hocclCommRegister", [&] {
    hoccl::Communicator& c = liveComm(comm);
    if (!handle) hoccl::throwInvalidArgument("handle is NULL; pass the address of a void*");
    if (!buff && size > 0) hoccl::throwInvalidArgument("buff is NULL but size is not 0");
    if (buff && hoccl::kernels::classify(buff) == hoccl::kernels::MemoryKind::Device)
      hoccl::throwInvalidArgument(
          fmt::format("buff {} is device memory; hoccl registers host memory only (allocate it with hocclMemAlloc "
                      "in a process without a device for zero-copy between the ranks of a host)",
                      buff));
    *handle = c.registrations().add(buff, size);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommDeregister(hocclComm_t comm, void* handle) {
  return guarded("hocclCommDeregister", [&] {
    liveComm(comm, true).registrations().remove(handle);
    return hocclSuccess;
  });
}

}  // extern "C"
