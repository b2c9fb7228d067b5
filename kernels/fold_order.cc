// Folding the ranks' inputs in a given order (see fold_order.h).
#include "kernels/fold_order.h"

namespace hoccl::kernels {

std::vector<std::vector<int>> FoldOrder::ringOrders(const std::vector<int>& ring) {
  const size_t n = ring.size();
  std::vector<std::vector<int>> orders(n);
  for (size_t j = 0; j < n; ++j)
    for (size_t t = 1; t <= n; ++t) orders[j].push_back(ring[(j + t) % n]);
  return orders;
}

void foldInto(const MemoryOps& mem, void* out, const std::vector<const void*>& sources, const std::vector<int>& order,
              size_t n, hocclDataType_t dt, BinOp op) {
  const size_t bytes = n * typeSize(dt);
  if (n == 0) return;
  if (order.size() == 1) {
    if (out != sources[order[0]]) mem.copy(out, sources[order[0]], bytes);
    return;
  }
  // A source read after the first step must not be the output, which that step overwrites.
  bool throughBuffer = false;
  for (size_t k = 2; k < order.size(); ++k) throughBuffer |= sources[order[k]] == out;
  thread_local std::vector<char> buffer;
  void* acc = out;
  if (throughBuffer) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    acc = buffer.data();
  }
  mem.reduce(acc, sources[order[0]], sources[order[1]], n, dt, op);
  for (size_t k = 2; k < order.size(); ++k) mem.reduce(acc, acc, sources[order[k]], n, dt, op);
  if (throughBuffer) mem.copy(out, acc, bytes);
}

}  // namespace hoccl::kernels
