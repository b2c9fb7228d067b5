// Run-time loading of the UCX plugin (see ucx_api.h).
#include "transports/ucx/ucx_api.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "base/log.h"
#include "base/params.h"

namespace hoccl::transport::ucx {
namespace {

/// What to do when the plugin or UCX cannot be loaded.
constexpr const char* kInstallHint =
    "install UCX's run-time libraries (libucp.so.0: package libucx0 on Debian/Ubuntu, ucx on RHEL/Fedora; `ucx_info "
    "-v` checks them) and keep libhoccl-ucx.so next to libhoccl.so (or set HOCCL_UCX_PLUGIN to its path), or leave "
    "HOCCL_NET unset to use tcp";

/// The folder of the library or program that holds this code ("" when dladdr cannot tell).
std::string ownFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ownFolder), &info) && info.dli_fname) {
    char* real = realpath(info.dli_fname, nullptr);  // "/x/build/libhoccl.so", not "/x/build/perf/../libhoccl.so"
    const std::string self = real ? real : info.dli_fname;
    std::free(real);
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1);
  }
  return "";
}

}  // namespace

UcxApi UcxApi::load(const std::string& path) {
  UcxApi api;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    api.why_ = fmt::format("the UCX transport's plugin {} cannot be loaded ({}); {}", path,
                           err ? err : "dlopen gave no reason", kInstallHint);
    return api;
  }
  auto entry = reinterpret_cast<UcxPluginEntry>(dlsym(handle, kUcxPluginEntry));
  if (!entry) {
    api.why_ = fmt::format("{} is not hoccl's UCX plugin (it lacks {}); {}", path, kUcxPluginEntry, kInstallHint);
    dlclose(handle);
    return api;
  }
  if (entry(kUcxApiVersion, &api) != 0) {
    api.why_ = fmt::format(
        "{} was built for another version of hoccl (its table is not version {}); install the "
        "libhoccl-ucx.so built with this libhoccl",
        path, kUcxApiVersion);
    dlclose(handle);
    return api;
  }
  Dl_info info{};
  api.path_ = dladdr(reinterpret_cast<void*>(entry), &info) && info.dli_fname ? info.dli_fname : path;
  api.ok_ = true;  // the handle stays open for the life of the process
  return api;
}

const UcxApi& UcxApi::get() {
  static const UcxApi api = [] {
    const std::string chosen = params::UCX_PLUGIN.get();
    if (!chosen.empty()) return load(chosen);
    const std::string folder = ownFolder();
    UcxApi beside = folder.empty() ? UcxApi() : load(folder + kUcxPluginName);
    if (beside.ok()) return beside;
    UcxApi searched = load(kUcxPluginName);
    // Neither loaded: the plugin beside this code, when it is there, failed for the telling reason (e.g. its
    // libucp.so.0 is missing); else the search's.
    if (searched.ok() || folder.empty() || access((folder + kUcxPluginName).c_str(), F_OK) != 0) return searched;
    return beside;
  }();
  if (api.ok()) {
    static const bool logged = [] {
      unsigned major = 0, minor = 0, release = 0;
      api.get_version(&major, &minor, &release);
      HOCCL_INFO(kNet, "ucx: loaded {} (UCX {}.{}.{})", api.path(), major, minor, release);
      return true;
    }();
    (void)logged;
  }
  return api;
}

}  // namespace hoccl::transport::ucx
