// Run-time loading of libibverbs (see ibv_lib.h).
#include "transports/ibverbs/ibv_lib.h"

#include <dlfcn.h>

#include <cstring>

#include <fmt/format.h>

namespace hoccl::transport::ibverbs {
namespace {

template <typename F>
bool resolve(void* handle, const char* name, F* out, std::string* missing) {
  void* sym = dlsym(handle, name);
  if (!sym) {
    *missing += *missing == "" ? name : fmt::format(", {}", name);
    return false;
  }
  *out = reinterpret_cast<F>(sym);
  return true;
}

}  // namespace

IbvLib IbvLib::load(const char* soname) {
  IbvLib lib;
  lib.handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_) {
    const char* err = dlerror();
    lib.why_ = fmt::format(
        "{} could not be loaded ({}); install rdma-core (libibverbs1 and the provider of the "
        "device, e.g. ibverbs-providers) to use RDMA",
        soname, err ? err : "unknown reason");
    return lib;
  }
  std::string missing;
  bool all = true;
  all &= resolve(lib.handle_, "ibv_get_device_list", &lib.get_device_list, &missing);
  all &= resolve(lib.handle_, "ibv_free_device_list", &lib.free_device_list, &missing);
  all &= resolve(lib.handle_, "ibv_get_device_name", &lib.get_device_name, &missing);
  all &= resolve(lib.handle_, "ibv_open_device", &lib.open_device, &missing);
  all &= resolve(lib.handle_, "ibv_close_device", &lib.close_device, &missing);
  all &= resolve(lib.handle_, "ibv_query_device", &lib.query_device, &missing);
  all &= resolve(lib.handle_, "ibv_query_port", &lib.query_port_compat, &missing);
  all &= resolve(lib.handle_, "ibv_query_gid", &lib.query_gid, &missing);
  all &= resolve(lib.handle_, "ibv_alloc_pd", &lib.alloc_pd, &missing);
  all &= resolve(lib.handle_, "ibv_dealloc_pd", &lib.dealloc_pd, &missing);
  all &= resolve(lib.handle_, "ibv_reg_mr", &lib.reg_mr, &missing);
  all &= resolve(lib.handle_, "ibv_dereg_mr", &lib.dereg_mr, &missing);
  all &= resolve(lib.handle_, "ibv_create_cq", &lib.create_cq, &missing);
  all &= resolve(lib.handle_, "ibv_destroy_cq", &lib.destroy_cq, &missing);
  all &= resolve(lib.handle_, "ibv_create_qp", &lib.create_qp, &missing);
  all &= resolve(lib.handle_, "ibv_modify_qp", &lib.modify_qp, &missing);
  all &= resolve(lib.handle_, "ibv_destroy_qp", &lib.destroy_qp, &missing);
  if (!all) {
    lib.why_ = fmt::format("{} lacks {}; it is too old or not rdma-core's libibverbs", soname, missing);
    return lib;
  }
  lib.ok_ = true;
  return lib;
}

IbvLib IbvLib::fromFunctions(IbvLib t) {
  t.handle_ = nullptr;
  t.ok_ = t.get_device_list && t.free_device_list && t.get_device_name && t.open_device && t.close_device &&
          t.query_device && t.query_port_compat && t.query_gid && t.alloc_pd && t.dealloc_pd && t.reg_mr &&
          t.dereg_mr && t.create_cq && t.destroy_cq && t.create_qp && t.modify_qp && t.destroy_qp;
  t.why_ = t.ok_ ? "" : "a function of the given table is missing";
  return t;
}

const IbvLib& IbvLib::get() {
  static const IbvLib lib = load("libibverbs.so.1");
  return lib;
}

int IbvLib::queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  // What ___ibv_query_port in verbs.h does, with the exported function taken from the table.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  return query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace hoccl::transport::ibverbs
