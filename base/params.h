/// @file params.h
/// Typed parameters. Every parameter is declared once in base/param_list.h; this header turns each declaration into
/// an object of namespace hoccl::params named like the variable, so that a misspelt name does not compile:
///
///     const auto timeout = std::chrono::seconds(params::TIMEOUT.get());  // HOCCL_TIMEOUT, range-checked
///     if (auto algo = params::ALGO.value()) ...                           // HOCCL_ALGO, when set
///
/// Values come from HOCCL_<NAME>, or, once the NCCL shim called enableNcclNames(), from NCCL_<NAME> (HOCCL_ wins).
/// An empty variable counts as unset. `hoccl-run --params` lists them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/param_list.h"

namespace hoccl::params {

/// An integer parameter: a decimal (or 0x hexadecimal) integer within [lo, hi].
class IntParam {
 public:
  /// Declares the parameter; only the expansion of base/param_list.h below does this.
  constexpr IntParam(const char* name, std::optional<int64_t> def, int64_t lo, int64_t hi, const char* doc)
      : name_(name), default_(def), lo_(lo), hi_(hi), doc_(doc) {}
  /// The name without prefix, e.g. "TIMEOUT".
  constexpr const char* name() const { return name_; }
  /// The value when unset; nullopt for a parameter without default.
  constexpr std::optional<int64_t> defaultValue() const { return default_; }
  /// The smallest accepted value.
  constexpr int64_t lo() const { return lo_; }
  /// The largest accepted value.
  constexpr int64_t hi() const { return hi_; }
  /// One line for people.
  constexpr const char* doc() const { return doc_; }
  /// Whether the declaration is consistent: lo <= hi and the default, if any, within [lo, hi].
  constexpr bool wellFormed() const { return lo_ <= hi_ && (!default_ || (*default_ >= lo_ && *default_ <= hi_)); }

  /// Whether the variable is set (and not empty).
  bool isSet() const;
  /// The value that is set, nullopt when unset. A malformed or out-of-range value is a hocclInvalidArgument error
  /// naming the variable, the value and the accepted range.
  std::optional<int64_t> value() const;
  /// The value that is set, else the default; errors as value(). For a parameter declared without default an unset
  /// variable is a hocclInternalError: read those with value().
  int64_t get() const;

 private:
  const char* name_;
  std::optional<int64_t> default_;
  int64_t lo_;
  int64_t hi_;
  const char* doc_;
};

/// A text parameter.
class StringParam {
 public:
  /// Declares the parameter; only the expansion of base/param_list.h below does this.
  constexpr StringParam(const char* name, const char* def, const char* doc) : name_(name), default_(def), doc_(doc) {}
  /// The name without prefix, e.g. "ALGO".
  constexpr const char* name() const { return name_; }
  /// The value when unset ("" for none).
  constexpr const char* defaultValue() const { return default_; }
  /// One line for people.
  constexpr const char* doc() const { return doc_; }

  /// Whether the variable is set (and not empty).
  bool isSet() const;
  /// The value that is set, nullopt when unset.
  std::optional<std::string> value() const;
  /// The value that is set, else the default.
  std::string get() const;

 private:
  const char* name_;
  const char* default_;
  const char* doc_;
};

#define HOCCL_PARAM_DECLARE_INT_(NAME, DEF, LO, HI, DOC)   \
  inline constexpr IntParam NAME{#NAME, DEF, LO, HI, DOC}; \
  static_assert(NAME.wellFormed(), "base/param_list.h: " #NAME " has lo > hi or its default outside [lo, hi]");
#define HOCCL_PARAM_DECLARE_STRING_(NAME, DEF, DOC) inline constexpr StringParam NAME{#NAME, DEF, DOC};
/// One object per declaration of base/param_list.h, named like the variable: params::TIMEOUT, params::ALGO, ...
/// (each documented by its line there).
HOCCL_PARAM_LIST(HOCCL_PARAM_DECLARE_INT_, HOCCL_PARAM_DECLARE_STRING_)
#undef HOCCL_PARAM_DECLARE_INT_
#undef HOCCL_PARAM_DECLARE_STRING_

/// What kind of value a parameter holds.
enum class Type { Int, String };

/// "int" or "string".
const char* typeName(Type type);

/// One declared parameter, as listed by all().
struct ParamInfo {
  const char* name;                   ///< without prefix, e.g. "TIMEOUT"
  Type type;                          ///< integer or text
  std::string defaultText;            ///< the default as text, "" for none
  const char* doc;                    ///< one line for people
  const IntParam* integer = nullptr;  ///< the object when type is Int (range: integer->lo(), integer->hi())
  const StringParam* text = nullptr;  ///< the object when type is String
};

/// Every parameter, in declaration order.
const std::vector<ParamInfo>& all();

/// Also honour NCCL_<NAME> (called by the NCCL shim at load time). HOCCL_ names win when both are set.
void enableNcclNames();

}  // namespace hoccl::params
