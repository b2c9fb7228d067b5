/*
 * A verified PaRO training step on real processes.
 *
 * The parent forks R ranks (default 8) on loopback; rank r sets HOCCL_HOSTID=paro-host-<r/G> so that the ranks form
 * R/G emulated hosts of G ranks (PaRO groups), and HOCCL_ALGO=ring so that the bytes moved are the ring volumes
 * the mapper predicts. Every rank then trains the same synthetic model under each strategy:
 *   - C parameters (a few million, odd), initial weights w0(i) from a hash;
 *   - micro-step loss of rank r: sum_i c_i/2 * (w_i - t(r, step, micro, i))^2, so the gradient c_i*(w_i - t) needs
 *     the gathered parameters; targets from a hash, different on every rank, step and micro-step;
 *   - A micro-steps of gradient accumulation, then Adam in fp32 on the rank's optimizer shard with the mean gradient.
 * Checks, per strategy: final parameters equal NNN's (plain all-reduce data parallel) within fp32 tolerance and
 * are identical on every rank; rank 0 also checks them against a double-precision reference computed locally from
 * every rank's targets (no communication); the handle's byte counters equal the mapper's prediction exactly, in
 * total and per link class; bad arguments give clear errors.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hoccl/hoccl.h"
#include "hoccl/paro.h"
#include "paro/plan.h"
#include "paro/runtime.h"

namespace {

struct Config {
  int ranks = 8, group = 4, steps = 3, micro = 3;
  size_t count = 2000003;
  std::vector<std::string> strategies = {"NNN", "GGG", "NNG", "NGG", "III", "IIG", "NIG", "IGG", "ING"};
};

constexpr double kLr = 1e-2, kB1 = 0.9, kB2 = 0.999, kEps = 1e-3;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [-1, 1), exactly representable in float.
double unit(uint64_t h) { return static_cast<double>(mix(h) >> 40) / static_cast<double>(1ull << 23) - 1.0; }
double w0(size_t i) { return unit(i * 4 + 1); }
double target(int rank, int step, int micro, size_t i) {
  return unit((((static_cast<uint64_t>(rank) * 64 + step) * 64 + micro) << 32) ^ (i * 4 + 3));
}
double coef(size_t i) { return 0.5 + static_cast<double>(i % 7) * 0.25; }

int failures = 0;
#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++failures;                                                  \
      std::fprintf(stderr, "rank %d: FAILED %s: ", myRank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                           \
      std::fprintf(stderr, "\n");                                  \
    }                                                              \
  } while (0)
int myRank = -1;

void ok(hocclResult_t r, const char* what) {
  if (r != hocclSuccess) {
    std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", myRank, what, hocclGetErrorString(r),
                 hocclGetLastError(nullptr));
    std::exit(2);
  }
}

// The double-precision reference: every rank's gradients summed, Adam in double.
std::vector<double> reference(const Config& c) {
  std::vector<double> w(c.count), m(c.count, 0), v(c.count, 0);
  for (size_t i = 0; i < c.count; ++i) w[i] = static_cast<float>(w0(i));
  for (int s = 0; s < c.steps; ++s) {
    const double bc1 = 1 - std::pow(kB1, s + 1), bc2 = 1 - std::pow(kB2, s + 1);
    for (size_t i = 0; i < c.count; ++i) {
      double g = 0;
      for (int r = 0; r < c.ranks; ++r)
        for (int a = 0; a < c.micro; ++a) g += coef(i) * (w[i] - target(r, s, a, i));
      g /= c.ranks * c.micro;
      m[i] = kB1 * m[i] + (1 - kB1) * g;
      v[i] = kB2 * v[i] + (1 - kB2) * g * g;
      w[i] -= kLr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + kEps);
    }
  }
  return w;
}

struct Result {
  std::vector<float> params;  // full parameters after training (padded)
  double seconds = 0;
};

// Trains under one strategy; checks the counters against the mapper. Returns the final full parameters.
Result train(const Config& c, hocclComm_t comm, const std::string& name) {
  hocclParo_t paro = nullptr;
  ok(hocclParoCreate(comm, name.c_str(), hocclParoGroupHost, &paro), "hocclParoCreate");
  size_t padded = 0, pOff, pLen, gOff, gLen, oOff, oLen;
  ok(hocclParoPaddedCount(paro, c.count, &padded), "padded");
  ok(hocclParoShardRange(paro, hocclParoParams, c.count, &pOff, &pLen), "range P");
  ok(hocclParoShardRange(paro, hocclParoGrads, c.count, &gOff, &gLen), "range G");
  ok(hocclParoShardRange(paro, hocclParoOptim, c.count, &oOff, &oLen), "range OS");
  std::vector<float> pShard(pLen), full(padded, 0.f), grad(padded, 0.f), gTmp(gLen), gAcc(gLen);
  std::vector<float> optGrad(oLen), master(oLen), m(oLen, 0.f), v(oLen, 0.f);
  auto initial = [&](size_t i) { return i < c.count ? static_cast<float>(w0(i)) : 0.f; };
  for (size_t j = 0; j < pLen; ++j) pShard[j] = initial(pOff + j);
  for (size_t j = 0; j < oLen; ++j) master[j] = initial(oOff + j);
  ok(hocclParoResetCounters(paro), "reset counters");
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < c.steps; ++s) {
    std::fill(gAcc.begin(), gAcc.end(), 0.f);
    for (int a = 0; a < c.micro; ++a) {
      std::fill(full.begin(), full.end(), -7.f);  // the gathers must overwrite every element
      ok(hocclParoGatherParams(paro, pShard.data(), full.data(), c.count, hocclFloat, nullptr), "gather (fwd)");
      std::fill(full.begin(), full.end(), -7.f);
      ok(hocclParoGatherParams(paro, pShard.data(), full.data(), c.count, hocclFloat, nullptr), "gather (bwd)");
      for (size_t i = 0; i < c.count; ++i)
        grad[i] = static_cast<float>(coef(i)) * (full[i] - static_cast<float>(target(myRank, s, a, i)));
      ok(hocclParoReduceGrads(paro, grad.data(), gTmp.data(), c.count, hocclFloat, nullptr), "reduce grads");
      for (size_t j = 0; j < gLen; ++j) gAcc[j] += gTmp[j];
    }
    ok(hocclParoSyncGrads(paro, gAcc.data(), optGrad.data(), c.count, hocclFloat, nullptr), "sync grads");
    const float bc1 = static_cast<float>(1 - std::pow(kB1, s + 1)), bc2 = static_cast<float>(1 - std::pow(kB2, s + 1));
    const float scale = 1.f / static_cast<float>(c.ranks * c.micro);
    for (size_t j = 0; j < oLen; ++j) {
      const float g = optGrad[j] * scale;
      m[j] = static_cast<float>(kB1) * m[j] + static_cast<float>(1 - kB1) * g;
      v[j] = static_cast<float>(kB2) * v[j] + static_cast<float>(1 - kB2) * g * g;
      master[j] -= static_cast<float>(kLr) * (m[j] / bc1) / (std::sqrt(v[j] / bc2) + static_cast<float>(kEps));
    }
    ok(hocclParoRebuildParams(paro, master.data(), pShard.data(), c.count, hocclFloat, nullptr), "rebuild");
  }
  Result res;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Counters against the mapper: total and per link class.
  hocclCommCounters_t ctr{};
  ok(hocclParoGetCounters(paro, &ctr), "counters");
  unsigned long long predicted = 0;
  ok(hocclParoPredictBytes(paro, c.count, sizeof(float), c.micro, &predicted), "predict");
  predicted *= static_cast<unsigned long long>(c.steps);
  unsigned long long sent = 0, received = 0;
  for (int k = 0; k < hocclNumLinkClasses; ++k) {
    sent += ctr.bytesSent[k];
    received += ctr.bytesReceived[k];
  }
  EXPECT(sent == predicted, "%s: sent %llu bytes, the mapper predicted %llu", name.c_str(), sent, predicted);
  EXPECT(received == sent, "%s: received %llu bytes but sent %llu", name.c_str(), received, sent);
  using namespace hoccl::paro;
  ModelSize size;
  size.params = size.trainable = c.count;
  size.bytesP = size.bytesG = sizeof(float);
  const Layout layout = layoutOfComm(comm, GroupLevel::Host);
  const auto byClass = makePlan(layout, parseStrategy(name), size, c.micro).sentByClass(layout, myRank);
  for (int k = 0; k < hocclNumLinkClasses; ++k)
    EXPECT(ctr.bytesSent[k] == byClass[k] * c.steps, "%s: link class %d: sent %llu, predicted %llu", name.c_str(), k,
           ctr.bytesSent[k], static_cast<unsigned long long>(byClass[k] * c.steps));
  if (myRank == 0)
    std::printf("%-4s sent/rank/step %12llu B (predicted %12llu)  intra-host %12llu  inter-host %12llu  %.2f s\n",
                name.c_str(), sent / c.steps, predicted / c.steps, ctr.bytesSent[hocclLinkIntraHost] / c.steps,
                (ctr.bytesSent[hocclLinkIntraSwitch] + ctr.bytesSent[hocclLinkInterSwitch]) / c.steps, res.seconds);
  // Final parameters: gather once more (after the counters were read).
  std::fill(full.begin(), full.end(), -7.f);
  ok(hocclParoGatherParams(paro, pShard.data(), full.data(), c.count, hocclFloat, nullptr), "final gather");
  res.params = full;
  ok(hocclParoDestroy(paro), "destroy");
  return res;
}

void checkErrors(hocclComm_t comm) {
  hocclParo_t paro = reinterpret_cast<hocclParo_t>(0x1);
  EXPECT(hocclParoCreate(comm, "NXG", hocclParoGroupHost, &paro) == hocclInvalidArgument, "bad strategy accepted");
  EXPECT(paro == nullptr, "a handle came back from a failed create");
  EXPECT(std::strstr(hocclGetLastError(nullptr), "'NXG'") != nullptr, "last error: %s", hocclGetLastError(nullptr));
  EXPECT(hocclParoCreate(nullptr, "IIG", hocclParoGroupHost, &paro) == hocclInvalidArgument, "null comm accepted");
  EXPECT(hocclParoCreate(comm, "IIG", static_cast<hocclParoGroupLevel_t>(7), &paro) == hocclInvalidArgument,
         "bad level accepted");
  char canon[4];
  EXPECT(hocclParoStrategyParse("zero3", canon) == hocclSuccess && std::string(canon) == "GGG", "zero3");
  EXPECT(hocclParoGatherParams(nullptr, nullptr, nullptr, 1, hocclFloat, nullptr) == hocclInvalidArgument, "null");
}

int child(const Config& c, int rank) {
  myRank = rank;
  setenv("HOCCL_RANK", std::to_string(rank).c_str(), 1);
  setenv("HOCCL_HOSTID", ("paro-host-" + std::to_string(rank / c.group)).c_str(), 1);
  setenv("HOCCL_ALGO", "ring", 1);
  hocclComm_t comm = nullptr;
  int r = 0, n = 0;
  ok(hocclCommInitFromEnv(&comm, &r, &n), "hocclCommInitFromEnv");
  checkErrors(comm);
  std::vector<double> ref;
  if (rank == 0) ref = reference(c);
  std::vector<float> nnn;
  for (const auto& name : c.strategies) {
    Result res = train(c, comm, name);
    if (nnn.empty()) nnn = res.params;  // the first strategy (NNN) is the yardstick
    double vsNnn = 0, vsRef = 0;
    for (size_t i = 0; i < c.count; ++i) {
      const double d = std::fabs(res.params[i] - nnn[i]);
      vsNnn = std::max(vsNnn, d);
      EXPECT(d <= 1e-5 + 1e-4 * std::fabs(nnn[i]), "%s: param %zu = %.9g, NNN has %.9g", name.c_str(), i, res.params[i],
             nnn[i]);
      if (d > 1e-5 + 1e-4 * std::fabs(nnn[i])) break;
      if (rank == 0) {
        const double e = std::fabs(res.params[i] - ref[i]);
        vsRef = std::max(vsRef, e);
        EXPECT(e <= 1e-5 + 1e-4 * std::fabs(ref[i]), "%s: param %zu = %.9g, reference %.9g", name.c_str(), i,
               res.params[i], ref[i]);
        if (e > 1e-5 + 1e-4 * std::fabs(ref[i])) break;
      }
    }
    for (size_t i = c.count; i < res.params.size(); ++i) EXPECT(res.params[i] == 0.f, "%s: padding", name.c_str());
    // Every rank must hold the same bits: compare with rank 0's copy.
    std::vector<float> root = res.params;
    ok(hocclBroadcast(root.data(), root.data(), root.size(), hocclFloat, 0, comm, nullptr), "broadcast");
    EXPECT(std::memcmp(root.data(), res.params.data(), root.size() * sizeof(float)) == 0,
           "%s: ranks disagree on the final parameters", name.c_str());
    if (rank == 0)
      std::printf("%-4s max |p - p_NNN| = %.3g, max |p - p_ref(double)| = %.3g\n", name.c_str(), vsNnn, vsRef);
    std::fflush(stdout);
  }
  ok(hocclCommDestroy(comm), "destroy");
  return failures ? 1 : 0;
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("paro_train: cannot find a free loopback port");
    std::exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--count") c.count = std::stoull(v);
    else if (k == "--steps") c.steps = std::stoi(v);
    else if (k == "--micro-steps") c.micro = std::stoi(v);
    else if (k == "--strategies") {
      c.strategies.clear();
      for (size_t p = 0; p <= v.size();) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        c.strategies.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--count N] [--steps S] [--micro-steps A] [--strategies NNN,IIG,...]\n", argv[0]);
      return 2;
    }
  }
  setenv("HOCCL_WORLD_SIZE", std::to_string(c.ranks).c_str(), 1);
  setenv("HOCCL_COMM_ID", ("127.0.0.1:" + std::to_string(freePort())).c_str(), 1);
  setenv("HOCCL_AUTH_TOKEN", std::to_string(mix(static_cast<uint64_t>(getpid()) ^ time(nullptr))).c_str(), 1);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < c.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(child(c, r));
    pids.push_back(pid);
  }
  // Wait (bounded); a rank that fails or hangs stops the others.
  int worst = 0, left = c.ranks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(280);
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      for (int r = 0; r < c.ranks; ++r)
        if (pids[r] == pid && code != 0) std::fprintf(stderr, "paro_train: rank %d exited with %d\n", r, code);
      if (code != 0 && worst == 0) {
        worst = code;
        for (pid_t p : pids) kill(p, SIGTERM);
      }
    } else if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "paro_train: ranks still running after 280 s: killing them\n");
      for (pid_t p : pids) kill(p, SIGKILL);
      worst = worst ? worst : 124;
      while (waitpid(-1, nullptr, 0) > 0) {
      }
      break;
    } else {
      usleep(20000);
    }
  }
  std::printf("%s\n", worst == 0 ? "paro_train: all strategies match NNN and the reference; counters match the plan"
                                 : "paro_train: FAILED");
  return worst;
}
