// Sends of data written the step before (see fresh_data.h).
#include "sched/fresh_data.h"

namespace hoccl::sched {

bool sendsFreshData(const Step* previous, const Prim& send) {
  if (!previous || send.kind != PrimKind::Send) return false;
  for (const Prim& p : previous->prims) {
    const bool writes = p.kind == PrimKind::Recv || p.kind == PrimKind::RecvReduce || p.kind == PrimKind::Copy ||
                        p.kind == PrimKind::Reduce;
    if (writes && p.dst == send.src && p.dstOff <= send.srcOff && send.srcOff + send.count <= p.dstOff + p.count)
      return true;
  }
  return false;
}

}  // namespace hoccl::sched
