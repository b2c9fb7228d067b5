// The UCP context and worker of one communicator (see ucx_worker.h): creation, endpoints, progress, wakeup, staging.
#include "transports/ucx/ucx_worker.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::transport::ucx {
namespace {

/// UCX's endpoint error callback: marks the peer failed; its channel throws at the next progress.
void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<PeerEp*>(arg);
  if (p->error == UCS_OK) p->error = status;
}

void onFlushed(void*, ucs_status_t status, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->done = true;
}

/// Waits for UCX request `req` (from a *_nbx call) by progressing `worker` until `deadline`. Returns its status, or
/// UCS_ERR_TIMED_OUT (the request is then cancelled where possible and freed).
ucs_status_t waitRequest(const UcxApi& api, ucp_worker_h worker, void* req, const Op& op,
                         std::chrono::steady_clock::time_point deadline) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  while (!op.done && std::chrono::steady_clock::now() < deadline) {
    if (api.worker_progress(worker) == 0) std::this_thread::yield();
  }
  api.request_free(req);
  return op.done ? op.status : UCS_ERR_TIMED_OUT;
}

}  // namespace

std::string statusText(ucs_status_t status) {
  const UcxApi& api = UcxApi::get();
  return api.ok() ? fmt::format("UCX: {}", api.status_string(status)) : fmt::format("UCX status {}", int{status});
}

Worker::Worker(int rank, int nranks, size_t expectedPeers) : api_(UcxApi::get()), rank_(rank), peers_(nranks) {
  if (!api_.ok())
    throw Error(hocclSystemError, fmt::format("ucx: rank {} was asked for UCX (HOCCL_NET={}; NCCL_NET through the "
                                              "NCCL shim), but {}",
                                              rank, params::NET.get(), api_.why()));
  for (int r = 0; r < nranks; ++r) peers_[r].rank = r;
  ucp_config_t* config = nullptr;
  ucs_status_t st = api_.config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    throw Error(hocclSystemError, fmt::format("ucx: rank {} cannot read UCX's configuration ({}); check the UCX_* "
                                              "environment variables (ucx_info -c lists them)",
                                              rank, statusText(st)));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = std::max<size_t>(1, expectedPeers);
  params.name = "hoccl";
  st = api_.init(&params, config, &context_);
  api_.config_release(config);
  if (st != UCS_OK) {
    const char* tls = std::getenv("UCX_TLS");
    throw Error(hocclSystemError,
                fmt::format("ucx: rank {} cannot initialise UCX ({}) with UCX_TLS={}. Check that the transports "
                            "and devices named by UCX_TLS and UCX_NET_DEVICES exist here (ucx_info -d lists them)",
                            rank, statusText(st), tls ? tls : "(unset)"));
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = api_.worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    api_.cleanup(context_);
    throw Error(hocclSystemError, fmt::format("ucx: rank {} cannot create a UCX worker ({})", rank, statusText(st)));
  }
  if (api_.worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = api_.worker_get_address(worker_, &addr, &len);
  if (st != UCS_OK) {
    api_.worker_destroy(worker_);
    api_.cleanup(context_);
    throw Error(hocclSystemError,
                fmt::format("ucx: rank {} cannot get its UCX worker address ({})", rank, statusText(st)));
  }
  address_.assign(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr) + len);
  api_.worker_release_address(worker_, addr);
}

