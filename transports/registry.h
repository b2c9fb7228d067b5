/// @file registry.h
/// The transports compiled into this build, in priority order (shm before tcp; tcp always last and always able).
#pragma once

#include <memory>
#include <vector>

#include "transports/transport.h"

namespace hoccl::transport {

/// Every available transport, highest priority first. HOCCL_SHM_DISABLE=1 leaves out shm.
std::vector<std::unique_ptr<Transport>> makeTransports();

}  // namespace hoccl::transport
