/// @file hoccl_run.cc
/// hoccl-run: starts N local ranks of a program with the launcher environment of hoccl
/// (HOCCL_RANK, HOCCL_WORLD_SIZE, HOCCL_LOCAL_RANK, HOCCL_LOCAL_SIZE, HOCCL_COMM_ID, HOCCL_AUTH_TOKEN), optionally
/// prefixes their output lines with "[rank] ", and supervises them: the first rank that fails (non-zero exit or a
/// signal) is named, the others get SIGTERM and, after a grace period, SIGKILL. SIGINT/SIGTERM sent to hoccl-run
/// are forwarded. The exit code is the worst one among ranks that ended on their own (128+signal for a signal),
/// 124 after --timeout. `--params` lists hoccl's parameters instead (base/param_list.h); `--params=markdown` prints
/// them as the README's table.
///
/// Each rank runs in its own process group, so that signals reach the programs it starts too.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "tools/launcher/param_table.h"

extern char** environ;

namespace {

/// Command line of hoccl-run.
struct Options {
  int np = 0;
  bool prefix = false;
  double timeoutSec = 0;
  double graceSec = 3;
  std::vector<std::string> env;
  bool hostidPerRank = false;
  std::string params;  // "" (run a program), "text" or "markdown"
  std::vector<std::string> command;
};

/// One rank's process and its output pipes.
struct Rank {
  pid_t pid = -1;
  bool alive = false;
  bool killedByUs = false;  // ended after we sent it a terminating signal
  int status = 0;           // waitpid status
  int fd[2] = {-1, -1};     // read ends of stdout / stderr pipes (prefix mode)
  std::string partial[2];   // incomplete last line per stream
};

int gSignalPipe[2] = {-1, -1};

void onSignal(int sig) {
  int saved = errno;
  unsigned char c = static_cast<unsigned char>(sig);
  (void)!write(gSignalPipe[1], &c, 1);
  errno = saved;
}

double nowSec() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return fmt::format("SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(), desc ? desc : "unknown");
}

/// Picks a free TCP port on 127.0.0.1 for the bootstrap root (rank 0 binds it shortly after).
int pickFreePort() {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

/// 128 random bits as 32 hex digits.
std::string randomToken() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("getrandom failed: {}", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

/// The environment of rank r: ours, with the launcher variables and the --env settings on top.
std::vector<std::string> rankEnvironment(const Options& o, int r, const std::string& commId, const std::string& token) {
  std::vector<std::pair<std::string, std::string>> set = {
      {"HOCCL_RANK", std::to_string(r)},
      {"HOCCL_WORLD_SIZE", std::to_string(o.np)},
      {"HOCCL_LOCAL_RANK", std::to_string(o.hostidPerRank ? 0 : r)},
      {"HOCCL_LOCAL_SIZE", std::to_string(o.hostidPerRank ? 1 : o.np)},
      {"HOCCL_COMM_ID", commId},
      {"HOCCL_AUTH_TOKEN", token},
  };
  if (o.hostidPerRank) set.push_back({"HOCCL_HOSTID", fmt::format("hoccl-run-host{}", r)});
  for (const auto& kv : o.env) {
    size_t eq = kv.find('=');
    set.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
  }
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& s : set) overridden = overridden || s.first == key;
    if (!overridden) out.push_back(entry);
  }
  for (const auto& s : set) {
    // a later setting of the same key wins (--env may override the launcher's own values)
    for (auto it = out.begin(); it != out.end();) {
      if (it->compare(0, s.first.size() + 1, s.first + "=") == 0) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
    out.push_back(s.first + "=" + s.second);
  }
  return out;
}

/// Forks and execs rank r. In the child only async-signal-safe calls are made before exec.
void startRank(const Options& o, int r, Rank* rank, const std::vector<std::string>& env) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (o.prefix && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0))
    throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  std::vector<char*> argv, envp;
  for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string failMsg = fmt::format("hoccl-run: rank {}: cannot execute '{}': ", r, o.command[0]);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (o.prefix) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
    }
    execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    (void)!write(STDERR_FILENO, failMsg.data(), failMsg.size());
    const char* es = strerror(e);
    (void)!write(STDERR_FILENO, es, std::strlen(es));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);
  rank->pid = pid;
  rank->alive = true;
  if (o.prefix) {
    close(out[1]);
    close(err[1]);
    rank->fd[0] = out[0];
    rank->fd[1] = err[0];
  }
}

