#include "comm/redop.h"

#include <cstring>
#include <map>
#include <mutex>

#include "base/error.h"

namespace hoccl {
namespace {

struct Table {
  std::mutex mutex;
  std::map<int, PreMulSumOp> ops;
  int next = hocclNumOps;
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

hocclRedOp_t createPreMulSum(const PreMulSumOp& op) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  int id = t.next++;
  if (t.next == hocclMaxRedOp) t.next = hocclNumOps;
  t.ops[id] = op;
  return static_cast<hocclRedOp_t>(id);
}

void destroyPreMulSum(hocclRedOp_t op, const void* comm) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.ops.find(op);
  if (it == t.ops.end() || it->second.comm != comm)
    throwInvalidArgument("hocclRedOpDestroy: op " + std::to_string(op) +
                         " is not a live PreMulSum op of this communicator (built-in ops cannot be destroyed)");
  t.ops.erase(it);
}

std::optional<PreMulSumOp> findPreMulSum(hocclRedOp_t op) {
  if (op >= hocclSum && op < hocclNumOps) return std::nullopt;  // built-in: no lock on the hot path
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.ops.find(op);
  if (it == t.ops.end()) return std::nullopt;
  return it->second;
}

bool validOp(hocclRedOp_t op, hocclDataType_t dtype, const void* comm) {
  if (op >= hocclSum && op < hocclNumOps) return true;
  auto p = findPreMulSum(op);
  return p && p->comm == comm && p->dtype == dtype;
}

}  // namespace hoccl
