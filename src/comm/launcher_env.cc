// Reading a launcher's variables (with a record of what was read, for messages) and trying the table of launchers
// in order.
#include "comm/launcher_env.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "base/error.h"

namespace hoccl {

std::optional<std::string> LauncherVars::text(const char* name) {
  const char* v = std::getenv(name);
  std::optional<std::string> value;
  if (v && *v) value = v;
  note(name, value);
  return value;
}

std::optional<int64_t> LauncherVars::integer(const char* name, int64_t lo, int64_t hi) {
  auto t = text(name);
  if (!t) return std::nullopt;
  int64_t x = 0;
  const char* end = t->data() + t->size();
  auto [p, ec] = std::from_chars(t->data(), end, x);
  if (ec != std::errc() || p != end || x < lo || x > hi)
    throwInvalidArgument(
        fmt::format("{}='{}' is not valid: expected an integer in [{}, {}] (launcher variables read: {})", name, *t, lo,
                    hi, summary()));
  return x;
}

void LauncherVars::note(const std::string& name, const std::optional<std::string>& value) {
  for (const auto& r : read_)
    if (r.first == name) return;
  read_.emplace_back(name, value);
}

std::string LauncherVars::summary() const {
  std::string out;
  for (const auto& [name, value] : read_) {
    if (!out.empty()) out += ", ";
    out += value ? fmt::format("{}={}", name, *value) : name + " (unset)";
  }
  return out;
}

std::optional<LauncherInfo> detectLauncher() {
  for (const LauncherEntry& e : launcherTable()) {
    LauncherVars vars;
    if (auto info = e.probe(vars)) {
      if (info->launcher.empty()) info->launcher = e.name;  // a probe may hand over to another (PMIx under srun)
      info->vars = vars.summary();
      return info;
    }
  }
  return std::nullopt;
}

std::optional<LauncherRank> launcherRank() {
  auto info = detectLauncher();
  if (!info) return std::nullopt;
  return LauncherRank{info->rank, info->size, info->launcher};
}

}  // namespace hoccl
