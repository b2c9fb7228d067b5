/// @file collective.h
/// The vocabulary every floor shares about a collective: which one it is, and its name for messages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoccl {

/// The collectives hoccl implements.
enum class Coll : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter };

/// Name of a collective ("AllReduce", ...).
inline const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
  }
  return "?";
}

/// How many blocks of `count` elements (count as the C API takes it) a rank's input and output buffers hold, with
/// `nranks` ranks: AllGather {1, n}, ReduceScatter {n, 1}, AlltoAll {n, n}, Gather {1, n}, Scatter {n, 1}, else {1, 1}.
struct BufferBlocks {
  size_t input;   ///< blocks of the input buffer
  size_t output;  ///< blocks of the output buffer
};
/// See BufferBlocks.
inline BufferBlocks bufferBlocks(Coll coll, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  switch (coll) {
    case Coll::AllGather: return {1, n};
    case Coll::ReduceScatter: return {n, 1};
    case Coll::AlltoAll: return {n, n};
    case Coll::Gather: return {1, n};
    case Coll::Scatter: return {n, 1};
    default: return {1, 1};
  }
}

/// True for the collectives with a root (broadcast, reduce, gather, scatter).
inline bool isRooted(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather || coll == Coll::Scatter;
}

}  // namespace hoccl
