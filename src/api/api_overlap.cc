// The overlapped collectives and the ring shift at the C edge (include/hoccl/hoccl.h, "Communication hidden behind
// compute"): validate everything, then run (comm/overlap.h). Nothing is sent when an argument is bad. Host memory
// only for now: device buffers are refused with a message saying so.
#include <limits>

#include <fmt/format.h>

#include "api/guard.h"
#include "comm/group.h"
#include "comm/overlap.h"
#include "comm/proxy.h"
#include "comm/redop.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/device.h"
#include "kernels/memory.h"

using namespace hoccl;
using hoccl::api::guarded;
using hoccl::api::liveComm;

namespace {

// The checks every call here shares: live communicator with no earlier stream-ordered failure, no open group, a
// valid type, a stream that can be one, a count that fits, non-null buffers when count > 0, host memory.
Communicator& common(const char* fn, hocclComm_t comm, hocclDataType_t dt, hocclStream_t stream, size_t count,
                     size_t blocks, const void* sendbuf, const void* recvbuf) {
  Communicator& c = liveComm(comm);
  if (Proxy* p = c.proxyIfAny()) p->throwIfFailed();
  if (groupDepth() > 0)
    throwInvalidUsage(
        fmt::format("{}: {} cannot be part of a group (it calls back or runs in the background); "
                    "call it outside hocclGroupStart/hocclGroupEnd",
                    c.describe(), fn));
  if (static_cast<int>(dt) < 0 || dt >= hocclNumTypes)
    throwInvalidArgument(
        fmt::format("datatype {} is not a valid hocclDataType_t (0..{})", static_cast<int>(dt), hocclNumTypes - 1));
  if (stream && !device::current() && !cuda::driverLoaded())
    throwInvalidArgument(
        fmt::format("stream {} cannot be a stream: this process has no device and no CUDA driver; "
                    "pass NULL",
                    static_cast<void*>(stream)));
  const size_t elem = kernels::typeSize(dt);
  if (count > std::numeric_limits<size_t>::max() / 4 / elem / blocks)
    throwInvalidArgument(
        fmt::format("count {} of {} x {} overflows the addressable size", count, kernels::typeName(dt), blocks));
  if (count > 0 && !sendbuf) throwInvalidArgument(fmt::format("sendbuff is NULL with count {}", count));
  if (count > 0 && !recvbuf) throwInvalidArgument(fmt::format("recvbuff is NULL with count {}", count));
  for (const void* p : {sendbuf, recvbuf})
    if (p && kernels::classify(p) == kernels::MemoryKind::Device)
      throwInvalidArgument(
          fmt::format("{}: buffer {} is device memory; {} takes host memory only for now (the "
                      "device version follows the device issue): pass host buffers",
                      c.describe(), p, fn));
  return c;
}

}  // namespace

extern "C" {

hocclResult_t hocclAllGatherOverlap(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                                    hocclComm_t comm, hocclStream_t stream, hocclBlockCallback_t onBlock, void* user) {
  return guarded("hocclAllGatherOverlap", [&] {
    Communicator& c = common("hocclAllGatherOverlap", comm, datatype, stream, sendcount, liveComm(comm).nranks(),
                             sendbuff, recvbuff);
    if (!onBlock) throwInvalidArgument("onBlock is NULL: pass the callback that consumes each block");
    overlap::allGather(c, sendbuff, recvbuff, sendcount, datatype, onBlock, user);
    return hocclSuccess;
  });
}

hocclResult_t hocclReduceScatterOverlap(void* sendbuff, void* recvbuff, size_t recvcount, hocclDataType_t datatype,
                                        hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream,
                                        hocclProduceCallback_t produce, void* user) {
  return guarded("hocclReduceScatterOverlap", [&] {
    Communicator& c = common("hocclReduceScatterOverlap", comm, datatype, stream, recvcount, liveComm(comm).nranks(),
                             sendbuff, recvbuff);
    if (!produce) throwInvalidArgument("produce is NULL: pass the callback that writes each block");
    if (!validOp(op, datatype, &c))
      throwInvalidArgument(
          fmt::format("op {} is not valid here: use hocclSum/Prod/Max/Min/Avg or a PreMulSum op "
                      "created on this communicator for datatype {}",
                      static_cast<int>(op), kernels::typeName(datatype)));
    overlap::reduceScatter(c, sendbuff, recvbuff, recvcount, datatype, op, produce, user);
    return hocclSuccess;
  });
}

namespace {

// Ring shift arguments: besides the common checks, buffers either equal or apart.
Communicator& ringShiftChecks(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                              hocclDataType_t datatype, hocclComm_t comm, hocclStream_t stream) {
  Communicator& c = common(fn, comm, datatype, stream, count, 1, sendbuff, recvbuff);
  const size_t bytes = count * kernels::typeSize(datatype);
  const char* s = static_cast<const char*>(sendbuff);
  const char* r = static_cast<const char*>(recvbuff);
  if (bytes && s != r && s < r + bytes && r < s + bytes)
    throwInvalidArgument(
        fmt::format("sendbuff {} and recvbuff {} overlap by part ({} bytes each): pass the same "
                    "buffer (in place) or two separate ones",
                    sendbuff, static_cast<void*>(recvbuff), bytes));
  return c;
}

}  // namespace

hocclResult_t hocclRingShift(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int k,
                             hocclComm_t comm, hocclStream_t stream) {
  return guarded("hocclRingShift", [&] {
    Communicator& c = ringShiftChecks("hocclRingShift", sendbuff, recvbuff, count, datatype, comm, stream);
    overlap::ringShift(c, sendbuff, recvbuff, count, datatype, k);
    return hocclSuccess;
  });
}

hocclResult_t hocclRingShiftStart(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int k,
                                  hocclComm_t comm, hocclStream_t stream, hocclRequest_t* request) {
  if (request) *request = nullptr;
  return guarded("hocclRingShiftStart", [&] {
    if (!request) throwInvalidArgument("request is NULL: pass where to store the request for hocclWait");
    Communicator& c = ringShiftChecks("hocclRingShiftStart", sendbuff, recvbuff, count, datatype, comm, stream);
    *request = overlap::ringShiftStart(c, sendbuff, recvbuff, count, datatype, k);
    return hocclSuccess;
  });
}

hocclResult_t hocclTest(hocclRequest_t request, int* done) {
  return guarded("hocclTest", [&] {
    if (!request) throwInvalidArgument("request is NULL");
    if (!done) throwInvalidArgument("done is NULL");
    *done = request->done.load(std::memory_order_acquire) ? 1 : 0;
    return hocclSuccess;
  });
}

hocclResult_t hocclWait(hocclRequest_t request) {
  return guarded("hocclWait", [&] {
    if (!request) throwInvalidArgument("request is NULL");
    overlap::finish(request);
    return hocclSuccess;
  });
}

}  // extern "C"
