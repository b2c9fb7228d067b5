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

uint64_t callShape(const CollCall& call) {
  const bool reducing = call.coll == Coll::AllReduce || call.coll == Coll::Reduce || call.coll == Coll::ReduceScatter;
  const uint8_t op = !reducing ? uint8_t{0xff} : call.op < hocclNumOps ? static_cast<uint8_t>(call.op) : uint8_t{0xfe};
  const bool device = !kernels::isHostKind(call.sendKind) || !kernels::isHostKind(call.recvKind);
  const int32_t root = isRooted(call.coll) ? call.root : 0;
  return uint64_t{static_cast<uint8_t>(call.coll)} | uint64_t{static_cast<uint8_t>(call.dtype)} << 8 |
         uint64_t{op} << 16 | (device ? kShapeDeviceBit : 0) | uint64_t{static_cast<uint32_t>(root)} << 32;
}

CollCall callOfShape(uint64_t shape, uint64_t count) {
  CollCall c;
  c.count = count;
  c.coll = static_cast<Coll>(shape & 0xff);
  c.dtype = static_cast<hocclDataType_t>((shape >> 8) & 0xff);
  c.op = static_cast<hocclRedOp_t>((shape >> 16) & 0xff);
  c.sendKind = c.recvKind = (shape & kShapeDeviceBit) ? kernels::MemoryKind::Device : kernels::MemoryKind::Host;
  c.root = static_cast<int32_t>(static_cast<uint32_t>(shape >> 32));
  return c;
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
