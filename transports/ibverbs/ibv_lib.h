/// @file ibv_lib.h
/// libibverbs, loaded at run time: hoccl is compiled against the rdma-core headers but never linked with
/// libibverbs, so the same libhoccl.so runs on hosts without rdma-core. IbvLib::get() dlopens "libibverbs.so.1"
/// once per process and resolves the functions below; when the library or a function is missing, `ok()` is false
/// and `why()` says what is missing.
///
/// Only exported functions go through the table. The data-path calls of verbs.h (ibv_post_send, ibv_post_recv,
/// ibv_poll_cq) are static inline functions that jump through the context's provider ops table
/// (qp->context->ops.post_send, ...): they reference no libibverbs symbol, so they are called as the header defines
/// them. ibv_query_port and ibv_reg_mr are macros in the header that wrap inline helpers around the exported
/// function; IbvLib::queryPort reproduces the port query's helper (the extended context's query_port when the
/// provider has it, else the exported compatibility entry point).
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace hoccl::transport::ibverbs {

/// The table of libibverbs functions hoccl calls; members are null until load() succeeded.
struct IbvLib {
  // The parentheses keep the header's function-like macros of the same names from expanding.
  decltype(&(::ibv_get_device_list)) get_device_list = nullptr;  ///< ibv_get_device_list
  decltype(&::ibv_free_device_list) free_device_list = nullptr;  ///< ibv_free_device_list
  decltype(&::ibv_get_device_name) get_device_name = nullptr;    ///< ibv_get_device_name
  decltype(&::ibv_open_device) open_device = nullptr;            ///< ibv_open_device
  decltype(&::ibv_close_device) close_device = nullptr;          ///< ibv_close_device
  decltype(&::ibv_query_device) query_device = nullptr;          ///< ibv_query_device
  decltype(&(::ibv_query_port)) query_port_compat = nullptr;     ///< the exported ibv_query_port (compat layout)
  decltype(&::ibv_query_gid) query_gid = nullptr;                ///< ibv_query_gid
  decltype(&::ibv_alloc_pd) alloc_pd = nullptr;                  ///< ibv_alloc_pd
  decltype(&::ibv_dealloc_pd) dealloc_pd = nullptr;              ///< ibv_dealloc_pd
  decltype(&(::ibv_reg_mr)) reg_mr = nullptr;                    ///< ibv_reg_mr (the exported function)
  decltype(&::ibv_dereg_mr) dereg_mr = nullptr;                  ///< ibv_dereg_mr
  decltype(&::ibv_create_cq) create_cq = nullptr;                ///< ibv_create_cq
  decltype(&::ibv_destroy_cq) destroy_cq = nullptr;              ///< ibv_destroy_cq
  decltype(&::ibv_create_qp) create_qp = nullptr;                ///< ibv_create_qp
  decltype(&::ibv_modify_qp) modify_qp = nullptr;                ///< ibv_modify_qp
  decltype(&::ibv_destroy_qp) destroy_qp = nullptr;              ///< ibv_destroy_qp

  /// The process-wide table, loaded on first use from "libibverbs.so.1".
  static const IbvLib& get();
  /// Loads a table from `soname` (tests pass a name that does not exist to see the absent-library path).
  static IbvLib load(const char* soname);

  /// For tests: a table whose functions are all given (a simulated device); ok() when none is null.
  static IbvLib fromFunctions(IbvLib table);

  /// True when the library and every function were found.
  bool ok() const { return ok_; }
  /// Why the table is unusable ("" when ok()).
  const std::string& why() const { return why_; }
  /// ibv_query_port as verbs.h defines it (extended provider op, else the exported compatibility function).
  int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;

 private:
  bool ok_ = false;
  std::string why_;
  void* handle_ = nullptr;  // kept open for the life of the process
};

}  // namespace hoccl::transport::ibverbs
