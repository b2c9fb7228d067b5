/// @file log.h
/// Levelled, subsystem-filtered logging: HOCCL_DEBUG=VERSION|WARN|INFO|TRACE, HOCCL_DEBUG_SUBSYS=INIT,COLL,...
/// (a leading ^ inverts), HOCCL_DEBUG_FILE (%h host, %p pid). The level is checked before any formatting.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace hoccl::log {

/// Log levels, lowest first.
enum class Level { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

/// Subsystems (a bit mask), named as NCCL names them where they exist.
enum Subsys : unsigned {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2P = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kGraph = 1u << 5,
  kTuning = 1u << 6,
  kEnv = 1u << 7,
  kAlloc = 1u << 8,
  kCall = 1u << 9,
  kBootstrap = 1u << 10,
  kTopo = 1u << 11,
  kParo = 1u << 12,
  kAll = ~0u
};

/// True when a message of this level and subsystem would be written (cheap: reads cached settings).
bool enabled(Level level, unsigned subsys);
/// Writes one line (prefix host:pid:tid [rank] LEVEL SUBSYS) to the configured sink.
void write(Level level, unsigned subsys, std::string_view message);
/// Sets the rank shown in this thread's log lines (-1 = unknown).
void setThreadRank(int rank);
/// Re-reads the environment (for tests and the shim's ncclResetDebugInit).
void resetFromEnvironment();

}  // namespace hoccl::log

/// Logs at WARN for subsystem SUB (a hoccl::log::Subsys value) with fmt-style arguments.
#define HOCCL_WARN(SUB, ...) HOCCL_LOG_AT(::hoccl::log::Level::Warn, SUB, __VA_ARGS__)
/// Logs at INFO.
#define HOCCL_INFO(SUB, ...) HOCCL_LOG_AT(::hoccl::log::Level::Info, SUB, __VA_ARGS__)
/// Logs at TRACE.
#define HOCCL_TRACE(SUB, ...) HOCCL_LOG_AT(::hoccl::log::Level::Trace, SUB, __VA_ARGS__)
/// Logs at LEVEL if enabled; arguments are not evaluated otherwise.
#define HOCCL_LOG_AT(LEVEL, SUB, ...)                                            \
  do {                                                                           \
    if (::hoccl::log::enabled(LEVEL, ::hoccl::log::SUB))                         \
      ::hoccl::log::write(LEVEL, ::hoccl::log::SUB, ::fmt::format(__VA_ARGS__)); \
  } while (0)