void Worker::connect(int peer, const std::vector<char>& peerAddress, const std::string& peerText) {
  PeerEp& p = peers_.at(peer);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_NAME;
  ep.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = onEndpointError;
  ep.err_handler.arg = &p;
  ep.name = "hoccl";
  ucs_status_t st = UCS_ERR_UNREACHABLE;
  if (peerErrorsWork_) {
    // UCX logs an ERROR when no transport has peer error handling; that is expected here (we retry without), so
    // its log is quiet for this one attempt.
    const ucs_log_level_t level = api_.get_log_level();
    api_.set_log_level(UCS_LOG_LEVEL_FATAL);
    st = api_.ep_create(worker_, &ep, &p.ep);
    api_.set_log_level(level);
    peerErrorsWork_ = st != UCS_ERR_UNREACHABLE;
  }
  p.errorHandling = st == UCS_OK;
  if (st == UCS_ERR_UNREACHABLE) {  // no transport with peer error handling (shared memory): without it
    ep.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    st = api_.ep_create(worker_, &ep, &p.ep);
    if (st == UCS_OK)
      HOCCL_INFO(kNet,
                 "ucx: rank {} -> {}: no UCX transport with peer error handling, endpoint made without (a dead "
                 "peer is then found by hoccl's failure detection)",
                 rank_, peerText);
  }
  if (st != UCS_OK) {
    p.ep = nullptr;
    const char* tls = std::getenv("UCX_TLS");
    throw Error(hocclSystemError,
                fmt::format("ucx: rank {} cannot create an endpoint to {} ({}). The two ranks may have no UCX "
                            "transport in common: give them the same UCX_TLS (here {}) and UCX_NET_DEVICES, or "
                            "choose another HOCCL_NET",
                            rank_, peerText, statusText(st), tls ? tls : "(unset)"));
  }
}

std::vector<std::pair<int, std::string>> Worker::flushAll(std::chrono::steady_clock::time_point deadline) {
  std::vector<std::pair<int, std::string>> failed;
  std::vector<std::pair<int, std::unique_ptr<Op>>> ops;
  for (PeerEp& p : peers_) {
    if (!p.ep) continue;
    auto op = std::make_unique<Op>();
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.send = onFlushed;
    rp.user_data = op.get();
    void* req = api_.ep_flush_nbx(p.ep, &rp);
    if (req == nullptr) continue;
    if (UCS_PTR_IS_ERR(req)) {
      failed.emplace_back(p.rank, statusText(UCS_PTR_STATUS(req)));
      continue;
    }
    op->request = req;
    ops.emplace_back(p.rank, std::move(op));
  }
  for (auto& [rank, op] : ops) {
    ucs_status_t st = waitRequest(api_, worker_, op->request, *op, deadline);
    if (st == UCS_ERR_TIMED_OUT) {
      failed.emplace_back(rank, "its wire-up did not complete in time");
      orphans_.push_back(std::move(op));  // UCX may still call back
    } else if (st != UCS_OK) {
      failed.emplace_back(rank, statusText(st));
    }
  }
  for (PeerEp& p : peers_)
    if (p.ep && p.error != UCS_OK) failed.emplace_back(p.rank, statusText(p.error));
  return failed;
}

bool Worker::progress() {
  bool any = false;
  while (api_.worker_progress(worker_) != 0) any = true;
  return any;
}

void Worker::markBusy(bool busy) {
  busyChannels_ += busy ? 1 : -1;
  if (busyChannels_ == 0) idleCv_.notify_one();
}

void Worker::startIdleProgress() {
  if (idleThread_.joinable()) return;
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  idleThread_ = std::thread([this] { idleLoop(); });
}

void Worker::idleLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    if (busyChannels_ > 0) {  // the caller's thread progresses the worker now
      idleCv_.wait(lk, [this] { return stopping_ || busyChannels_ == 0; });
      continue;
    }
    while (api_.worker_progress(worker_) != 0) {
    }
    const ucs_status_t st = efd_ >= 0 ? api_.worker_arm(worker_) : UCS_ERR_UNSUPPORTED;
    if (st == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress again
    lk.unlock();
    if (st == UCS_OK && wakeFd_ >= 0) {
      pollfd fds[2] = {{efd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
      poll(fds, 2, 1000);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // no wakeup support: nap
    }
    lk.lock();
  }
}

void Worker::stopIdleProgress() {
  if (!idleThread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  idleCv_.notify_one();
  const uint64_t one = 1;
  if (write(wakeFd_, &one, sizeof(one)) < 0) {
    // the eventfd cannot be full after one write; the thread's poll times out within a second anyway
  }
  idleThread_.join();
  close(wakeFd_);
  wakeFd_ = -1;
}

void Worker::waitForActivity(int timeoutMicros) {
  if (timeoutMicros <= 0) return;
  if (efd_ < 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(timeoutMicros, 50)));
    return;
  }
  ucs_status_t st;
  {
    std::lock_guard<std::mutex> g(mu_);
    st = api_.worker_arm(worker_);
  }
  if (st == UCS_ERR_BUSY) return;  // events are waiting: progress at once
  if (st != UCS_OK) {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(timeoutMicros, 50)));
    return;
  }
  pollfd fd{efd_, POLLIN, 0};
  timespec ts{timeoutMicros / 1000000, static_cast<long>(timeoutMicros % 1000000) * 1000};
  ppoll(&fd, 1, &ts, nullptr);
}

