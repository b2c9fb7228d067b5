/// @file abi_new_api.cc
/// The calls NCCL added after 2.28, through hoccl's libnccl.so.2, compiled against NVIDIA's nccl.h 2.32.3:
/// - version 2.32.3 and the ncclTimeout text;
/// - the parameter API against the environment this test sets (typed reads, ranges, raw bytes, unknown keys);
/// - ncclSetEncryption: mode NONE accepted, PSK refused (hoccl does not encrypt);
/// - 2 ranks: every nccl*Config collective against a double reference, the per-call config rules, suspend/resume
///   and the memory statistics, ncclCommQueryProperties by size, window pointers, CFT teams, a signal each way and
///   a put into ordinary memory refused;
/// - 3 processes: ncclCommGetUniqueId + ncclCommGrow from 2 ranks to 3, then an all-reduce on the grown
///   communicator;
/// - ncclTimeout: a rank whose peer never joins the all-reduce gets ncclTimeout after NCCL_TIMEOUT seconds, and so
///   does a rank whose peer never calls ncclCommInitRank.
#include <nccl_device.h>

#include <chrono>
#include <thread>

#include "abi_util.h"

using abi::check;
using abi::expectResult;

namespace {

int growPipe[2];  ///< rank 0 hands the grow id to the new rank through it

bool contains(const char* text, const char* needle) { return text && std::strstr(text, needle) != nullptr; }

void versionAndStrings() {
  int v = 0;
  check(ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE && v == 23203, "version %d", v);
  check(std::strcmp(ncclGetErrorString(ncclTimeout), "timeout") == 0, "ncclTimeout text: %s",
        ncclGetErrorString(ncclTimeout));
}

void parameters() {
  setenv("NCCL_CHUNK_SIZE", "65536", 1);
  setenv("NCCL_ALGO", "ring", 1);
  setenv("HOCCL_TCP_CONNS", "3", 1);
  setenv("NCCL_TCP_CONNS", "4", 1);  // HOCCL_ wins

  ncclParamHandle_t h = nullptr;
  expectResult(ncclParamBind(&h, "NCCL_CHUNK_SIZE"), ncclSuccess, "bind NCCL_CHUNK_SIZE");
  int64_t i64 = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  int16_t i16 = 0;
  int8_t i8 = 0;
  check(ncclParamGetI64(h, &i64) == ncclSuccess && i64 == 65536, "I64 %lld", static_cast<long long>(i64));
  check(ncclParamGetI32(h, &i32) == ncclSuccess && i32 == 65536, "I32 %d", i32);
  check(ncclParamGetU32(h, &u32) == ncclSuccess && u32 == 65536u, "U32 %u", u32);
  i16 = 7;
  expectResult(ncclParamGetI16(h, &i16), ncclInvalidArgument, "65536 does not fit int16");
  check(i16 == 7, "a refused read leaves out alone");
  expectResult(ncclParamGetI8(h, &i8), ncclInvalidArgument, "65536 does not fit int8");
  const char* s = nullptr;
  check(ncclParamGetStr(h, &s) == ncclSuccess && s && std::strcmp(s, "65536") == 0, "Str %s", s ? s : "(null)");
  int64_t raw = 0;
  int len = 0;
  check(ncclParamGet(h, &raw, sizeof raw, &len) == ncclSuccess && len == 8 && raw == 65536, "raw int %lld len %d",
        static_cast<long long>(raw), len);
  expectResult(ncclParamGet(h, &raw, 4, &len), ncclInvalidArgument, "raw read into 4 bytes");
  check(len == 8, "the needed length is reported: %d", len);

  ncclParamHandle_t conns = nullptr;
  expectResult(ncclParamBind(&conns, "NCCL_TCP_CONNS"), ncclSuccess, "bind NCCL_TCP_CONNS");
  uint8_t u8 = 0;
  check(ncclParamGetU8(conns, &u8) == ncclSuccess && u8 == 3, "HOCCL_TCP_CONNS wins over NCCL_: %u", u8);

  ncclParamHandle_t algo = nullptr;
  expectResult(ncclParamBind(&algo, "NCCL_ALGO"), ncclSuccess, "bind NCCL_ALGO");
  check(ncclParamGetStr(algo, &s) == ncclSuccess && std::strcmp(s, "ring") == 0, "ALGO %s", s);
  expectResult(ncclParamGetI32(algo, &i32), ncclInvalidArgument, "a text parameter read as int32");
  char text[16] = {};
  check(ncclParamGet(algo, text, sizeof text, &len) == ncclSuccess && len == 5 && std::strcmp(text, "ring") == 0,
        "raw text %s len %d", text, len);

  ncclParamHandle_t timeout = nullptr;
  uint64_t u64 = 0;
  check(ncclParamBind(&timeout, "NCCL_TIMEOUT") == ncclSuccess && ncclParamGetU64(timeout, &u64) == ncclSuccess &&
            u64 == 300,
        "NCCL_TIMEOUT default 300: %llu", static_cast<unsigned long long>(u64));

  ncclParamHandle_t untouched = reinterpret_cast<ncclParamHandle_t>(0x1);
  expectResult(ncclParamBind(&untouched, "NCCL_PROTO"), ncclInvalidArgument, "a key hoccl does not have");
  check(untouched == reinterpret_cast<ncclParamHandle_t>(0x1), "unknown key: out untouched");
  check(contains(ncclGetLastError(nullptr), "NCCL_PROTO"), "unknown key named: %s", ncclGetLastError(nullptr));
  expectResult(ncclParamGetI32(reinterpret_cast<ncclParamHandle_t>(&i32), &i32), ncclInvalidArgument,
               "a handle not made by ncclParamBind");

  const char* value = nullptr;
  int valueLen = 0;
  check(ncclParamGetParameter("NCCL_CHUNK_SIZE", &value, &valueLen) == ncclSuccess && valueLen == 5 &&
            std::strcmp(value, "65536") == 0,
        "GetParameter %s", value ? value : "(null)");
  const char** keys = nullptr;
  int nKeys = 0;
  bool sawTimeout = false, sawAlgo = false;
  check(ncclParamGetAllParameterKeys(&keys, &nKeys) == ncclSuccess && nKeys > 10, "%d keys", nKeys);
  for (int k = 0; k < nKeys; ++k) {
    sawTimeout |= std::strcmp(keys[k], "NCCL_TIMEOUT") == 0;
    sawAlgo |= std::strcmp(keys[k], "NCCL_ALGO") == 0;
    const char* v = nullptr;
    check(ncclParamGetParameter(keys[k], &v, nullptr) == ncclSuccess, "every listed key reads: %s", keys[k]);
  }
  check(sawTimeout && sawAlgo, "the key list names NCCL_TIMEOUT and NCCL_ALGO");
  ncclParamDumpAll();
  unsetenv("NCCL_CHUNK_SIZE");
  unsetenv("NCCL_ALGO");
  unsetenv("HOCCL_TCP_CONNS");
  unsetenv("NCCL_TCP_CONNS");
}

void encryption() {
  ncclEncryptionConfig_t c = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  expectResult(ncclSetEncryption(&c), ncclSuccess, "encryption mode NONE");
  c.mode = NCCL_ENCRYPTION_MODE_PSK;
  c.psk = "0123456789abcdef";
  expectResult(ncclSetEncryption(&c), ncclInvalidUsage, "encryption mode PSK refused");
  check(contains(ncclGetLastError(nullptr), "does not encrypt"), "PSK refusal says why: %s", ncclGetLastError(nullptr));
  c.magic = 0;
  expectResult(ncclSetEncryption(&c), ncclInvalidArgument, "encryption config with a wrong magic");
  expectResult(ncclSetEncryption(nullptr), ncclInvalidArgument, "NULL encryption config");
}

// Every nccl*Config collective on 2 ranks with a default per-call config, results against a double reference.
void configCollectives(int rank, ncclComm_t comm) {
  const int n = 2;
  const size_t count = 1000;
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.userProfilerTag = 42;  // ignored, as by NVIDIA's library without a profiler
  ncclConfigExt_t ext = {nullptr, {12345, 1}, {7}};
  cfg.ext = &ext;  // vendor options: ignored
  cfg.minCTAs = 2;
  cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  std::vector<double> send(count * n), recv(count * n), want(count * n);
  auto val = [](int r, size_t i) { return double((r + 1) * 1000 + i % 97); };
  for (size_t i = 0; i < count * n; ++i) send[i] = val(rank, i);

  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &cfg),
               ncclSuccess, "ncclAllReduceConfig");
  bool ok = true;
  for (size_t i = 0; i < count; ++i) ok &= recv[i] == val(0, i) + val(1, i);
  check(ok, "ncclAllReduceConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclAllGatherConfig(send.data(), recv.data(), count, ncclDouble, comm, nullptr, &cfg), ncclSuccess,
               "ncclAllGatherConfig");
  ok = true;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ok &= recv[r * count + i] == val(r, i);
  check(ok, "ncclAllGatherConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclReduceScatterConfig(send.data(), recv.data(), count, ncclDouble, ncclMax, comm, nullptr, &cfg),
               ncclSuccess, "ncclReduceScatterConfig");
  ok = true;
  for (size_t i = 0; i < count; ++i) ok &= recv[i] == std::max(val(0, rank * count + i), val(1, rank * count + i));
  check(ok, "ncclReduceScatterConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclBroadcastConfig(send.data(), recv.data(), count, ncclDouble, 1, comm, nullptr, nullptr), ncclSuccess,
               "ncclBroadcastConfig (NULL config)");
  ok = true;
  for (size_t i = 0; i < count; ++i) ok &= recv[i] == val(1, i);
  check(ok, "ncclBroadcastConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclProd, 0, comm, nullptr, &cfg),
               ncclSuccess, "ncclReduceConfig");
  ok = true;
  if (rank == 0)
    for (size_t i = 0; i < count; ++i) ok &= recv[i] == val(0, i) * val(1, i);
  check(ok, "ncclReduceConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclAlltoAllConfig(send.data(), recv.data(), count, ncclDouble, comm, nullptr, &cfg), ncclSuccess,
               "ncclAlltoAllConfig");
  ok = true;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ok &= recv[r * count + i] == val(r, rank * count + i);
  check(ok, "ncclAlltoAllConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclGatherConfig(send.data(), recv.data(), count, ncclDouble, 1, comm, nullptr, &cfg), ncclSuccess,
               "ncclGatherConfig");
  ok = true;
  if (rank == 1)
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ok &= recv[r * count + i] == val(r, i);
  check(ok, "ncclGatherConfig result");

  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclScatterConfig(send.data(), recv.data(), count, ncclDouble, 0, comm, nullptr, &cfg), ncclSuccess,
               "ncclScatterConfig");
  ok = true;
  for (size_t i = 0; i < count; ++i) ok &= recv[i] == val(0, rank * count + i);
  check(ok, "ncclScatterConfig result");

  // The per-call config rules (each refused call is refused on both ranks, before anything moves).
  ncclCollConfig_t bad = NCCL_COLLCONFIG_INITIALIZER;
  bad.magic = 1;
  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &bad),
               ncclInvalidArgument, "a per-call config with a wrong magic");
  check(contains(ncclGetLastError(nullptr), "NCCL_COLLCONFIG_INITIALIZER"), "wrong magic text: %s",
        ncclGetLastError(nullptr));
  ncclCollConfig_t alg = NCCL_COLLCONFIG_INITIALIZER;
  alg.algSelection = "tree";
  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &alg),
               ncclInvalidUsage, "a forced algorithm selection");
  check(contains(ncclGetLastError(nullptr), "HOCCL_ALGO"), "forced selection text: %s", ncclGetLastError(nullptr));
  alg.forceAlgSelection = 0;
  std::fill(recv.begin(), recv.end(), -1.0);
  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &alg),
               ncclSuccess, "an algorithm selection that is not forced");
  check(recv[5] == val(0, 5) + val(1, 5), "unforced selection still reduces");
  ncclCollConfig_t event = NCCL_COLLCONFIG_INITIALIZER;
  event.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(0x1000);
  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &event),
               ncclInvalidUsage, "a launch-completion event");
  // A config of an older, shorter layout: only the header and ext; the rest must not be read.
  ncclCollConfig_t shortCfg = NCCL_COLLCONFIG_INITIALIZER;
  shortCfg.size = offsetof(ncclCollConfig_t, minCTAs);
  shortCfg.algSelection = "tree";  // past size: ignored
  expectResult(ncclAllReduceConfig(send.data(), recv.data(), count, ncclDouble, ncclSum, comm, nullptr, &shortCfg),
               ncclSuccess, "a short per-call config ignores what lies past its size");
}

