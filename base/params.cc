// Typed parameters: reading HOCCL_<NAME> (or NCCL_<NAME>) from the environment, parsing and range-checking integers,
// and the list of every declaration (base/param_list.h).
#include "base/params.h"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>

#include "base/error.h"

namespace hoccl::params {
namespace {

std::atomic<bool> ncclNames{false};

const char* envValue(const std::string& variable) {
  const char* v = std::getenv(variable.c_str());
  return v && *v ? v : nullptr;
}

// Where a parameter's value came from: "HOCCL_TIMEOUT" or "NCCL_TIMEOUT", and its (non-empty) text.
struct Setting {
  std::string variable;
  std::string text;
};

// The non-empty value of HOCCL_<name>, else (when enabled) of NCCL_<name>.
std::optional<Setting> lookup(const char* name) {
  std::string variable = std::string("HOCCL_") + name;
  if (const char* v = envValue(variable)) return Setting{variable, v};
  if (ncclNames.load(std::memory_order_relaxed)) {
    variable = std::string("NCCL_") + name;
    if (const char* v = envValue(variable)) return Setting{variable, v};
  }
  return std::nullopt;
}

// A decimal or 0x-hexadecimal integer with an optional sign, nothing else (no spaces, no suffix, no octal).
std::optional<int64_t> parseInteger(const std::string& text) {
  const char* p = text.data();
  const char* end = p + text.size();
  bool negative = false;
  if (p != end && (*p == '+' || *p == '-')) negative = *p++ == '-';
  int base = 10;
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (p == end) return std::nullopt;
  uint64_t magnitude = 0;
  auto [stop, ec] = std::from_chars(p, end, magnitude, base);
  if (ec != std::errc() || stop != end) return std::nullopt;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (magnitude > kMax + (negative ? 1 : 0)) return std::nullopt;
  if (!negative) return static_cast<int64_t>(magnitude);
  return magnitude == kMax + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(magnitude);
}

ParamInfo describe(const IntParam& p) {
  ParamInfo info{p.name(), Type::Int, p.defaultValue() ? std::to_string(*p.defaultValue()) : "", p.doc()};
  info.integer = &p;
  return info;
}

ParamInfo describe(const StringParam& p) {
  ParamInfo info{p.name(), Type::String, p.defaultValue(), p.doc()};
  info.text = &p;
  return info;
}

}  // namespace

bool IntParam::isSet() const { return lookup(name_).has_value(); }

std::optional<int64_t> IntParam::value() const {
  auto setting = lookup(name_);
  if (!setting) return std::nullopt;
  auto v = parseInteger(setting->text);
  if (!v || *v < lo_ || *v > hi_) {
    std::string instead = default_ ? fmt::format("unset it to use the default, {}", *default_) : "unset it";
    throwInvalidArgument(
        fmt::format("{}='{}' is not valid: expected an integer in [{}, {}] (decimal or 0x hex); "
                    "fix it or {}. It sets: {}",
                    setting->variable, setting->text, lo_, hi_, instead, doc_));
  }
  return v;
}

int64_t IntParam::get() const {
  if (auto v = value()) return *v;
  if (default_) return *default_;
  throwInternalError(
      fmt::format("parameter HOCCL_{} has no default, so get() has nothing to return when it is unset; "
                  "the caller must use value() (this is a bug in hoccl)",
                  name_));
}

bool StringParam::isSet() const { return lookup(name_).has_value(); }

std::optional<std::string> StringParam::value() const {
  if (auto setting = lookup(name_)) return std::move(setting->text);
  return std::nullopt;
}

std::string StringParam::get() const { return value().value_or(default_); }

const char* typeName(Type type) { return type == Type::Int ? "int" : "string"; }

const std::vector<ParamInfo>& all() {
#define HOCCL_PARAM_INFO_INT_(NAME, ...) describe(NAME),
#define HOCCL_PARAM_INFO_STRING_(NAME, ...) describe(NAME),
  // Never destroyed: detached threads (the bootstrap root) may read parameters while the process exits.
  static const std::vector<ParamInfo>& table = *new std::vector<ParamInfo>{
      HOCCL_PARAM_LIST(HOCCL_PARAM_INFO_INT_, HOCCL_PARAM_INFO_STRING_)};
#undef HOCCL_PARAM_INFO_INT_
#undef HOCCL_PARAM_INFO_STRING_
  return table;
}

void enableNcclNames() { ncclNames.store(true); }

}  // namespace hoccl::params
