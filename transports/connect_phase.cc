// agreeOnPhase (see transport_util.h): every rank learns whether any rank failed a connect phase.
#include <cstring>
#include <vector>

#include "transports/transport.h"
#include "transports/transport_util.h"

namespace hoccl::transport {
namespace {

/// What each rank tells the others after a connect phase.
struct PhaseStatus {
  int32_t failed = 0;
  int32_t code = 0;
  char message[504] = {};
};

}  // namespace

void agreeOnPhase(const ConnectContext& ctx, const std::string& phase, const Error* mine) {
  std::vector<PhaseStatus> all(ctx.nranks);
  PhaseStatus& me = all[ctx.rank];
  if (mine) {
    me.failed = 1;
    me.code = mine->code();
    std::strncpy(me.message, mine->what(), sizeof(me.message) - 1);
  }
  ctx.bootstrap->allGather(all.data(), sizeof(PhaseStatus));
  if (mine) throw *mine;
  for (int r = 0; r < ctx.nranks; ++r) {
    if (!all[r].failed) continue;
    all[r].message[sizeof(all[r].message) - 1] = 0;
    throwRemoteError(
        fmt::format("rank {} failed while {} (so rank {} stops too): {}", r, phase, ctx.rank, all[r].message));
  }
}

}  // namespace hoccl::transport
