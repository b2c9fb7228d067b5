/// @file shim_mem.cc
/// NCCL's memory calls: ncclMemAlloc/ncclMemFree are hocclMemAlloc/hocclMemFree: device memory when the process has a
/// device (a GPU, or the simulated one), else page-aligned shared memory that the other ranks of the host can map.
/// Registrations of device memory are records only (hoccl's device path does not need them). Host buffer registrations
/// are hocclCommRegister registrations (kept in the communicator's table, which the shm transport consults: memory
/// of ncclMemAlloc registered on every rank of a host is read and written in place); for other memory a
/// registration changes nothing about how data moves. Windows are hocclCommWindowRegister windows (collective, as
/// in NCCL: the ranks swap their parts' sizes and shared blocks for ncclPutSignal, comm/one_sided.h; also a
/// registration as above). A record here per handle answers ncclWinGetUserPtr and checks handles.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/device.h"
#include "kernels/memory.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;

namespace {

/// One registered range. Its address is the handle given to the caller.
struct Registration {
  ncclComm_t comm;
  const void* base;
  size_t bytes;
  bool window;        ///< made by ncclCommWindowRegister (else ncclCommRegister)
  void* hocclHandle;  ///< the communicator's registration (hocclCommRegister) or window (hocclCommWindowRegister)
};

/// Registrations and ncclMemAlloc blocks of the process.
struct Registry {
  std::mutex mu;
  std::map<const void*, std::unique_ptr<Registration>> regs;  ///< by handle
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from other libraries' destructors
  return *r;
}

void* registerRange(ncclComm_t comm, void* buff, size_t size, bool window) {
  hocclComm_t h = toHoccl(comm);
  int n = 0;
  if (const hocclResult_t r = hocclCommCount(h, &n); r != hocclSuccess) {
    throw hoccl::Error(r, fmt::format("invalid communicator {}: {}", static_cast<void*>(comm), hocclGetLastError(h)));
  }
  if (!buff && size > 0) throw hoccl::Error(hocclInvalidArgument, "buff is NULL but size is not 0");
  void* hh = nullptr;
  const bool onDevice = buff && hoccl::kernels::classify(buff) == hoccl::kernels::MemoryKind::Device;
  if (onDevice && !window) {
    // Device memory of the process's device (NCCL registers it for its kernels): kept as a record only; hoccl's
    // device path stages or copies device buffers whether registered or not. Without a device it is refused.
    requireUsableBuffer("buff", buff);
  } else if (window) {  // hoccl refuses a device part on every rank (collective), so no local check here
    hocclWindow_t w = nullptr;
    if (const hocclResult_t rc = hocclCommWindowRegister(h, buff, size, &w); rc != hocclSuccess)
      throw hoccl::Error(rc, hocclGetLastError(h));
    hh = w;
  } else if (const hocclResult_t rc = hocclCommRegister(h, buff, size, &hh); rc != hocclSuccess) {
    throw hoccl::Error(rc, hocclGetLastError(h));
  }
  auto reg = std::make_unique<Registration>(Registration{comm, buff, size, window, hh});
  void* handle = reg.get();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.regs.emplace(handle, std::move(reg));
  return handle;
}

void deregisterRange(ncclComm_t comm, const void* handle, bool window) {
  const char* kind = window ? "window" : "registration handle";
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.regs.find(handle);
  if (it == r.regs.end() || it->second->window != window) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("{} {} is not registered (already deregistered, or not made by {})", kind, handle,
                                   window ? "ncclCommWindowRegister" : "ncclCommRegister"));
  }
  if (it->second->comm != comm) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("{} {} belongs to communicator {}, not to {}", kind, handle,
                                   static_cast<void*>(it->second->comm), static_cast<void*>(comm)));
  }
  hocclComm_t h = toHoccl(comm);
  void* hh = it->second->hocclHandle;
  if (hh || window) {  // a device-memory registration is a record only (registerRange)
    const hocclResult_t rc = window ? hocclCommWindowDeregister(h, static_cast<hocclWindow_t>(hh))
                                    : hocclCommDeregister(h, hh);
    if (rc != hocclSuccess) throw hoccl::Error(rc, hocclGetLastError(h));  // e.g. in use: the record stays too
  }
  r.regs.erase(it);
}

}  // namespace

