// Renders the parameter declarations (base/param_list.h) as the plain-text listing and the README's Markdown table.
#include "tools/launcher/param_table.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/params.h"

namespace hoccl::tools {
namespace {

std::string rangeOf(const params::ParamInfo& p) {
  return p.integer ? fmt::format("[{}, {}]", p.integer->lo(), p.integer->hi()) : std::string();
}

// A Markdown table cell: '|' would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string paramsText() {
  std::string out =
      "hoccl parameters (environment HOCCL_<NAME>; the NCCL shim also reads NCCL_<NAME>, HOCCL_ wins).\n"
      "Integers are decimal or 0x hexadecimal; a value outside its range is an error.\n\n";
  out += fmt::format("{:<28} {:<6} {:<12} {:<24} {:<12} {}\n", "NAME", "TYPE", "DEFAULT", "RANGE", "CURRENT",
                     "DESCRIPTION");
  for (const auto& p : params::all()) {
    const std::string env = std::string("HOCCL_") + p.name;
    const char* cur = std::getenv(env.c_str());
    // A long default (the subsystem list) gets a line of its own rather than pushing every column.
    const bool longDefault = p.defaultText.size() > 12;
    out += fmt::format("{:<28} {:<6} {:<12} {:<24} {:<12} {}\n", env, params::typeName(p.type),
                       p.defaultText.empty() ? "-"
                       : longDefault         ? "(below)"
                                             : p.defaultText,
                       p.integer ? rangeOf(p) : "-", cur && *cur ? cur : "-", p.doc);
    if (longDefault) out += fmt::format("{:<28} default: {}\n", "", p.defaultText);
  }
  return out;
}

std::string paramsMarkdown() {
  std::string out = "| variable | type | default | range | meaning |\n|---|---|---|---|---|\n";
  for (const auto& p : params::all()) {
    out += fmt::format("| `HOCCL_{}` | {} | {} | {} | {} |\n", p.name, params::typeName(p.type),
                       p.defaultText.empty() ? "" : "`" + cell(p.defaultText) + "`", rangeOf(p), cell(p.doc));
  }
  return out;
}

}  // namespace hoccl::tools
