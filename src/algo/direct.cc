/*
 * Direct algorithms: every rank talks to every peer it exchanges data with, all at once, in a single step.
 *
 * All-to-all: rank r sends block j of its input to rank j and receives rank j's block r into block j of its
 * output; the own block is a local copy. The peers are visited starting at r+1 so that, on a real network, the
 * ranks do not all send to the same peer first.
 * Gather: every rank sends its input to the root, which receives block j from rank j (and copies its own).
 * Scatter: the root sends block j of its input to rank j (and copies its own); the others receive.
 * For all-to-all in place (input == output) the sends must read before the receives overwrite: the step does both
 * at once, so an in-place call stages the input in scratch first.
 */
#include "algo/direct.h"

namespace hoccl::algo {

using namespace sched;

Schedule directSchedule(const CollArgs& a, const topo::Topology&) {
  Schedule s;
  s.algorithm = "direct";
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  Step st;
  switch (a.coll) {
    case Coll::AlltoAll: {
      // Stage the input in scratch so that in-place calls are safe (the copy is skipped for n == 1).
      if (n > 1 && a.inPlace) {
        s.scratchCount = c * n;
        s.steps.push_back(Step{{copy(kInput, 0, kScratch, 0, c * n)}});
      }
      uint16_t src = (n > 1 && a.inPlace) ? kScratch : kInput;
      st.prims.push_back(copy(src, r * c, kOutput, r * c, c));
      for (int k = 1; k < n; ++k) {
        int peer = (r + k) % n;
        st.prims.push_back(send(peer, src, peer * c, c));
      }
      for (int k = 1; k < n; ++k) {
        int peer = (r - k + n) % n;
        st.prims.push_back(recv(peer, kOutput, peer * c, c));
      }
      break;
    }
    case Coll::Gather:
      if (r == a.root) {
        st.prims.push_back(copy(kInput, 0, kOutput, r * c, c));
        for (int k = 1; k < n; ++k) {
          int peer = (r + k) % n;
          st.prims.push_back(recv(peer, kOutput, peer * c, c));
        }
      } else {
        st.prims.push_back(send(a.root, kInput, 0, c));
      }
      break;
    case Coll::Scatter:
      if (r == a.root) {
        st.prims.push_back(copy(kInput, r * c, kOutput, 0, c));
        for (int k = 1; k < n; ++k) {
          int peer = (r + k) % n;
          st.prims.push_back(send(peer, kInput, peer * c, c));
        }
      } else {
        st.prims.push_back(recv(a.root, kOutput, 0, c));
      }
      break;
    default:
      break;
  }
  s.steps.push_back(std::move(st));
  return s;
}

}  // namespace hoccl::algo
