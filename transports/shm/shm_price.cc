/*
 * The shm shortcuts' prices (see shm_price.h). For p ranks on the host and a message of b bytes (the count's):
 *   small        hand-off + wait + p * (input bytes) / beta[self]  (every rank reads every payload once, straight
 *                from the peers' slots, as it combines them)
 *   single copy  2 (hand-off + wait) + crossing / copy rate + reduced / reduceRate + own / beta[self], where one
 *                rank's crossing, reduced and own bytes are: all-reduce 2(p-1)/p b and (p-1)/p b; reduce-scatter
 *                (p-1) b twice; all-gather and all-to-all (p-1) b crossing and b of its own (its block copied from
 *                input to output by the rank itself, on the same core: priced out of place whatever the call, so
 *                that every rank prices alike); broadcast b crossing (every receiver pulls the message); the copy rate
 *                is kernelCopy (ordinary buffers: process_vm_readv/writev) or mappedCopy (every rank registered: plain
 *                loads and stores over mappings). Over mappings nothing is pulled into a private buffer first: the
 *                reduction reads the peers' inputs where they lie, so an all-reduce's crossing is only its push,
 *                (p-1)/p b, and a reduce-scatter's nothing (shm_zero_copy.cc)
 * every parameter taken from model.crowded(p): p ranks on fewer cores take turns, so each rank's copies, reductions
 * and hand-offs take p / cores times longer, as the schedules' self and intra-host costs do (algo/predict.h).
 * The wait: a shortcut polls the arena with a Backoff and has nothing to block on, so under the Block policy (more
 * than 8 ranks per core, base/wait.cc) a waiting rank naps; one nap per round is the floor of what that costs
 * (docs/model.md: the small all-reduce on 8 ranks of 2 cores, when they still blocked, measured 110-150 us against
 * 28-36 us for the direct schedule).
 */
#include "transports/shm/shm_price.h"

#include "base/wait.h"
#include "kernels/cpu/reduce.h"

namespace hoccl::transport::shm {

double roundWaitSeconds(int nranks, const topo::LinkModel& model) {
  if (model.cores <= 0) return 0;
  HostLoad load;
  load.localRanks = nranks;
  load.cores = model.cores;
  load.hostCpus = model.cores;
  load.runnable = -1;
  if (chooseWaitPolicy(load) != WaitPolicy::Block) return 0;
  return Backoff(WaitPolicy::Block).blockMicros() * 1e-6;
}

double smallSeconds(const CollCall& call, int nranks, const topo::LinkModel& given) {
  const topo::LinkModel m = given.crowded(nranks);
  const double n = nranks;
  const double bytes = static_cast<double>(inputBytes(call, nranks));
  return m.handoff() + roundWaitSeconds(nranks, given) + n * bytes / m.beta[hocclLinkSelf];
}

double singleCopySeconds(const CollCall& call, int nranks, const topo::LinkModel& given, bool registered) {
  const topo::LinkModel m = given.crowded(nranks);
  const double n = nranks;
  const double bytes = static_cast<double>(call.count * kernels::typeSize(call.dtype));
  double crossing = 0, reduced = 0, own = 0;  // bytes one rank copies across processes, reduces, copies locally
  switch (call.coll) {
    case Coll::AllReduce:
      crossing = (registered ? 1 : 2) * (n - 1) / n * bytes;
      reduced = (n - 1) / n * bytes;
      break;
    case Coll::ReduceScatter:
      crossing = registered ? 0 : (n - 1) * bytes;
      reduced = (n - 1) * bytes;
      break;
    case Coll::AllGather:
    case Coll::AlltoAll:
      crossing = (n - 1) * bytes;
      own = bytes;
      break;
    default: crossing = bytes; break;  // broadcast: every receiver pulls the message
  }
  return 2 * (m.handoff() + roundWaitSeconds(nranks, given)) +
         crossing / (registered ? m.mappedCopy() : m.kernelCopy()) + reduced / m.reduceRate() +
         own / m.beta[hocclLinkSelf];
}

}  // namespace hoccl::transport::shm