/// Writes complete lines of `text` with the rank prefix; keeps an unfinished line for later.
void emitLines(int r, int stream, Rank* rank, const char* data, size_t n, bool eof) {
  std::string& buf = rank->partial[stream];
  buf.append(data, n);
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
    out += fmt::format("[{}] {}\n", r, std::string_view(buf).substr(start, nl - start));
  buf.erase(0, start);
  if (eof && !buf.empty()) {
    out += fmt::format("[{}] {}\n", r, buf);
    buf.clear();
  }
  if (out.empty()) return;
  int fd = stream == 0 ? STDOUT_FILENO : STDERR_FILENO;
  for (size_t off = 0; off < out.size();) {
    ssize_t w = write(fd, out.data() + off, out.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

/// The supervisor: pumps output, reaps ranks, handles failures, signals and the timeout.
class Supervisor {
 public:
  explicit Supervisor(const Options& o) : o_(o), ranks_(o.np) {}
  int run();

 private:
  void pumpOutput(int timeoutMs);
  void reap();
  void onRankEnded(int r);
  void terminateAll(int sig, const char* why);
  bool anyAlive() const;
  bool anyPipeOpen() const;
  int exitCode() const;

  const Options& o_;
  std::vector<Rank> ranks_;
  bool terminating_ = false;
  bool killed_ = false;
  bool timedOut_ = false;
  int forwardedSignal_ = 0;
  double termDeadline_ = 0;
};

bool Supervisor::anyAlive() const {
  for (const auto& r : ranks_)
    if (r.alive) return true;
  return false;
}

bool Supervisor::anyPipeOpen() const {
  for (const auto& r : ranks_)
    if (r.fd[0] >= 0 || r.fd[1] >= 0) return true;
  return false;
}

void Supervisor::terminateAll(int sig, const char* why) {
  for (auto& r : ranks_) {
    if (!r.alive) continue;
    if (sig != SIGINT) r.killedByUs = true;
    kill(-r.pid, sig);
  }
  if (!terminating_ && why != nullptr) {
    fmt::print(stderr, "hoccl-run: {}\n", why);
    std::fflush(stderr);
  }
  if (!terminating_) {
    terminating_ = true;
    termDeadline_ = nowSec() + o_.graceSec;
  }
}

// What became of a crashed rank's core: " (core dumped)", or where a crashing signal left none because the core size
// limit is 0, how to keep one next time; "" for other endings.
std::string coreNote(int status) {
  if (!WIFSIGNALED(status)) return "";
  if (WCOREDUMP(status)) return " (core dumped)";
  const int sig = WTERMSIG(status);
  if (sig != SIGSEGV && sig != SIGBUS && sig != SIGABRT && sig != SIGILL && sig != SIGFPE) return "";
  rlimit core{};
  if (getrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_cur != 0) return "";
  return " (no core was written: the core size limit is 0; run `ulimit -c unlimited` before hoccl-run to keep one "
         "for gdb)";
}

void Supervisor::onRankEnded(int r) {
  Rank& k = ranks_[r];
  k.alive = false;
  bool failed = WIFSIGNALED(k.status) || (WIFEXITED(k.status) && WEXITSTATUS(k.status) != 0);
  if (!failed || k.killedByUs || terminating_) return;
  std::string how = WIFSIGNALED(k.status)
                        ? "was killed by signal " + signalName(WTERMSIG(k.status)) + coreNote(k.status)
                        : fmt::format("exited with code {}", WEXITSTATUS(k.status));
  std::string msg = fmt::format("rank {} (pid {}) {}; stopping the other ranks (SIGTERM, SIGKILL after {} s)", r, k.pid,
                                how, o_.graceSec);
  terminateAll(SIGTERM, msg.c_str());
}

void Supervisor::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (int r = 0; r < o_.np; ++r) {
      if (ranks_[r].pid == pid && ranks_[r].alive) {
        ranks_[r].status = status;
        onRankEnded(r);
      }
    }
  }
}

void Supervisor::pumpOutput(int timeoutMs) {
  std::vector<pollfd> fds{{gSignalPipe[0], POLLIN, 0}};
  std::vector<std::pair<int, int>> owners{{-1, -1}};
  for (int r = 0; r < o_.np; ++r) {
    for (int s = 0; s < 2; ++s) {
      if (ranks_[r].fd[s] < 0) continue;
      fds.push_back({ranks_[r].fd[s], POLLIN, 0});
      owners.push_back({r, s});
    }
  }
  if (poll(fds.data(), fds.size(), timeoutMs) <= 0) return;
  char buf[65536];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (i == 0) {
      for (ssize_t j = 0; j < n; ++j) {
        forwardedSignal_ = buf[j];
        std::string why = fmt::format("received {}; forwarding it to every rank", signalName(buf[j]));
        terminateAll(buf[j], why.c_str());
      }
      continue;
    }
    auto [r, s] = owners[i];
    emitLines(r, s, &ranks_[r], buf, n > 0 ? static_cast<size_t>(n) : 0, n <= 0);
    if (n <= 0) {
      close(ranks_[r].fd[s]);
      ranks_[r].fd[s] = -1;
    }
  }
}

int Supervisor::exitCode() const {
  if (forwardedSignal_ != 0) return 128 + forwardedSignal_;
  int worst = 0;
  for (const auto& r : ranks_) {
    if (r.killedByUs && WIFSIGNALED(r.status)) continue;
    int code = WIFSIGNALED(r.status) ? 128 + WTERMSIG(r.status) : WEXITSTATUS(r.status);
    worst = std::max(worst, code);
  }
  if (timedOut_ && worst == 0) return 124;
  return worst;
}

