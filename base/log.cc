// Logging: settings read once from the environment (and again on resetFromEnvironment), level checked first.
#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>

#include "base/params.h"

namespace hoccl::log {
namespace {

struct Settings {
  std::atomic<int> level{-1};  // -1: not read yet
  std::atomic<unsigned> mask{kAll};
  FILE* out = stderr;
  std::mutex writeMutex;
};

Settings& settings() {
  static Settings& s = *new Settings;  // never destroyed: detached threads may log while the process exits
  return s;
}

thread_local int threadRank = -1;

struct SubsysName {
  unsigned bit;
  const char* name;
};
constexpr SubsysName kNames[] = {
    {kInit, "INIT"},           {kColl, "COLL"},     {kP2P, "P2P"},  {kShm, "SHM"},     {kNet, "NET"},
    {kGraph, "GRAPH"},         {kTuning, "TUNING"}, {kEnv, "ENV"},  {kAlloc, "ALLOC"}, {kCall, "CALL"},
    {kBootstrap, "BOOTSTRAP"}, {kTopo, "TOPO"},     {kParo, "PARO"}};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

unsigned parseMask(std::string text) {
  bool invert = !text.empty() && text[0] == '^';
  if (invert) text.erase(0, 1);
  unsigned mask = 0;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = upper(item);
    if (item == "ALL") mask = kAll;
    for (const auto& n : kNames)
      if (item == n.name) mask |= n.bit;
  }
  return invert ? ~mask : mask;
}

std::string expandFileName(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        out += host;
      } else if (c == 'p') {
        out += std::to_string(getpid());
      } else {
        out += c;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void readEnvironment(Settings& s) {
  std::string lvl = upper(params::DEBUG.get());
  int level = static_cast<int>(Level::None);
  if (lvl == "VERSION") level = static_cast<int>(Level::Version);
  else if (lvl == "WARN") level = static_cast<int>(Level::Warn);
  else if (lvl == "INFO") level = static_cast<int>(Level::Info);
  else if (lvl == "TRACE") level = static_cast<int>(Level::Trace);
  s.mask.store(parseMask(params::DEBUG_SUBSYS.get()));
  std::string file = params::DEBUG_FILE.get();
  if (!file.empty()) {
    if (FILE* f = std::fopen(expandFileName(file).c_str(), "a")) {
      if (s.out != stderr) std::fclose(s.out);
      s.out = f;
    }
  }
  s.level.store(level);
}

const char* levelName(Level level) {
  switch (level) {
    case Level::Version: return "VERSION";
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Trace: return "TRACE";
    default: return "";
  }
}

const char* subsysName(unsigned subsys) {
  for (const auto& n : kNames)
    if (subsys & n.bit) return n.name;
  return "ALL";
}

}  // namespace

bool enabled(Level level, unsigned subsys) {
  Settings& s = settings();
  int current = s.level.load(std::memory_order_relaxed);
  if (current < 0) {
    static std::once_flag once;
    std::call_once(once, [&] { readEnvironment(s); });
    current = s.level.load();
  }
  if (static_cast<int>(level) > current) return false;
  return level <= Level::Warn || (s.mask.load(std::memory_order_relaxed) & subsys) != 0;
}

void write(Level level, unsigned subsys, std::string_view message) {
  Settings& s = settings();
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::string line = fmt::format("{}:{}:{} [{}] hoccl {} {} {}\n", host, getpid(),
                                 static_cast<long>(syscall(SYS_gettid)), threadRank, levelName(level),
                                 subsysName(subsys), message);
  std::lock_guard<std::mutex> lock(s.writeMutex);
  std::fputs(line.c_str(), s.out);
  std::fflush(s.out);
}

void setThreadRank(int rank) { threadRank = rank; }

void resetFromEnvironment() { readEnvironment(settings()); }

}  // namespace hoccl::log
