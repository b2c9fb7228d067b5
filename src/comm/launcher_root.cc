// Where a launched job's bootstrap root is, and its secret: the same computation on every rank, from the variables
// that the launcher gives every rank alike.
#include "comm/launcher_root.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl {
namespace {

std::string withPort(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return ipv6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

[[noreturn]] void noRoot(const LauncherInfo& info, const std::string& missing) {
  throwInvalidUsage(fmt::format(
      "rank {} of {} (started by {}): cannot find the job's root address: {}. Variables read: {}, HOCCL_COMM_ID "
      "(unset), HOCCL_PORT{}. Hint: {}; docs/launchers.md lists what each launcher needs",
      info.rank, info.size, info.launcher, missing, info.vars,
      params::PORT.value() ? "=" + std::to_string(*params::PORT.value()) : std::string(" (unset)"), info.rootHint));
}

}  // namespace

std::string launcherRootAddress(const LauncherInfo& info) {
  if (auto commId = params::COMM_ID.value()) return *commId;
  std::string host = info.rootHost;
  if (host.empty() && info.allLocal()) host = "127.0.0.1";
  if (host.empty()) noRoot(info, "the launcher does not say which host rank 0 runs on");
  int port = 0;
  if (auto p = params::PORT.value()) {
    port = static_cast<int>(*p);
  } else if (info.rootPort) {
    port = *info.rootPort;
  } else if (!info.jobKey.empty()) {
    port = kLauncherPortBase + static_cast<int>(fnv1a(info.jobKey) % kLauncherPortRange);
  } else {
    noRoot(info, fmt::format("the root host is {} but no port rule applies (no job id)", host));
  }
  return withPort(host, port);
}

std::string launcherToken(const LauncherInfo& info, const std::string& rootAddress) {
  if (auto token = params::AUTH_TOKEN.value()) return *token;
  return fmt::format("launcher {} job '{}' root {}", info.launcher, info.jobKey, rootAddress);
}

boot::UniqueId launcherUniqueId(int rank, int nranks) {
  auto commId = params::COMM_ID.value();
  auto token = params::AUTH_TOKEN.value();
  if (commId && token) return boot::uniqueIdFor(*commId, *token, rank, "HOCCL_COMM_ID");
  std::optional<LauncherInfo> info = detectLauncher();
  if (nranks == 1 && !commId) {
    if (info && info->size > 1)
      throwInvalidUsage(fmt::format(
          "a 1-rank communicator was asked for, but {} started {} processes (read: {}): pass the job's size",
          info->launcher, info->size, info->vars));
    return boot::createUniqueId();
  }
  if (!info) return boot::uniqueIdFromEnvironment(rank);  // its message says what to set
  const std::string root = launcherRootAddress(*info);
  if (!token)
    HOCCL_INFO(kBootstrap,
               "HOCCL_AUTH_TOKEN is unset: the bootstrap secret is derived from {}'s job id and the root address "
               "(it keeps jobs apart but is not secret; set HOCCL_AUTH_TOKEN to a random value on shared networks)",
               info->launcher);
  const std::string origin = commId ? "HOCCL_COMM_ID" : fmt::format("from {}: {}", info->launcher, info->vars);
  try {
    return boot::uniqueIdFor(root, launcherToken(*info, root), rank, origin);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} (the job's root address {} comes {}; set HOCCL_PORT or HOCCL_COMM_ID to "
                                      "choose another)",
                                      e.what(), root, commId ? "from HOCCL_COMM_ID" : origin));
  }
}

}  // namespace hoccl
