// Parameter lookup by name, kept only for the files not yet converted to the typed objects of base/params.h. A name
// that base/param_list.h does not declare is an internal error, so a misspelling fails at the first read instead of
// reading as unset. Delete this file once no caller is left.
#include <fmt/format.h>

#include <cstring>

#include "base/error.h"
#include "base/params.h"

namespace hoccl::params {
namespace {

const ParamInfo& declared(const char* name) {
  for (const auto& p : all())
    if (std::strcmp(p.name, name) == 0) return p;
  throwInternalError(fmt::format("parameter {} is not declared in base/param_list.h (misspelt? `hoccl-run --params` "
                                 "lists the declared ones; this is a bug in hoccl)",
                                 name));
}

}  // namespace

std::optional<std::string> get(const char* name) {
  declared(name);
  if (auto setting = detail::lookup(name)) return std::move(setting->text);
  return std::nullopt;
}

std::string getString(const char* name) {
  const ParamInfo& p = declared(name);
  if (auto setting = detail::lookup(name)) return std::move(setting->text);
  return p.defaultText;
}

int64_t getInt(const char* name) {
  const ParamInfo& p = declared(name);
  if (!p.integer)
    throwInternalError(fmt::format("parameter HOCCL_{} is declared as a {} in base/param_list.h, not as an integer "
                                   "(this is a bug in hoccl)",
                                   name, typeName(p.type)));
  if (auto v = p.integer->value()) return *v;
  return p.integer->defaultValue().value_or(0);
}

}  // namespace hoccl::params