void suspendResume(ncclComm_t comm) {
  uint64_t v = 99;
  check(ncclCommMemStats(comm, ncclStatGpuMemTotal, &v) == ncclSuccess && v == 0, "no GPU bytes: %llu",
        static_cast<unsigned long long>(v));
  check(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 0, "not suspended");
  expectResult(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(9), &v), ncclInvalidArgument, "unknown stat");
  expectResult(ncclCommResume(comm), ncclInvalidUsage, "resume when not suspended");
  expectResult(ncclCommSuspend(comm, 0x10), ncclInvalidArgument, "unknown suspend flags");
  expectResult(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess, "suspend");
  check(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 1, "suspended flag");
  expectResult(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage, "suspend twice");
  double x = 1, y = 0;
  expectResult(ncclAllReduce(&x, &y, 1, ncclDouble, ncclSum, comm, nullptr), ncclInvalidUsage,
               "all-reduce on a suspended communicator");
  check(contains(ncclGetLastError(nullptr), "ncclCommResume"), "suspended text: %s", ncclGetLastError(nullptr));
  expectResult(ncclCommResume(comm), ncclSuccess, "resume");
  check(ncclAllReduce(&x, &y, 1, ncclDouble, ncclSum, comm, nullptr) == ncclSuccess && y == 2.0,
        "all-reduce after resume: %g", y);
}

