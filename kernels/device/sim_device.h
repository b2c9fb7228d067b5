/// @file sim_device.h
/// The simulated device (HOCCL_DEVICE=sim): the device interface on the CPU, for running the device path where no
/// GPU exists. Device memory is memfd-backed shared mappings registered as device allocations (so IPC handles are the
/// owner's pid and fd, mapped by a peer through /proc), streams are worker threads draining ordered queues, events
/// are sequence marks on those queues, and kernels are the CPU emulation of kernels/device/sim_kernels.h. The host can
/// read this "device memory" (a GPU's host could not); hoccl's core never relies on that except where docs/cuda.md
/// says so.
#pragma once

#include <memory>

#include "kernels/device/device.h"

namespace hoccl::device {

/// Makes the simulated device (one per process).
std::unique_ptr<Device> makeSimDevice();

}  // namespace hoccl::device
