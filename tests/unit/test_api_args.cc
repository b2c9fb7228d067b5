// Bad input at the C edge: a precise error, a precise hocclGetLastError text, and nothing changed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "hoccl/hoccl.h"

namespace {

struct OneRank {
  hocclComm_t comm = nullptr;
  OneRank() {
    hocclUniqueId id;
    REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
    REQUIRE(hocclCommInitRank(&comm, 1, id, 0) == hocclSuccess);
  }
  ~OneRank() { hocclCommDestroy(comm); }
};

std::string lastError() { return hocclGetLastError(nullptr); }

}  // namespace

TEST_CASE("version and error strings", "[api]") {
  int v = 0;
  REQUIRE(hocclGetVersion(&v) == hocclSuccess);
  REQUIRE(v == HOCCL_VERSION_CODE);
  REQUIRE(hocclGetVersion(nullptr) == hocclInvalidArgument);
  REQUIRE(std::string(hocclGetErrorString(hocclSuccess)) == "no error");
  REQUIRE(std::string(hocclGetErrorString(hocclRemoteError)).find("remote process") != std::string::npos);
  REQUIRE(std::string(hocclGetErrorString(static_cast<hocclResult_t>(99))) == "unknown result code");
}

TEST_CASE("bad collective arguments are rejected and change nothing", "[api]") {
  OneRank one;
  std::vector<float> in(8, 1.0f), out(8, -7.0f);
  auto untouched = [&] {
    for (float x : out)
      if (x != -7.0f) return false;
    return true;
  };
  SECTION("null buffers with count > 0") {
    REQUIRE(hocclAllReduce(nullptr, out.data(), 8, hocclFloat, hocclSum, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(lastError().find("sendbuff is NULL") != std::string::npos);
    REQUIRE(hocclAllReduce(in.data(), nullptr, 8, hocclFloat, hocclSum, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(lastError().find("recvbuff is NULL") != std::string::npos);
    // count 0 with null buffers is fine, as in NCCL.
    REQUIRE(hocclAllReduce(nullptr, nullptr, 0, hocclFloat, hocclSum, one.comm, nullptr) == hocclSuccess);
  }
  SECTION("invalid type and op") {
    REQUIRE(hocclAllReduce(in.data(), out.data(), 8, static_cast<hocclDataType_t>(12), hocclSum, one.comm, nullptr) ==
            hocclInvalidArgument);
    REQUIRE(lastError().find("datatype 12") != std::string::npos);
    REQUIRE(hocclAllReduce(in.data(), out.data(), 8, hocclFloat, static_cast<hocclRedOp_t>(77), one.comm, nullptr) ==
            hocclInvalidArgument);
    REQUIRE(lastError().find("op 77") != std::string::npos);
  }
  SECTION("invalid root and peer") {
    REQUIRE(hocclBroadcast(in.data(), out.data(), 8, hocclFloat, 1, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(lastError().find("root 1 is outside 0..0") != std::string::npos);
    REQUIRE(hocclReduce(in.data(), out.data(), 8, hocclFloat, hocclSum, -1, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(hocclSend(in.data(), 8, hocclFloat, 3, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(lastError().find("peer 3") != std::string::npos);
  }
  SECTION("count overflow") {
    REQUIRE(hocclAllGather(in.data(), out.data(), SIZE_MAX / 2, hocclDouble, one.comm, nullptr) ==
            hocclInvalidArgument);
    REQUIRE(lastError().find("overflows") != std::string::npos);
  }
  SECTION("a PreMulSum op of the wrong type") {
    hocclRedOp_t op;
    double scalar = 2.0;
    REQUIRE(hocclRedOpCreatePreMulSum(&op, &scalar, hocclDouble, hocclScalarHostImmediate, one.comm) == hocclSuccess);
    REQUIRE(hocclAllReduce(in.data(), out.data(), 8, hocclFloat, op, one.comm, nullptr) == hocclInvalidArgument);
    REQUIRE(hocclRedOpDestroy(op, one.comm) == hocclSuccess);
    REQUIRE(hocclRedOpDestroy(op, one.comm) == hocclInvalidArgument);
    REQUIRE(hocclRedOpDestroy(hocclSum, one.comm) == hocclInvalidArgument);
  }
  REQUIRE(untouched());
}

TEST_CASE("communicator misuse", "[api]") {
  float x = 1, y = 0;
  REQUIRE(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, nullptr, nullptr) == hocclInvalidArgument);
  REQUIRE(lastError().find("comm is NULL") != std::string::npos);

  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  hocclComm_t comm = nullptr;
  REQUIRE(hocclCommInitRank(&comm, 2, id, 2) == hocclInvalidArgument);
  REQUIRE(lastError().find("rank 2 is outside 0..1") != std::string::npos);
  REQUIRE(hocclCommInitRank(&comm, 0, id, 0) == hocclInvalidArgument);
  hocclUniqueId garbage{};
  REQUIRE(hocclCommInitRank(&comm, 1, garbage, 0) == hocclInvalidArgument);
  REQUIRE(lastError().find("not a hoccl id") != std::string::npos);

  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.magic = 0x1234;
  REQUIRE(hocclCommInitRankConfig(&comm, 1, id, 0, &config) == hocclInvalidArgument);
  REQUIRE(lastError().find("magic") != std::string::npos);

  REQUIRE(hocclCommInitRank(&comm, 1, id, 0) == hocclSuccess);
  REQUIRE(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr) == hocclSuccess);
  REQUIRE(y == 1.0f);
  int cnt = 0, rank = -1, dev = 0;
  REQUIRE(hocclCommCount(comm, &cnt) == hocclSuccess);
  REQUIRE(hocclCommUserRank(comm, &rank) == hocclSuccess);
  REQUIRE(hocclCommCuDevice(comm, &dev) == hocclSuccess);
  REQUIRE((cnt == 1 && rank == 0 && dev == -1));
  REQUIRE(hocclCommDestroy(comm) == hocclSuccess);
  REQUIRE(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr) == hocclInvalidUsage);
  REQUIRE(lastError().find("already destroyed") != std::string::npos);
  REQUIRE(hocclCommDestroy(comm) == hocclInvalidUsage);
}

TEST_CASE("group misuse and self send/recv", "[api]") {
  REQUIRE(hocclGroupEnd() == hocclInvalidUsage);
  OneRank one;
  std::vector<int> a(5, 3), b(5, 0);
  REQUIRE(hocclGroupStart() == hocclSuccess);
  REQUIRE(hocclRecv(b.data(), 5, hocclInt32, 0, one.comm, nullptr) == hocclSuccess);
  REQUIRE(hocclSend(a.data(), 5, hocclInt32, 0, one.comm, nullptr) == hocclSuccess);
  REQUIRE(hocclGroupEnd() == hocclSuccess);
  REQUIRE(b == a);
  REQUIRE(hocclGroupStart() == hocclSuccess);
  REQUIRE(hocclSend(a.data(), 5, hocclInt32, 0, one.comm, nullptr) == hocclSuccess);
  REQUIRE(hocclGroupEnd() == hocclInvalidUsage);
  REQUIRE(lastError().find("send(s) to self") != std::string::npos);
}

TEST_CASE("non-blocking init reports progress through GetAsyncError", "[api]") {
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  hocclComm_t comm = nullptr;
  hocclResult_t rc = hocclCommInitRankConfig(&comm, 1, id, 0, &config);
  REQUIRE((rc == hocclInProgress || rc == hocclSuccess));
  hocclResult_t state = hocclInProgress;
  for (int i = 0; i < 10000 && state == hocclInProgress; ++i) {
    REQUIRE(hocclCommGetAsyncError(comm, &state) == hocclSuccess);
    if (state == hocclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(state == hocclSuccess);
  REQUIRE(hocclCommDestroy(comm) == hocclSuccess);
}
