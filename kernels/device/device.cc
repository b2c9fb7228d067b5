// Which device this process uses (device.h): HOCCL_DEVICE=sim, cuda (the default when a GPU is found: the device
// current on the thread that first needs one, else device 0) or none.
#include "kernels/device/device.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/cuda_device.h"
#include "kernels/device/sim_device.h"

namespace hoccl::device {

Device* current() {
  // Chosen once and never destroyed: stream threads may still run while the process exits.
  static Device* const chosen = []() -> Device* {
    const std::string want = params::DEVICE.get();
    std::unique_ptr<Device> d;
    if (want == "sim") {
      d = makeSimDevice();
    } else if (want.empty() || want == "cuda") {
      // As NCCL: the device current on the calling thread (cudaSetDevice, torch.cuda.set_device) when hoccl first
      // needs one, else device 0. One device per process (docs/cuda.md).
      const int ordinal = cuda::currentContextDevice();
      d = makeCudaDevice(ordinal < 0 ? 0 : ordinal);
      if (!d && want == "cuda") HOCCL_WARN(kInit, "HOCCL_DEVICE=cuda but no CUDA device was found: host memory only");
    } else if (want != "none") {
      HOCCL_WARN(kInit, "HOCCL_DEVICE={} is not sim, cuda or none: no device is used", want);
    }
    if (d) HOCCL_INFO(kInit, "device: {}", d->name());
    return d.release();
  }();
  return chosen;
}

Device& require(const char* what) {
  Device* d = current();
  if (!d)
    throwInvalidArgument(
        fmt::format("{}: there is no device in this process (no CUDA driver or GPU found; "
                    "HOCCL_DEVICE=sim selects the simulated device for tests)",
                    what));
  return *d;
}

void refuseCapture(Stream stream) {
  if (!cuda::driverLoaded() || !cuda::streamCapturing(stream)) return;
  throw Error(
      hocclInvalidUsage,
      fmt::format("stream {} is being captured into a CUDA graph: hoccl's calls cannot be captured (a replay of "
                  "the graph would communicate nothing), so nothing was enqueued; make the call outside the "
                  "capture (PyTorch: keep collectives out of torch.cuda.graph)",
                  stream));
}

}  // namespace hoccl::device
