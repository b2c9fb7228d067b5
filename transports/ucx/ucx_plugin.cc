// libhoccl-ucx.so: the UCX plugin (see ucx_api.h). The only code of hoccl linked with UCX; it holds no state of its
// own and nothing of hoccl's internals, only the table of UCX's functions that libhoccl asks for by name
// (hocclUcxPluginApi). Built with hidden visibility: the entry point is its one exported symbol.
#include <ucs/config/global_opts.h>

#include "transports/ucx/ucx_api.h"

namespace {

ucs_log_level_t getLogLevel() { return ucs_global_opts.log_component.log_level; }
void setLogLevel(ucs_log_level_t level) { ucs_global_opts.log_component.log_level = level; }

}  // namespace

/// Fills `table` with UCX's functions for a caller built with table version `version`; -1 when the versions differ.
extern "C" __attribute__((visibility("default"))) int hocclUcxPluginApi(uint32_t version,
                                                                        hoccl::transport::ucx::UcxFunctions* table) {
  if (version != hoccl::transport::ucx::kUcxApiVersion || table == nullptr) return -1;
  hoccl::transport::ucx::UcxFunctions& t = *table;
  t.config_read = &ucp_config_read;
  t.config_release = &ucp_config_release;
  t.init_version = &ucp_init_version;
  t.cleanup = &ucp_cleanup;
  t.worker_create = &ucp_worker_create;
  t.worker_destroy = &ucp_worker_destroy;
  t.worker_get_efd = &ucp_worker_get_efd;
  t.worker_arm = &ucp_worker_arm;
  t.worker_progress = &ucp_worker_progress;
  t.worker_get_address = &ucp_worker_get_address;
  t.worker_release_address = &ucp_worker_release_address;
  t.ep_create = &ucp_ep_create;
  t.ep_close_nbx = &ucp_ep_close_nbx;
  t.ep_flush_nbx = &ucp_ep_flush_nbx;
  t.ep_print_info = &ucp_ep_print_info;
  t.tag_send_nbx = &ucp_tag_send_nbx;
  t.tag_recv_nbx = &ucp_tag_recv_nbx;
  t.request_free = &ucp_request_free;
  t.request_cancel = &ucp_request_cancel;
  t.mem_map = &ucp_mem_map;
  t.mem_unmap = &ucp_mem_unmap;
  t.status_string = &ucs_status_string;
  t.get_log_level = &getLogLevel;
  t.set_log_level = &setLogLevel;
  t.get_version = &ucp_get_version;
  return 0;
}