void properties(int rank, ncclComm_t comm) {
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  p.deviceApiSupport = true;
  expectResult(ncclCommQueryProperties(comm, &p), ncclSuccess, "query properties");
  check(p.rank == rank && p.nRanks == 2 && !p.deviceApiSupport && !p.multimemSupport && !p.hostRmaSupport &&
            p.ginType == NCCL_GIN_TYPE_NONE && p.nLsaTeams == 2 && !p.cftSupport,
        "properties: rank %d nRanks %d lsa teams %d", p.rank, p.nRanks, p.nLsaTeams);
  // An older caller's shorter struct: nothing written past its size.
  struct {
    ncclCommProperties_t props;
    char guard[64];
  } older;
  std::memset(&older, 0x77, sizeof older);
  const ncclCommProperties_t init = NCCL_COMM_PROPERTIES_INITIALIZER;
  std::memcpy(&older.props, &init, offsetof(ncclCommProperties_t, rank));
  older.props.size = offsetof(ncclCommProperties_t, deviceApiSupport);
  expectResult(ncclCommQueryProperties(comm, &older.props), ncclSuccess, "query properties, short struct");
  bool untouched = true;
  const char* bytes = reinterpret_cast<const char*>(&older.props);
  for (size_t i = older.props.size; i < sizeof older; ++i) untouched &= bytes[i] == 0x77;
  check(older.props.rank == rank && older.props.nRanks == 2 && untouched, "short struct: fields and guard");
  ncclCommProperties_t bad = NCCL_COMM_PROPERTIES_INITIALIZER;
  bad.magic = 0;
  expectResult(ncclCommQueryProperties(comm, &bad), ncclInvalidArgument, "properties with a wrong magic");
}

