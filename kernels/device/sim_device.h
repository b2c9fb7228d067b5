/// @file sim_device.h
/// The simulated device (HOCCL_DEVICE=sim): the device interface on the CPU, for running the device path where no
/// GPU exists. Device memory is memfd-backed shared mappings registered as device allocations (so IPC handles are the
/// owner's pid and fd, mapped by a peer through /proc), streams are worker threads draining ordered queues, events
/// are sequence marks on those queues, and kernels are the CPU emulation of kernels/device/sim_kernels.h. By default
/// (HOCCL_SIM_HOST_ACCESS=0) the host cannot touch this "device memory", as with a GPU: the address it gets is mapped
/// without access, and only the device's copies and kernels reach the memory (through a second, private mapping).
#pragma once

#include <memory>

#include "kernels/device/device.h"

namespace hoccl::device {

/// Makes the simulated device (one per process).
std::unique_ptr<Device> makeSimDevice();

}  // namespace hoccl::device
