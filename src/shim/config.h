/// @file config.h
/// Reading a caller's ncclConfig_t the way NCCL does: by its size and version, so that programs built against an
/// older nccl.h (a smaller struct, fewer fields) keep working.
#pragma once

#include "hoccl/hoccl.h"
#ifndef NCCL_H_  // NVIDIA's nccl.h (which tests/abi include instead) declares the same ncclConfig_t
#include "shim/nccl_abi.h"
#endif

namespace hoccl::shim {

/// Reads a caller's config into a complete ncclConfig_t of the current (2.32) layout, by the rules below.
ncclConfig_t readConfig(const void* user);

/// Translates a caller's config into a complete hocclConfig_t of the current layout.
/// Copies min(user->size, sizeof(ncclConfig_t)) bytes and never reads further; fields the caller's version did not
/// have yet are reset to "undefined" (as NCCL does); a wrong magic, a size too small to hold the header, or a
/// blocking value other than 0, 1 or undefined is an Error(hocclInvalidArgument) whose text says what to fix.
/// A null user gives the default config. `user` points to an ncclConfig_t of any version (void so that tests can
/// pass one built with NVIDIA's own header).
/// The fields of 2.28 are carried over (hoccl acts on `blocking` and `commName` only: `netName`, the GPU launch fields
/// and the other tuning fields are accepted and ignored); the fields added since (graph, RMA, CFT and NVLS modes) are
/// GPU settings that hoccl has no use for, and are read and dropped.
hocclConfig_t translateConfig(const void* user);

}  // namespace hoccl::shim
