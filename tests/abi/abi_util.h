/// @file abi_util.h
/// Helpers for the ABI tests, which are compiled against NVIDIA's own nccl.h and linked only against hoccl's
/// libnccl.so.2: run N ranks as forked processes sharing one unique id, read and write elements of every NCCL type
/// through NVIDIA's host conversions (an independent reference), and count failed checks.
#pragma once

#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace abi {

/// Failed checks of this process.
inline int& failures() {
  static int n = 0;
  return n;
}
/// Checks passed by this process.
inline int& passes() {
  static int n = 0;
  return n;
}
/// This process's rank, for messages (-1 = the parent).
inline int& myRank() {
  static int r = -1;
  return r;
}

/// Records a check; prints the formatted message when it failed.
inline bool check(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline bool check(bool ok, const char* fmt, ...) {
  if (ok) {
    ++passes();
    return true;
  }
  ++failures();
  std::fprintf(stderr, "[rank %d] FAILED: ", myRank());
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  return false;
}

/// Checks that an NCCL call returned `want`; prints ncclGetLastError otherwise.
inline bool expectResult(ncclResult_t got, ncclResult_t want, const char* what) {
  return check(got == want, "%s returned %d (%s), expected %d; last error: %s", what, static_cast<int>(got),
               ncclGetErrorString(got), static_cast<int>(want), ncclGetLastError(nullptr));
}

/// Bytes of one element of t.
inline size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

/// A short name of t for messages.
inline const char* typeName(ncclDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "?";
}

/// True for the unsigned integer types.
inline bool isUnsigned(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }

/// Writes v (exactly representable in t) as element i of buf.
inline void setElem(void* buf, ncclDataType_t t, size_t i, double v) {
  char* p = static_cast<char*>(buf) + i * typeSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case ncclUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case ncclInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclFloat16: {
      __half x = __float2half_rn(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclBfloat16: {
      __nv_bfloat16 x = __float2bfloat16_rn(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 x(static_cast<float>(v));
      std::memcpy(p, &x, 1);
      break;
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 x(static_cast<float>(v));
      std::memcpy(p, &x, 1);
      break;
    }
    default: std::abort();
  }
}

/// Reads element i of buf as a double.
inline double getElem(const void* buf, ncclDataType_t t, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * typeSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case ncclUint8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case ncclInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ncclUint32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ncclInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case ncclUint64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case ncclFloat16: {
      __half x;
      std::memcpy(&x, p, 2);
      return __half2float(x);
    }
    case ncclFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ncclFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case ncclBfloat16: {
      __nv_bfloat16 x;
      std::memcpy(&x, p, 2);
      return __bfloat162float(x);
    }
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 x;
      std::memcpy(&x, p, 1);
      return static_cast<float>(x);
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 x;
      std::memcpy(&x, p, 1);
      return static_cast<float>(x);
    }
    default: std::abort();
  }
}

/// Runs body(rank, id) in nranks forked processes; rank 0 makes the unique id and passes it to the others through
/// a pipe. Each process is killed after timeoutSec. Returns the number of ranks that failed (exit code != 0).
inline int runRanks(int nranks, int timeoutSec, const std::function<void(int, const ncclUniqueId&)>& body) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    return nranks;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      break;
    }
    if (pid == 0) {
      alarm(static_cast<unsigned>(timeoutSec));  // a hang ends as SIGALRM, reported by the parent
      myRank() = r;
      ncclUniqueId id;
      if (r == 0) {
        const ncclResult_t res = ncclGetUniqueId(&id);
        if (res != ncclSuccess) {
          std::fprintf(stderr, "[rank 0] ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
          _exit(2);
        }
        for (int k = 1; k < nranks; ++k) {
          if (write(fds[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(2);
        }
      } else if (read(fds[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {  // 128 B: atomic on a pipe
        std::fprintf(stderr, "[rank %d] no unique id from rank 0\n", r);
        _exit(2);
      }
      body(r, id);
      std::printf("[rank %d] %d checks passed, %d failed\n", r, passes(), failures());
      std::fflush(stdout);
      _exit(failures() == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  close(fds[0]);
  close(fds[1]);
  int bad = nranks - static_cast<int>(pids.size());
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "rank %zu died of signal %d%s\n", r, WTERMSIG(status),
                   WTERMSIG(status) == SIGALRM ? " (timeout: it hung)" : "");
      ++bad;
    } else if (WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "rank %zu exited with %d\n", r, WEXITSTATUS(status));
      ++bad;
    }
  }
  return bad;
}

}  // namespace abi
