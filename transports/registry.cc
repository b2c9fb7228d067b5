// The transports of this build, in priority order: shm (unless HOCCL_SHM_DISABLE=1), ibverbs (when built; it steps
// aside by itself without a usable RDMA port), then tcp, always last.
#include "transports/registry.h"

#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#if HOCCL_HAVE_IBVERBS
#include "transports/ibverbs/ibv_transport.h"
#endif
#include "base/params.h"

namespace hoccl::transport {

std::vector<std::unique_ptr<Transport>> makeTransports() {
  std::vector<std::unique_ptr<Transport>> list;
  if (params::SHM_DISABLE.get() == 0) list.push_back(std::make_unique<shm::ShmTransport>());
#if HOCCL_HAVE_IBVERBS
  list.push_back(std::make_unique<ibverbs::IbvTransport>());
#endif
  list.push_back(std::make_unique<tcp::TcpTransport>());
  return list;
}

}  // namespace hoccl::transport