namespace hoccl::shim {

void dropRegistrations(ncclComm_t comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto it = r.regs.begin(); it != r.regs.end();) {
    it = it->second->comm == comm ? r.regs.erase(it) : std::next(it);
  }
}

WindowInfo windowInfo(ncclWindow_t win) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.regs.find(win);
  if (!win || it == r.regs.end() || !it->second->window) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("window {} is not registered (not made by ncclCommWindowRegister, or already "
                                   "deregistered)",
                                   static_cast<void*>(win)));
  }
  const Registration& reg = *it->second;
  return WindowInfo{reg.comm, const_cast<void*>(reg.base), reg.bytes, static_cast<hocclWindow_t>(reg.hocclHandle)};
}

}  // namespace hoccl::shim

extern "C" {

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&] {
    if (!ptr) throw hoccl::Error(hocclInvalidArgument, "ptr is NULL; pass the address of a pointer");
    // With a device (a GPU, or HOCCL_DEVICE=sim) hocclMemAlloc returns device memory of it, as NCCL does; without
    // one, shared host memory (zero copy). A GPU that hoccl does not use would make that host memory a surprise.
    if (!hoccl::device::current() && hoccl::cuda::deviceCount() > 0) {
      unsupported(
          "this process has a CUDA device, and ncclMemAlloc must then return device memory, but hoccl uses no "
          "device here (HOCCL_DEVICE=none, or the CUDA device could not be opened: HOCCL_DEBUG=INFO says why). "
          "Unset HOCCL_DEVICE, allocate with cudaMalloc, or use NVIDIA's libnccl.so.2.");
    }
    void* p = nullptr;
    if (const hocclResult_t rc = hocclMemAlloc(&p, size); rc != hocclSuccess)
      throw hoccl::Error(rc, hocclGetLastError(nullptr));
    *ptr = p;
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclMemAlloc)

ncclResult_t pncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&] {
    if (!ptr) return ncclSuccess;
    if (const hocclResult_t rc = hocclMemFree(ptr); rc != hocclSuccess)
      throw hoccl::Error(rc, hocclGetLastError(nullptr));
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclMemFree)

ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&] {
    if (!handle) throw hoccl::Error(hocclInvalidArgument, "handle is NULL; pass the address of a void*");
    *handle = registerRange(comm, buff, size, false);
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommRegister)

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&] {
    deregisterRange(comm, handle, false);
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommDeregister)

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  return guarded("ncclCommWindowRegister", [&] {
    if (!win) throw hoccl::Error(hocclInvalidArgument, "win is NULL; pass the address of an ncclWindow_t");
    if (winFlags & ~HOCCL_NCCL_WIN_KNOWN_FLAGS) {
      throw hoccl::Error(hocclInvalidArgument, fmt::format("unknown winFlags {:#x}", winFlags));
    }
    *win = static_cast<ncclWindow_t>(registerRange(comm, buff, size, true));
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommWindowRegister)

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guarded("ncclCommWindowDeregister", [&] {
    deregisterRange(comm, win, true);
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclCommWindowDeregister)

ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return guarded("ncclWinGetUserPtr", [&] {
    if (!outUserPtr) throw hoccl::Error(hocclInvalidArgument, "outUserPtr is NULL; pass the address of a void*");
    const WindowInfo w = windowInfo(win);
    if (w.comm != comm) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("window {} belongs to communicator {}, not to {}", static_cast<void*>(win),
                                     static_cast<void*>(w.comm), static_cast<void*>(comm)));
    }
    *outUserPtr = w.base;
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclWinGetUserPtr)

}  // extern "C"
