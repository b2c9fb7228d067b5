// Descriptions and sizes of collective calls for the shortcuts (see shortcut.h).
#include "transports/shortcut.h"

#include <fmt/format.h>

#include "base/error.h"

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

}  // namespace

std::unique_ptr<ShortcutOp> Shortcut::startIfRegistered(const CollCall& call) {
  throwInternalError(fmt::format("shortcut {} has no path for registered buffers, yet {} was started on one", name(),
                                 describeCall(call)));
}

std::string describeCall(const CollCall& call) {
  return fmt::format("{}(count={}, {}{}{})", collName(call.coll), call.count, kernels::typeName(call.dtype),
                     reduces(call.coll) ? std::string(", ") + builtinOpName(call.op) : std::string(),
                     isRooted(call.coll) ? fmt::format(", root {}", call.root) : std::string());
}

size_t inputBytes(const CollCall& call, int nranks) {
  return call.count * kernels::typeSize(call.dtype) * bufferBlocks(call.coll, nranks).input;
}

size_t outputBytes(const CollCall& call, int nranks) {
  return call.count * kernels::typeSize(call.dtype) * bufferBlocks(call.coll, nranks).output;
}

}  // namespace hoccl::transport
