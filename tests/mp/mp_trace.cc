// The flight recorder on real processes (issue 15), 3 ranks on one host, HOCCL_TIMEOUT=2,
// HOCCL_TRACE_DUMP=<tmp>/trace.%r.json, then hoccl-trace over the dumps:
//  1. "lagging": every rank makes 5 all-reduces; ranks 0 and 2 make a 6th while rank 1 sleeps, so they time out
//     and dump on the error; rank 1 then dumps on SIGUSR1 (sent to itself). hoccl-trace must name rank 1 as behind,
//     on call #5 AllReduce(count=100, float, sum), and say that rank 1 dumped on SIGUSR1.
//  2. "differing": the 6th call of rank 1 has another count: every rank fails (the mismatch check) and dumps;
//     hoccl-trace must report that call #5 differs, naming both calls.
// Each dump must be a file written by the rank itself (its pid in it); the tool's exit status must be 1 (findings).
//
// Usage: mp_trace --tool PATH/hoccl-trace [--transport shm|tcp]
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "harness.h"

using namespace hoccl::test;
namespace fs = std::filesystem;

namespace {

constexpr int kRanks = 3;
constexpr int kLagger = 1;

bool waitForFile(const std::string& path, int seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int rankBody(int rank, int n, const hocclUniqueId& id, const std::string& dir, bool differing) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  float in[200], out[200];
  for (float& v : in) v = static_cast<float>(rank);
  for (int i = 0; i < 5; ++i) MP_CHECK(rank, hocclAllReduce(in, out, 100, hocclFloat, hocclSum, comm, nullptr));
  const std::string mine = dir + "/trace." + std::to_string(rank) + ".json";
  if (rank == kLagger && !differing) {  // stops taking part for a while, then is asked for its recorder
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    kill(getpid(), SIGUSR1);
    if (!waitForFile(mine, 10)) return fail(rank, "no dump at " + mine + " after SIGUSR1");
    hocclCommAbort(comm);
    return 0;
  }
  const size_t count = differing && rank == kLagger ? 200 : 100;
  const hocclResult_t rc = hocclAllReduce(in, out, count, hocclFloat, hocclSum, comm, nullptr);
  if (rc == hocclSuccess) return fail(rank, "the 6th all-reduce returned success");
  if (!fs::exists(mine)) return fail(rank, "no dump at " + mine + " after the failed call");
  hocclCommAbort(comm);
  return 0;
}

/// Runs the tool over dir; returns its output and exit status.
std::pair<std::string, int> runTool(const std::string& tool, const std::string& dir) {
  const std::string cmd = "python3 '" + tool + "' '" + dir + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {"popen failed", -1};
  std::string out;
  std::array<char, 4096> buf;
  size_t got;
  while ((got = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), got);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

int scenario(const std::string& tool, bool differing) {
  char tmpl[] = "/tmp/hoccl-mp-trace-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("HOCCL_TRACE_DUMP", (dir + "/trace.%r.json").c_str(), 1);
  const char* name = differing ? "differing" : "lagging";
  std::printf("== %s (dumps in %s)\n", name, dir.c_str());
  std::fflush(stdout);
  int rc = runRanks(
      kRanks, [&](int r, int n, const hocclUniqueId& id) { return rankBody(r, n, id, dir, differing); }, 60);
  int bad = rc != 0;
  const auto [out, status] = runTool(tool, dir);
  std::printf("%s", out.c_str());
  auto expect = [&](const std::string& text) {
    if (out.find(text) != std::string::npos) return;
    std::printf("FAIL %s: hoccl-trace does not say \"%s\"\n", name, text.c_str());
    bad = 1;
  };
  if (status != 1) {
    std::printf("FAIL %s: hoccl-trace exited with %d, expected 1 (findings)\n", name, status);
    bad = 1;
  }
  if (!differing) {
    expect("rank 1 is behind: its last call is #4 AllReduce(count=100, float, sum) (done)");
    expect("reached call #5 AllReduce(count=100, float, sum) (failed), which rank 1 never started");
    expect("rank 1 dumped on: SIGUSR1");
    expect("rank 0 dumped on: error: ");
  } else {
    expect(
        "call #5 differs: rank(s) 0, 2: AllReduce(count=100, float, sum); rank(s) 1: AllReduce(count=200, float, "
        "sum)");
  }
  fs::remove_all(dir);
  std::printf("== %s: %s\n", name, bad ? "FAIL" : "ok");
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tool;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tool" && i + 1 < argc) tool = argv[++i];
    else if (a == "--transport" && i + 1 < argc && std::string(argv[++i]) == "tcp") setenv("HOCCL_SHM_DISABLE", "1", 1);
  }
  if (tool.empty()) {
    std::fprintf(stderr, "usage: mp_trace --tool PATH/hoccl-trace [--transport shm|tcp]\n");
    return 2;
  }
  setenv("HOCCL_TIMEOUT", "2", 1);
  for (const char* v : {"HOCCL_CHECK_MISMATCH", "HOCCL_TRACE_SIZE", "HOCCL_ALGO"}) unsetenv(v);
  int bad = scenario(tool, false);
  bad |= scenario(tool, true);
  std::printf("mp_trace: %s\n", bad ? "FAIL" : "PASS");
  return bad;
}
