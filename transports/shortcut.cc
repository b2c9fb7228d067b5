// Descriptions and sizes of collective calls for the shortcuts (see shortcut.h).
#include "transports/shortcut.h"

#include <fmt/format.h>

namespace hoccl::transport {
namespace {

const char* builtinOpName(hocclRedOp_t op) {
  switch (op) {
    case hocclSum: return "sum";
    case hocclProd: return "prod";
    case hocclMax: return "max";
    case hocclMin: return "min";
    case hocclAvg: return "avg";
    default: return "premulsum";
  }
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

// How many blocks of `count` elements the input and output hold (the larger buffer of the gathering collectives).
size_t inputBlocks(Coll c, int n) {
  return (c == Coll::ReduceScatter || c == Coll::AlltoAll || c == Coll::Scatter) ? static_cast<size_t>(n) : 1;
}
size_t outputBlocks(Coll c, int n) {
  return (c == Coll::AllGather || c == Coll::AlltoAll || c == Coll::Gather) ? static_cast<size_t>(n) : 1;
}

}  // namespace

std::string describeCall(const CollCall& call) {
  return fmt::format("{}(count={}, {}{}{})", collName(call.coll), call.count, kernels::typeName(call.dtype),
                     reduces(call.coll) ? std::string(", ") + builtinOpName(call.op) : std::string(),
                     isRooted(call.coll) ? fmt::format(", root {}", call.root) : std::string());
}

size_t inputBytes(const CollCall& call, int nranks) {
  return call.count * kernels::typeSize(call.dtype) * inputBlocks(call.coll, nranks);
}

size_t outputBytes(const CollCall& call, int nranks) {
  return call.count * kernels::typeSize(call.dtype) * outputBlocks(call.coll, nranks);
}

}  // namespace hoccl::transport
