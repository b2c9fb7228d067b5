/// @file wc_error.h
/// What a failed work completion (enum ibv_wc_status) means for a person, as a hoccl::Error: the status's name and
/// meaning, the rank, the peer, the device and port, the operation, and what to try. Pure: no device needed.
#pragma once

#include <string>

#include "base/error.h"

namespace hoccl::transport::ibverbs {

/// Where a completion failed.
struct WcWhere {
  int rank = -1;          ///< this rank
  std::string peer;       ///< the peer, as transport::describePeer writes it
  std::string device;     ///< "mlx5_0:1"
  std::string operation;  ///< "RDMA write of chunk 12", "receive", ...
};

/// The status's enumerator name ("IBV_WC_RETRY_EXC_ERR"); "IBV_WC_<n>" for a value verbs.h does not define.
std::string wcStatusName(int status);
/// The error for a completion with `status` (never IBV_WC_SUCCESS: that is a hocclInternalError about the caller).
/// Codes: hocclRemoteError when the peer or the fabric failed (retries exhausted, remote errors, flushes after an
/// earlier error), hocclSystemError for a failed device, hocclInternalError for errors in hoccl's own requests
/// (local length, protection, access), all breaking the communicator.
Error wcError(int status, const WcWhere& where);

}  // namespace hoccl::transport::ibverbs
