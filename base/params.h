/// @file params.h
/// One registry of every tunable parameter: name, default, documentation. Values come from HOCCL_<NAME>, or, when
/// the NCCL shim enabled it, from NCCL_<NAME>. `hoccl-run --params` lists them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hoccl::params {

/// One registered parameter.
struct Param {
  const char* name;       ///< without prefix, e.g. "DEBUG"
  const char* defaultValue;  ///< as text, "" for none
  const char* doc;        ///< one line for people
};

/// Every parameter hoccl reads.
const std::vector<Param>& all();
/// The raw value of HOCCL_<name> (or NCCL_<name> when NCCL names are enabled), if set and non-empty.
std::optional<std::string> get(const char* name);
/// The value as text, or the registered default.
std::string getString(const char* name);
/// The value as an integer, or the registered default; a malformed value is an InvalidArgument error.
int64_t getInt(const char* name);
/// Also honour NCCL_<NAME> (called by the NCCL shim at load time). HOCCL_ names win when both are set.
void enableNcclNames();

}  // namespace hoccl::params
