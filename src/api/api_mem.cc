// Shared host memory and buffer registration at the C edge: hocclMemAlloc/hocclMemFree (kernels/shared_mem.h: memory
// peers on the host can map), hocclCommRegister/hocclCommDeregister (kernels/registrations.h: the communicator's
// table, which the shm transport consults to read and write registered peers' buffers directly).
#include <fmt/format.h>

#include "api/guard.h"
#include "comm/communicator.h"
#include "kernels/device/device.h"
#include "kernels/shared_mem.h"

using hoccl::api::guarded;
using hoccl::api::liveComm;

extern "C" {

hocclResult_t hocclMemAlloc(void** ptr, size_t size) {
  return guarded("hocclMemAlloc", [&] {
    if (!ptr) hoccl::throwInvalidArgument("ptr is NULL; pass the address of a pointer");
    *ptr = hoccl::kernels::sharedAlloc(size);
    return hocclSuccess;
  });
}

hocclResult_t hocclMemFree(void* ptr) {
  return guarded("hocclMemFree", [&] {
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
                      "for zero-copy between the ranks of a host)",
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
