/// @file cuda_device.h
/// The CUDA device: the device interface through the driver API loaded at run time (kernels/cuda/cuda_driver.h) and
/// the element-wise kernels of kernels/cuda/ in the libhoccl-cuda plugin, loaded on first launch. libhoccl itself
/// links neither libcuda nor the CUDA runtime. Compiled and linked on every build; it has not run on a GPU yet (the
/// build machines have none): docs/cuda.md.
#pragma once

#include <memory>

#include "kernels/device/device.h"

namespace hoccl::device {

/// CUDA device `ordinal`, or null when the driver is missing or reports no such device.
std::unique_ptr<Device> makeCudaDevice(int ordinal);

}  // namespace hoccl::device