Staging* Worker::acquireStaging(size_t bytes) {
  Staging* best = nullptr;
  for (auto& s : staging_)
    if (!s->busy && s->bytes >= bytes && (!best || s->bytes < best->bytes)) best = s.get();
  if (!best) {
    auto s = std::make_unique<Staging>();
    s->bytes = std::max<size_t>(bytes, 4096);
    s->data.reset(new char[s->bytes]);
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = s->data.get();
    mp.length = s->bytes;
    if (api_.mem_map(context_, &mp, &s->memh) != UCS_OK) s->memh = nullptr;  // UCX then registers per operation
    best = s.get();
    staging_.push_back(std::move(s));
  }
  best->busy = true;
  return best;
}

void Worker::adoptOrphans(std::vector<std::unique_ptr<Op>> ops) {
  for (auto& op : ops) orphans_.push_back(std::move(op));
}

std::string Worker::describeEndpoint(int peer) const {
  const PeerEp& p = peers_.at(peer);
  if (!p.ep) return "not connected";
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return "?";
  api_.ep_print_info(p.ep, f);
  std::fclose(f);
  // Lines like "#                 lane[0]:  1:tcp/eth0.0 md[1]           ..." name each lane's transport/device.
  std::set<std::string> lanes;
  std::string all(text, size);
  std::free(text);
  size_t pos = 0;
  while ((pos = all.find("lane[", pos)) != std::string::npos) {
    size_t colon = all.find(':', all.find(']', pos));
    size_t start = all.find(':', colon + 1);
    if (colon == std::string::npos || start == std::string::npos) break;
    size_t end = all.find_first_of(" \n", start + 1);
    std::string tl = all.substr(start + 1, end - start - 1);
    if (!tl.empty()) lanes.insert(tl);
    pos = end;
  }
  std::string out;
  for (auto& l : lanes) out += (out.empty() ? "" : ", ") + l;
  return out.empty() ? "?" : out;
}

void Worker::closeEndpoints() {
  // Clean (every operation finished, no peer failed): close gracefully, flushing what is in flight, bounded. Else
  // (a failure, an abort, a timeout left operations behind): force, which completes what is outstanding with
  // UCS_ERR_CANCELED, so that nothing is left on an endpoint when the worker goes.
  bool unclean = !orphans_.empty();
  for (PeerEp& p : peers_) unclean = unclean || (p.ep && p.error != UCS_OK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(unclean ? 1 : 3);
  std::vector<std::pair<void*, std::unique_ptr<Op>>> closing;
  for (PeerEp& p : peers_) {
    if (!p.ep) continue;
    auto op = std::make_unique<Op>();
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.send = onFlushed;
    rp.user_data = op.get();
    if (unclean) {
      rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    void* req = api_.ep_close_nbx(p.ep, &rp);
    p.ep = nullptr;
    if (req && !UCS_PTR_IS_ERR(req)) closing.emplace_back(req, std::move(op));
  }
  for (auto& [req, op] : closing) {
    if (waitRequest(api_, worker_, req, *op, deadline) == UCS_ERR_TIMED_OUT) orphans_.push_back(std::move(op));
  }
}

Worker::~Worker() {
  stopIdleProgress();
  const bool unclean = !orphans_.empty();
  closeEndpoints();
  for (auto& s : staging_)
    if (s->memh) api_.mem_unmap(context_, s->memh);
  // After a failure UCX warns about messages nobody will receive any more; hoccl has reported the failure already.
  const ucs_log_level_t level = api_.get_log_level();
  if (unclean) api_.set_log_level(UCS_LOG_LEVEL_ERROR);
  api_.worker_destroy(worker_);
  api_.cleanup(context_);
  api_.set_log_level(level);
}

}  // namespace hoccl::transport::ucx
