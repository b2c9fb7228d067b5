#include "comm/launcher_env.h"

#include <cstdlib>

#include "base/error.h"

namespace hoccl {
namespace {

std::optional<int> intFromEnv(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24))
    throwInvalidArgument(std::string(name) + "='" + v + "' is not a valid rank or size");
  return static_cast<int>(x);
}

}  // namespace

std::optional<LauncherRank> launcherRank() {
  static const char* const kPairs[][2] = {{"HOCCL_RANK", "HOCCL_WORLD_SIZE"},
                                          {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& pair : kPairs) {
    auto rank = intFromEnv(pair[0]);
    auto size = intFromEnv(pair[1]);
    if (rank && size) {
      if (*rank >= *size)
        throwInvalidArgument(std::string(pair[0]) + "=" + std::to_string(*rank) + " is not below " + pair[1] + "=" +
                             std::to_string(*size));
      return LauncherRank{*rank, *size, std::string(pair[0]) + "/" + pair[1]};
    }
  }
  return std::nullopt;
}

}  // namespace hoccl