void windows(int rank, ncclComm_t comm) {
  std::vector<char> buf(8192);
  ncclWindow_t win = nullptr;
  expectResult(ncclCommWindowRegister(comm, buf.data(), buf.size(), &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess,
               "window register");
  void* p = nullptr;
  check(ncclWinGetUserPtr(comm, win, &p) == ncclSuccess && p == buf.data(), "ncclWinGetUserPtr");
  check(ncclGetLsaDevicePointer(win, 16, 0, &p) == ncclSuccess && p == buf.data() + 16, "own LSA pointer");
  expectResult(ncclGetLsaDevicePointer(win, 16, 1, &p), ncclInvalidUsage, "another LSA rank's pointer");
  expectResult(ncclGetLsaDevicePointer(win, 9000, 0, &p), ncclInvalidArgument, "offset past the window");
  check(ncclGetPeerDevicePointer(win, 8, rank, &p) == ncclSuccess && p == buf.data() + 8, "own peer pointer");
  expectResult(ncclGetPeerDevicePointer(win, 8, 1 - rank, &p), ncclInvalidUsage, "the other rank's pointer");
  expectResult(ncclGetLsaMultimemDevicePointer(win, 0, &p), ncclInvalidUsage, "multimem pointer");
  ncclCftLeId le = 0;
  size_t leOffset = 0;
  expectResult(ncclGetPeerDeviceLeInfo(win, 0, 1 - rank, &le, &leOffset), ncclInvalidUsage, "CFT LE info");
  // One-sided calls (abi_one_sided tests them fully): a vector is not ncclMemAlloc memory, so a peer cannot put
  // into it; plain signals work.
  expectResult(ncclPutSignal(buf.data(), 4, ncclInt8, 1 - rank, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidUsage,
               "ncclPutSignal into a peer's ordinary memory");
  check(contains(ncclGetLastError(nullptr), "ncclMemAlloc"), "one-sided text: %s", ncclGetLastError(nullptr));
  expectResult(ncclSignal(1 - rank, 0, 0, 0, comm, nullptr), ncclSuccess, "ncclSignal");
  ncclWaitSignalDesc_t desc = {1, 1 - rank, 0, 0};
  expectResult(ncclWaitSignal(1, &desc, comm, nullptr), ncclSuccess, "ncclWaitSignal");
  const ncclTeam_t cft = ncclTeamCft(comm, NCCL_CFT_TEAM_FLAT);
  check(cft.nRanks == 1 && cft.rank == 0, "CFT team of one");
  expectResult(ncclCommWindowDeregister(comm, win), ncclSuccess, "window deregister");
  expectResult(ncclWinGetUserPtr(comm, win, &p), ncclInvalidArgument, "user pointer of a deregistered window");
}

void twoRanks(int rank, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess, "init 2 ranks")) return;
  configCollectives(rank, comm);
  suspendResume(comm);
  properties(rank, comm);
  windows(rank, comm);
  expectResult(ncclCommDestroy(comm), ncclSuccess, "destroy");
}

