#include "sched/schedule.h"

namespace hoccl::sched {

BufferCounts bufferCounts(const CollArgs& a) {
  const size_t n = static_cast<size_t>(a.nranks);
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce: return {a.count, a.count};
    case Coll::AllGather: return {a.count, a.count * n};
    case Coll::ReduceScatter: return {a.count * n, a.count};
    case Coll::AlltoAll: return {a.count * n, a.count * n};
    case Coll::Gather: return {a.count, a.count * n};
    case Coll::Scatter: return {a.count * n, a.count};
  }
  return {0, 0};
}

}  // namespace hoccl::sched
