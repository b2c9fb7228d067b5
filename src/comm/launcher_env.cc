#include "comm/launcher_env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/error.h"
#include "base/params.h"

namespace hoccl {
namespace {

// Another launcher's variable (not one of hoccl's parameters), held to the range of the matching parameter.
std::optional<int64_t> intFromEnv(const char* name, const params::IntParam& like) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < like.lo() || x > like.hi())
    throwInvalidArgument(fmt::format("{}='{}' is not valid: expected an integer in [{}, {}] ({})", name, v, like.lo(),
                                     like.hi(), like.doc()));
  return x;
}

// A complete pair, checked; nullopt when either half is missing.
std::optional<LauncherRank> pair(std::optional<int64_t> rank, std::optional<int64_t> size, const char* rankVar,
                                 const char* sizeVar) {
  if (!rank || !size) return std::nullopt;
  if (*rank >= *size) throwInvalidArgument(fmt::format("{}={} is not below {}={}", rankVar, *rank, sizeVar, *size));
  return LauncherRank{static_cast<int>(*rank), static_cast<int>(*size), std::string(rankVar) + "/" + sizeVar};
}

}  // namespace

std::optional<LauncherRank> launcherRank() {
  if (auto lr = pair(params::RANK.value(), params::WORLD_SIZE.value(), "HOCCL_RANK", "HOCCL_WORLD_SIZE")) return lr;
  static const char* const kOthers[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           {"PMI_RANK", "PMI_SIZE"},
                                           {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& names : kOthers) {
    if (auto lr = pair(intFromEnv(names[0], params::RANK), intFromEnv(names[1], params::WORLD_SIZE), names[0],
                       names[1]))
      return lr;
  }
  return std::nullopt;
}

}  // namespace hoccl