// Ranks 0 and 1 start with a 2-rank communicator and grow it by process 2.
void grow(int rank, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr, grown = nullptr;
  ncclUniqueId gid;
  if (rank < 2) {
    if (!expectResult(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess, "init before grow")) return;
    if (rank == 0) {
      expectResult(ncclCommGetUniqueId(comm, &gid), ncclSuccess, "ncclCommGetUniqueId");
      ncclUniqueId second;
      expectResult(ncclCommGetUniqueId(comm, &second), ncclInvalidUsage, "a second id while one is pending");
      if (write(growPipe[1], &gid, sizeof gid) != static_cast<ssize_t>(sizeof gid)) check(false, "pipe write");
      expectResult(ncclCommGrow(comm, 3, &gid, -1, &grown, nullptr), ncclSuccess, "grow (existing root)");
    } else {
      expectResult(ncclCommGrow(comm, 3, nullptr, -1, &grown, nullptr), ncclSuccess, "grow (existing rank)");
    }
  } else {
    if (read(growPipe[0], &gid, sizeof gid) != static_cast<ssize_t>(sizeof gid)) {
      check(false, "no grow id from rank 0");
      return;
    }
    expectResult(ncclCommGrow(nullptr, 3, &gid, 2, &grown, nullptr), ncclSuccess, "grow (new rank)");
  }
  if (!grown) return;
  int n = 0, me = -1;
  check(ncclCommCount(grown, &n) == ncclSuccess && n == 3, "grown size %d", n);
  check(ncclCommUserRank(grown, &me) == ncclSuccess && me == rank, "grown rank %d", me);
  double x = rank + 1, y = 0;
  check(ncclAllReduce(&x, &y, 1, ncclDouble, ncclSum, grown, nullptr) == ncclSuccess && y == 6.0,
        "all-reduce on the grown communicator: %g", y);
  ncclCommDestroy(grown);
  if (comm) {
    ncclUniqueId again;
    expectResult(ncclCommGetUniqueId(comm, &again), ncclSuccess, "a new id once the grow consumed the last");
    ncclCommDestroy(comm);
  }
}

