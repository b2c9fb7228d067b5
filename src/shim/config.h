/// @file config.h
/// Reading a caller's ncclConfig_t the way NCCL does: by its size and version, so that programs built against an
/// older nccl.h (a smaller struct, fewer fields) keep working.
#pragma once

#include "hoccl/hoccl.h"

namespace hoccl::shim {

/// Translates a caller's config into a complete hocclConfig_t of the current layout.
/// Copies min(user->size, sizeof(ncclConfig_t)) bytes and never reads further; fields the caller's version did not
/// have yet are reset to "undefined" (as NCCL does); a wrong magic, a size too small to hold the header, or a
/// blocking value other than 0, 1 or undefined is an Error(hocclInvalidArgument) whose text says what to fix.
/// A null user gives the default config. `user` points to an ncclConfig_t of any version (void so that tests can
/// pass one built with NVIDIA's own header).
/// Every field is carried over, but hoccl acts on `blocking` and `commName` only: `netName` (tcp is the only
/// inter-host transport), the GPU launch fields and the other tuning fields are accepted and ignored.
hocclConfig_t translateConfig(const void* user);

}  // namespace hoccl::shim
