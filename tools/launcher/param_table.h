/// @file param_table.h
/// hoccl's parameters (base/param_list.h) as a table for people: the listing of `hoccl-run --params` and the
/// README's environment-variable table (`hoccl-run --params=markdown`, checked by the readme_params test).
#pragma once

#include <string>

namespace hoccl::tools {

/// Plain-text listing: variable, type, default, accepted range, the value set now in this environment, and doc.
std::string paramsText();

/// The Markdown table of README.md's "Environment variables" section, one row per parameter.
std::string paramsMarkdown();

}  // namespace hoccl::tools
