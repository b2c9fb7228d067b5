/// @file collective.h
/// The vocabulary every floor shares about a collective: which one it is, and its name for messages.
#pragma once

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

/// True for the collectives with a root (broadcast, reduce, gather, scatter).
inline bool isRooted(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather || coll == Coll::Scatter;
}

}  // namespace hoccl