// Rank 1 never joins the all-reduce: rank 0 must get ncclTimeout after NCCL_TIMEOUT (2 s), not hang.
void timeout(int rank, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess, "init for the timeout")) return;
  if (rank == 0) {
    std::vector<float> x(1024, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, comm, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check(r == ncclTimeout, "all-reduce with a silent peer gives %d (%s), want ncclTimeout: %s", r,
          ncclGetErrorString(r), ncclGetLastError(nullptr));
    check(s >= 1.5 && s < 30, "timed out after %.1f s with NCCL_TIMEOUT=2", s);
    ncclCommAbort(comm);
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    ncclCommAbort(comm);
  }
}

// Rank 1 never calls ncclCommInitRank: rank 0's init must give ncclTimeout within NCCL_TIMEOUT (2 s) + 1 s.
void absentAtInit(int rank, const ncclUniqueId& id) {
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    return;
  }
  ncclComm_t comm = nullptr;
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(r == ncclTimeout, "init without rank 1 gives %d (%s), want ncclTimeout: %s", r, ncclGetErrorString(r),
        ncclGetLastError(nullptr));
  check(s >= 1.5 && s < 3, "init timed out after %.1f s with NCCL_TIMEOUT=2", s);
  check(std::strstr(ncclGetLastError(nullptr), "never joined") != nullptr, "the init error names the missing rank: %s",
        ncclGetLastError(nullptr));
  if (r == ncclSuccess) ncclCommAbort(comm);
}

}  // namespace

int main() {
  versionAndStrings();
  parameters();
  encryption();
  const int local = abi::failures();
  if (pipe(growPipe) != 0) return 1;
  const int bad2 = abi::runRanks(2, 90, twoRanks);
  const int badGrow = abi::runRanks(3, 90, grow);
  setenv("NCCL_TIMEOUT", "2", 1);
  const int badTimeout = abi::runRanks(2, 60, timeout);
  const int badAbsent = abi::runRanks(2, 60, absentAtInit);
  const int failed = (local ? 1 : 0) + (bad2 ? 1 : 0) + (badGrow ? 1 : 0) + (badTimeout ? 1 : 0) + (badAbsent ? 1 : 0);
  std::printf("%d passed, %d failed\n", 5 - failed, failed);
  return failed == 0 ? 0 : 1;
}
