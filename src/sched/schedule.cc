#include "sched/schedule.h"

namespace hoccl::sched {

BufferCounts bufferCounts(const CollArgs& a) {
  const BufferBlocks blocks = bufferBlocks(a.coll, a.nranks);
  return {a.count * blocks.input, a.count * blocks.output};
}

}  // namespace hoccl::sched
