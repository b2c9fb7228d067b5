// One-sided puts and signals at the C edge (comm/one_sided.h): hocclCommWindowRegister/Deregister, hocclPutSignal,
// hocclSignal, hocclWaitSignal.
#include <fmt/format.h>

#include "api/guard.h"
#include "comm/communicator.h"
#include "comm/one_sided.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/device.h"

using hoccl::api::guarded;
using hoccl::api::liveComm;

namespace {

// Throws when p is device memory: the one-sided calls move host memory.
void requireHost(const char* what, const void* p) {
  if (p && hoccl::kernels::classify(p) == hoccl::kernels::MemoryKind::Device)
    hoccl::throwInvalidArgument(
        fmt::format("{} {} is device memory; hoccl's one-sided calls move host memory only "
                    "(allocate windows with hocclMemAlloc)",
                    what, p));
}

}  // namespace

extern "C" {

hocclResult_t hocclCommWindowRegister(hocclComm_t comm, void* buff, size_t size, hocclWindow_t* win) {
  return guarded("hocclCommWindowRegister", [&] {
    hoccl::Communicator& c = liveComm(comm);
    if (!win) hoccl::throwInvalidArgument("win is NULL; pass the address of a hocclWindow_t");
    *win = c.oneSided().registerWindow(buff, size);
    return hocclSuccess;
  });
}

hocclResult_t hocclCommWindowDeregister(hocclComm_t comm, hocclWindow_t win) {
  return guarded("hocclCommWindowDeregister", [&] {
    liveComm(comm, true).oneSided().deregisterWindow(win);
    return hocclSuccess;
  });
}

hocclResult_t hocclPutSignal(const void* localbuff, size_t count, hocclDataType_t datatype, int peer, hocclWindow_t win,
                             size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, hocclComm_t comm) {
  return guarded("hocclPutSignal", [&] {
    hoccl::Communicator& c = liveComm(comm);
    const size_t elem = hoccl::kernels::typeSize(datatype);
    if (elem == 0) hoccl::throwInvalidArgument(fmt::format("datatype {} is not a hoccl data type", int(datatype)));
    if (count > SIZE_MAX / elem) hoccl::throwInvalidArgument(fmt::format("count {} is too large", count));
    requireHost("localbuff", localbuff);
    c.oneSided().putSignal(localbuff, count * elem, peer, win, peerWinOffset, sigIdx, ctx, flags);
    return hocclSuccess;
  });
}

hocclResult_t hocclSignal(int peer, int sigIdx, int ctx, unsigned int flags, hocclComm_t comm) {
  return guarded("hocclSignal", [&] {
    liveComm(comm).oneSided().signal(peer, sigIdx, ctx, flags);
    return hocclSuccess;
  });
}

hocclResult_t hocclWaitSignal(int nDesc, const hocclWaitSignalDesc_t* descs, hocclComm_t comm) {
  return guarded("hocclWaitSignal", [&] {
    liveComm(comm).oneSided().wait(nDesc, descs);
    return hocclSuccess;
  });
}

}  // extern "C"
