/// @file ucx_api.h
/// UCX, loaded at run time. libhoccl is compiled against UCX's headers (types and inline helpers) but never linked
/// with libucp or libucs, so it loads on hosts without UCX. The UCX functions the transport calls come from the plugin
/// libhoccl-ucx.so (transports/ucx/ucx_plugin.cc, linked with UCX by the build), which libhoccl opens the first time
/// a communicator needs a UCX channel (HOCCL_NET=ucx and a peer that shared memory does not reach). Opening the
/// plugin also loads UCX (libucp, libucs, libuct, libucm and its memory hooks); a process that never asks for UCX
/// never loads any of them.
///
/// Where the plugin is looked for, in order: HOCCL_UCX_PLUGIN when set (that path only); next to the library or
/// program that holds this code (dladdr: libhoccl.so, libnccl.so.2 of the shim, or a program linked with hoccl's
/// internals); then dlopen's own search (LD_LIBRARY_PATH, RUNPATH, the system's folders).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>

namespace hoccl::transport::ucx {

/// The version of the table below; the plugin refuses a caller built with another.
inline constexpr uint32_t kUcxApiVersion = 1;

/// The UCX functions the transport calls: the plain table the plugin fills (the same header on both sides).
struct UcxFunctions {
  decltype(&::ucp_config_read) config_read = nullptr;                        ///< ucp_config_read
  decltype(&::ucp_config_release) config_release = nullptr;                  ///< ucp_config_release
  decltype(&::ucp_init_version) init_version = nullptr;                      ///< what ucp_init() calls
  decltype(&::ucp_cleanup) cleanup = nullptr;                                ///< ucp_cleanup
  decltype(&::ucp_worker_create) worker_create = nullptr;                    ///< ucp_worker_create
  decltype(&::ucp_worker_destroy) worker_destroy = nullptr;                  ///< ucp_worker_destroy
  decltype(&::ucp_worker_get_efd) worker_get_efd = nullptr;                  ///< ucp_worker_get_efd
  decltype(&::ucp_worker_arm) worker_arm = nullptr;                          ///< ucp_worker_arm
  decltype(&::ucp_worker_progress) worker_progress = nullptr;                ///< ucp_worker_progress
  decltype(&::ucp_worker_get_address) worker_get_address = nullptr;          ///< ucp_worker_get_address
  decltype(&::ucp_worker_release_address) worker_release_address = nullptr;  ///< ucp_worker_release_address
  decltype(&::ucp_ep_create) ep_create = nullptr;                            ///< ucp_ep_create
  decltype(&::ucp_ep_close_nbx) ep_close_nbx = nullptr;                      ///< ucp_ep_close_nbx
  decltype(&::ucp_ep_flush_nbx) ep_flush_nbx = nullptr;                      ///< ucp_ep_flush_nbx
  decltype(&::ucp_ep_print_info) ep_print_info = nullptr;                    ///< ucp_ep_print_info
  decltype(&::ucp_tag_send_nbx) tag_send_nbx = nullptr;                      ///< ucp_tag_send_nbx
  decltype(&::ucp_tag_recv_nbx) tag_recv_nbx = nullptr;                      ///< ucp_tag_recv_nbx
  decltype(&::ucp_request_free) request_free = nullptr;                      ///< ucp_request_free
  decltype(&::ucp_request_cancel) request_cancel = nullptr;                  ///< ucp_request_cancel
  decltype(&::ucp_mem_map) mem_map = nullptr;                                ///< ucp_mem_map
  decltype(&::ucp_mem_unmap) mem_unmap = nullptr;                            ///< ucp_mem_unmap
  decltype(&::ucs_status_string) status_string = nullptr;                    ///< ucs_status_string
  ucs_log_level_t (*get_log_level)() = nullptr;                              ///< UCX's log level (ucs_global_opts)
  void (*set_log_level)(ucs_log_level_t) = nullptr;                          ///< sets UCX's log level
  void (*get_version)(unsigned* major, unsigned* minor, unsigned* release) = nullptr;  ///< ucp_get_version
};

/// The loaded table (members are null in a table that is not ok()).
struct UcxApi : UcxFunctions {
  /// ucp_init as ucp.h defines it (the inline wrapper that passes the header's version).
  ucs_status_t init(const ucp_params_t* params, const ucp_config_t* config, ucp_context_h* context) const {
    return init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context);
  }

  /// The process-wide table, loaded on first use (see the file comment for where the plugin is looked for).
  static const UcxApi& get();
  /// Loads a table from the plugin at `path` only (tests use it on paths that cannot load).
  static UcxApi load(const std::string& path);

  /// True when the plugin (and with it UCX) was loaded and every function was found.
  bool ok() const { return ok_; }
  /// Why the table is unusable, with what to install ("" when ok()).
  const std::string& why() const { return why_; }
  /// The plugin's path as loaded ("" when not loaded).
  const std::string& path() const { return path_; }

 private:
  bool ok_ = false;
  std::string why_;
  std::string path_;
};

/// The C entry point the plugin exports: fills `table` for a caller built with table version `version` and returns 0,
/// or returns -1 when the versions differ.
using UcxPluginEntry = int (*)(uint32_t version, UcxFunctions* table);
/// The entry point's name.
inline constexpr const char* kUcxPluginEntry = "hocclUcxPluginApi";
/// The plugin's file name.
inline constexpr const char* kUcxPluginName = "libhoccl-ucx.so";

}  // namespace hoccl::transport::ucx
