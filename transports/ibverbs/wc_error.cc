// Mapping of ibv_wc_status to hoccl::Error (see wc_error.h).
#include "transports/ibverbs/wc_error.h"

#include <infiniband/verbs.h>

#include <fmt/format.h>

namespace hoccl::transport::ibverbs {
namespace {

struct StatusInfo {
  const char* name;
  hocclResult_t code;
  const char* meaning;
  const char* advice;
};

constexpr const char* kPeerAdvice =
    "the peer process probably exited or crashed (check its output), or the link between the hosts is down: check "
    "both ports with `ibv_devinfo` (state PORT_ACTIVE) and the fabric (ibstat, the switch); on RoCE also the GID "
    "(HOCCL_IB_GID_INDEX) and that both hosts' NICs are on the same network. Raise HOCCL_IB_TIMEOUT / "
    "HOCCL_IB_RETRY_CNT on a congested fabric";
constexpr const char* kLocalAdvice =
    "this is a bug in hoccl's use of the device (please report it with HOCCL_DEBUG=INFO output); meanwhile "
    "HOCCL_IB_DISABLE=1 makes the job use tcp";
constexpr const char* kDeviceAdvice =
    "the RDMA device failed: check `ibv_devinfo` and the kernel log (dmesg) on this host; HOCCL_IB_DISABLE=1 makes "
    "the job use tcp";

StatusInfo info(int status) {
  switch (status) {
    case IBV_WC_SUCCESS: return {"IBV_WC_SUCCESS", hocclInternalError, "success", kLocalAdvice};
    case IBV_WC_LOC_LEN_ERR: return {"IBV_WC_LOC_LEN_ERR", hocclInternalError, "local length error", kLocalAdvice};
    case IBV_WC_LOC_QP_OP_ERR:
      return {"IBV_WC_LOC_QP_OP_ERR", hocclInternalError, "local queue pair operation error", kLocalAdvice};
    case IBV_WC_LOC_EEC_OP_ERR:
      return {"IBV_WC_LOC_EEC_OP_ERR", hocclInternalError, "local EE context operation error", kLocalAdvice};
    case IBV_WC_LOC_PROT_ERR:
      return {"IBV_WC_LOC_PROT_ERR", hocclInternalError, "local protection error (memory not registered)",
              kLocalAdvice};
    case IBV_WC_WR_FLUSH_ERR:
      return {"IBV_WC_WR_FLUSH_ERR", hocclRemoteError,
              "work request flushed: the queue pair was already in error after an earlier failure", kPeerAdvice};
    case IBV_WC_MW_BIND_ERR:
      return {"IBV_WC_MW_BIND_ERR", hocclInternalError, "memory window bind error", kLocalAdvice};
    case IBV_WC_BAD_RESP_ERR:
      return {"IBV_WC_BAD_RESP_ERR", hocclRemoteError, "bad response from the peer", kPeerAdvice};
    case IBV_WC_LOC_ACCESS_ERR:
      return {"IBV_WC_LOC_ACCESS_ERR", hocclInternalError, "local access error", kLocalAdvice};
    case IBV_WC_REM_INV_REQ_ERR:
      return {"IBV_WC_REM_INV_REQ_ERR", hocclRemoteError, "the peer found the request invalid", kPeerAdvice};
    case IBV_WC_REM_ACCESS_ERR:
      return {"IBV_WC_REM_ACCESS_ERR", hocclRemoteError,
              "the peer refused access to its memory (its buffers were freed or its key is stale)", kPeerAdvice};
    case IBV_WC_REM_OP_ERR:
      return {"IBV_WC_REM_OP_ERR", hocclRemoteError, "the peer could not complete the operation", kPeerAdvice};
    case IBV_WC_RETRY_EXC_ERR:
      return {"IBV_WC_RETRY_EXC_ERR", hocclRemoteError, "transport retries exhausted: the peer did not acknowledge",
              kPeerAdvice};
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return {"IBV_WC_RNR_RETRY_EXC_ERR", hocclRemoteError,
              "receiver-not-ready retries exhausted: the peer had no receive posted", kPeerAdvice};
    case IBV_WC_LOC_RDD_VIOL_ERR:
      return {"IBV_WC_LOC_RDD_VIOL_ERR", hocclInternalError, "local RDD violation", kLocalAdvice};
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return {"IBV_WC_REM_INV_RD_REQ_ERR", hocclRemoteError, "the peer found the read request invalid", kPeerAdvice};
    case IBV_WC_REM_ABORT_ERR:
      return {"IBV_WC_REM_ABORT_ERR", hocclRemoteError, "the peer aborted the operation", kPeerAdvice};
    case IBV_WC_INV_EECN_ERR:
      return {"IBV_WC_INV_EECN_ERR", hocclInternalError, "invalid EE context number", kLocalAdvice};
    case IBV_WC_INV_EEC_STATE_ERR:
      return {"IBV_WC_INV_EEC_STATE_ERR", hocclInternalError, "invalid EE context state", kLocalAdvice};
    case IBV_WC_FATAL_ERR: return {"IBV_WC_FATAL_ERR", hocclSystemError, "fatal device error", kDeviceAdvice};
    case IBV_WC_RESP_TIMEOUT_ERR: return {"IBV_WC_RESP_TIMEOUT_ERR", hocclRemoteError, "response timeout", kPeerAdvice};
    case IBV_WC_GENERAL_ERR: return {"IBV_WC_GENERAL_ERR", hocclSystemError, "general device error", kDeviceAdvice};
    case IBV_WC_TM_ERR: return {"IBV_WC_TM_ERR", hocclInternalError, "tag matching error", kLocalAdvice};
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return {"IBV_WC_TM_RNDV_INCOMPLETE", hocclInternalError, "tag matching rendezvous incomplete", kLocalAdvice};
    default: return {nullptr, hocclSystemError, "a status this build does not know", kDeviceAdvice};
  }
}

}  // namespace

std::string wcStatusName(int status) {
  const StatusInfo i = info(status);
  return i.name ? i.name : fmt::format("IBV_WC_{}", status);
}

Error wcError(int status, const WcWhere& w) {
  const StatusInfo i = info(status);
  if (status == IBV_WC_SUCCESS)
    return Error(hocclInternalError,
                 fmt::format("ibverbs: rank {}: a successful completion was treated as a failure ({} with {})", w.rank,
                             w.operation, w.peer));
  return Error(i.code,
               fmt::format("ibverbs: rank {}: {} with {} failed on device {}: {} ({}, status {}). Try: {}", w.rank,
                           w.operation, w.peer, w.device, i.meaning, wcStatusName(status), status, i.advice));
}

}  // namespace hoccl::transport::ibverbs
