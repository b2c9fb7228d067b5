/// @file wire.h
/// Messages between a rank and its bootstrap root (internal to src/boot).
#pragma once

#include <cstdint>

namespace hoccl::boot {

/// First message of a rank after the hello: who it is.
struct JoinMessage {
  int32_t nranks;  ///< the size the rank was told
  int32_t rank;    ///< its rank
};

/// Header of every message from the root to a rank.
struct RootHeader {
  uint32_t type;      ///< kRootData or kRootError
  int32_t rank;       ///< for errors: the rank that failed or is missing (-1 = several / unknown)
  uint64_t bytes;     ///< payload bytes that follow (data, or the error text)
};
/// A payload follows.
constexpr uint32_t kRootData = 0;
/// An error text follows; the bootstrap is unusable afterwards.
constexpr uint32_t kRootError = 1;

}  // namespace hoccl::boot