int Supervisor::run() {
  int port = pickFreePort();
  if (port < 0) throw std::runtime_error(fmt::format("cannot find a free port on 127.0.0.1: {}", std::strerror(errno)));
  std::string commId = fmt::format("127.0.0.1:{}", port), token = randomToken();
  for (int r = 0; r < o_.np; ++r) startRank(o_, r, &ranks_[r], rankEnvironment(o_, r, commId, token));
  const double start = nowSec();
  double drainUntil = 0;
  while (anyAlive() || anyPipeOpen()) {
    pumpOutput(50);
    reap();
    double now = nowSec();
    if (!anyAlive()) {  // a grandchild may hold a pipe open: give output one more second, then stop
      if (drainUntil == 0) drainUntil = now + 1;
      if (now > drainUntil) break;
      continue;
    }
    if (o_.timeoutSec > 0 && !terminating_ && now - start > o_.timeoutSec) {
      std::string still;
      for (int r = 0; r < o_.np; ++r)
        if (ranks_[r].alive) still += fmt::format(" {}", r);
      timedOut_ = true;
      std::string why = fmt::format("timeout: the job ran longer than --timeout {} s; ranks still running:{}",
                                    o_.timeoutSec, still);
      terminateAll(SIGTERM, why.c_str());
    }
    if (terminating_ && !killed_ && now > termDeadline_) {
      killed_ = true;
      fmt::print(stderr, "hoccl-run: ranks still running {} s after SIGTERM; sending SIGKILL\n", o_.graceSec);
      for (auto& r : ranks_) r.killedByUs = r.killedByUs || r.alive;
      for (auto& r : ranks_)
        if (r.alive) kill(-r.pid, SIGKILL);
    }
  }
  for (auto& r : ranks_) {
    for (int& fd : r.fd) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    if (!r.partial[0].empty()) emitLines(static_cast<int>(&r - ranks_.data()), 0, &r, "", 0, true);
    if (!r.partial[1].empty()) emitLines(static_cast<int>(&r - ranks_.data()), 1, &r, "", 0, true);
  }
  return exitCode();
}

/// Parses the command line; returns -1 to go on or an exit code.
int parse(int argc, char** argv, Options* o) {
  CLI::App app{"hoccl-run: start N local ranks of a program with hoccl's launcher environment", "hoccl-run"};
  app.add_option("-n,--np", o->np, "number of ranks to start")->check(CLI::Range(1, 4096));
  app.add_flag("-p,--prefix", o->prefix, "prefix every output line with [rank]");
  app.add_option("--timeout", o->timeoutSec, "stop the job after this many seconds (exit code 124)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--grace", o->graceSec, "seconds between SIGTERM and SIGKILL when stopping ranks (default 3)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--env", o->env, "set K=V in every rank's environment (repeatable)")->allow_extra_args(false);
  app.add_flag("--hostid-per-rank", o->hostidPerRank, "give every rank its own HOCCL_HOSTID (emulate N hosts)");
  app.add_flag("--params{text}", o->params,
               "list hoccl's parameters (type, default, range, documentation); --params=markdown prints the "
               "README's table");
  app.prefix_command();
  app.footer(
      "Usage: hoccl-run -n 4 [-p] [--timeout S] [--env K=V]... -- PROGRAM ARGS...\n"
      "Ranks on several hosts: start them with srun, mpirun or torchrun, whose variables hoccl reads "
      "(docs/launchers.md).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o->command = app.remaining();
  if (!o->command.empty() && o->command[0] == "--") o->command.erase(o->command.begin());
  if (o->params == "text" || o->params == "markdown") return -1;
  if (!o->params.empty()) {
    fmt::print(stderr, "hoccl-run: --params={}: expected --params or --params=markdown\n", o->params);
    return 2;
  }
  for (const auto& kv : o->env) {
    if (kv.find('=') == std::string::npos || kv.front() == '=') {
      fmt::print(stderr, "hoccl-run: --env '{}': expected NAME=VALUE\n", kv);
      return 2;
    }
  }
  if (o->np < 1 || o->command.empty()) {
    fmt::print(stderr, "hoccl-run: need -n N and a program, e.g. hoccl-run -n 4 -- ./all_reduce_perf -b 8 -e 1M\n");
    return 2;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int rc = parse(argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.params.empty()) {
    fmt::print("{}", o.params == "markdown" ? hoccl::tools::paramsMarkdown() : hoccl::tools::paramsText());
    return 0;
  }
  if (pipe2(gSignalPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fmt::print(stderr, "hoccl-run: pipe failed: {}\n", std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  try {
    Supervisor sup(o);
    return sup.run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "hoccl-run: {}\n", e.what());
    return 1;
  }
}
