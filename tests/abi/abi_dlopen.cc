/// @file abi_dlopen.cc
/// Loads "libnccl.so.2" with dlopen the way frameworks do (this program is not linked against any NCCL), with
/// LD_LIBRARY_PATH pointing at the shim's build folder (argv[1]); checks that hoccl's library was the one found
/// (not NVIDIA's, which the system also knows), and calls ncclGetVersion, ncclGetErrorString and ncclGetLastError
/// through the nccl* and pnccl* names with NVIDIA's own function types.
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0, passes = 0;

void check(bool ok, const std::string& what) {
  if (ok) {
    ++passes;
  } else {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

template <class F>
F lookup(void* lib, const char* name) {
  void* sym = dlsym(lib, name);
  check(sym != nullptr, std::string("symbol ") + name + " is exported");
  return reinterpret_cast<F>(sym);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SHIM_BUILD_DIR (and LD_LIBRARY_PATH=SHIM_BUILD_DIR)\n", argv[0]);
    return 2;
  }
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "FAILED: dlopen(libnccl.so.2): %s\n", dlerror());
    return 1;
  }
  auto getVersion = lookup<decltype(&ncclGetVersion)>(lib, "ncclGetVersion");
  auto pGetVersion = lookup<decltype(&pncclGetVersion)>(lib, "pncclGetVersion");
  auto errorString = lookup<decltype(&ncclGetErrorString)>(lib, "ncclGetErrorString");
  auto lastError = lookup<decltype(&ncclGetLastError)>(lib, "ncclGetLastError");
  if (failures) return 1;

  // The library found must be the shim in argv[1].
  Dl_info info{};
  char wantDir[PATH_MAX], gotPath[PATH_MAX];
  const bool resolved = dladdr(reinterpret_cast<void*>(getVersion), &info) != 0 && info.dli_fname &&
                        realpath(argv[1], wantDir) && realpath(info.dli_fname, gotPath);
  check(resolved && std::strncmp(gotPath, wantDir, std::strlen(wantDir)) == 0,
        std::string("libnccl.so.2 was loaded from ") + (info.dli_fname ? info.dli_fname : "?") + ", not from " +
            argv[1]);

  int version = 0, pversion = 0;
  check(getVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE,
        "ncclGetVersion gives " + std::to_string(version) + ", want " + std::to_string(NCCL_VERSION_CODE));
  check(pGetVersion(&pversion) == ncclSuccess && pversion == version, "pncclGetVersion agrees");
  check(getVersion(nullptr) == ncclInvalidArgument, "ncclGetVersion(NULL) is an invalid argument");
  check(std::strstr(lastError(nullptr), "version") != nullptr,
        std::string("ncclGetLastError names the bad argument: ") + lastError(nullptr));

  const char* want[] = {"no error",
                        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
                        "internal error - please report this issue to the NCCL developers",
                        "invalid argument (run with NCCL_DEBUG=WARN for details)",
                        "invalid usage (run with NCCL_DEBUG=WARN for details)",
                        "remote process exited or there was a network error",
                        "NCCL operation in progress",
                        "timeout"};
  static_assert(sizeof want / sizeof want[0] == ncclNumResults, "one text per result code of nccl.h");
  for (int r = 0; r < ncclNumResults; ++r) {
    const char* got = errorString(static_cast<ncclResult_t>(r));
    check(got && std::strcmp(got, want[r]) == 0, "ncclGetErrorString(" + std::to_string(r) + ") = " + got);
  }
  check(std::strcmp(errorString(ncclNumResults), "unknown result code") == 0, "ncclGetErrorString(ncclNumResults)");
  check(std::strcmp(errorString(static_cast<ncclResult_t>(-1)), "unknown result code") == 0, "ncclGetErrorString(-1)");

  dlclose(lib);
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
