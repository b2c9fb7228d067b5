/// @file shim_params.cc
/// NCCL 2.32's parameter API on hoccl's typed parameters (base/param_list.h). A key is a parameter's environment
/// name: NCCL_<NAME> (or HOCCL_<NAME>) for every hoccl parameter <NAME>; the value is the one hoccl uses (the variable
/// when set, HOCCL_ winning over NCCL_, else the default). NCCL's own tuning keys that hoccl has no parameter for
/// (NCCL_PROTO, NCCL_BUFFSIZE, ...) are unknown keys: ncclInvalidArgument, *out untouched, as NCCL does for a key
/// it does not know.
/// - Handles are pointers into the fixed parameter table, valid for the life of the process.
/// - Typed reads (I8..U64) work on integer parameters and fail with ncclInvalidArgument when the value does not fit
///   the type; a text parameter read as an integer is ncclInvalidArgument.
/// - ncclParamGet copies raw bytes: an integer parameter as its int64_t, a text parameter as its characters and a
///   terminating NUL; *len gets the byte count (also when maxLen is too small, which is ncclInvalidArgument).
/// - ncclParamDumpAll writes one line per parameter to hoccl's log (subsystem ENV, level INFO).
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/params.h"
#include "shim/shim_common.h"

using namespace hoccl::shim;
namespace params = hoccl::params;

namespace {

/// The keys, "NCCL_<NAME>" for every parameter in declaration order (built once, never freed).
const std::vector<std::string>& keys() {
  static const auto* k = [] {
    auto* v = new std::vector<std::string>;
    for (const params::ParamInfo& p : params::all()) v->push_back(std::string("NCCL_") + p.name);
    return v;
  }();
  return *k;
}

/// The parameter of a key, nullptr when there is none.
const params::ParamInfo* find(const char* key) {
  if (!key) return nullptr;
  std::string name = key;
  for (const char* prefix : {"NCCL_", "HOCCL_"}) {
    if (name.rfind(prefix, 0) == 0) {
      name.erase(0, std::strlen(prefix));
      break;
    }
  }
  for (const params::ParamInfo& p : params::all())
    if (name == p.name) return &p;
  return nullptr;
}

const params::ParamInfo& require(const char* key) {
  const params::ParamInfo* p = find(key);
  if (!p) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("unknown parameter key \"{}\": hoccl's keys are NCCL_<NAME> for the parameters "
                                   "that ncclParamGetAllParameterKeys lists (hoccl-run --params describes them)",
                                   key ? key : "(null)"));
  }
  return *p;
}

const params::ParamInfo& fromHandle(ncclParamHandle_t h) {
  const auto& all = params::all();
  const auto* p = reinterpret_cast<const params::ParamInfo*>(h);
  if (!h || p < all.data() || p >= all.data() + all.size()) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("parameter handle {} was not made by ncclParamBind", static_cast<const void*>(h)));
  }
  return *p;
}

/// The integer value of an integer parameter (set, else default).
int64_t intValue(const params::ParamInfo& p) {
  if (p.type != params::Type::Int) {
    throw hoccl::Error(hocclInvalidArgument,
                       fmt::format("NCCL_{} is a text parameter; read it with ncclParamGetStr", p.name));
  }
  if (auto v = p.integer->value()) return *v;
  if (auto d = p.integer->defaultValue()) return *d;
  throw hoccl::Error(hocclInvalidArgument, fmt::format("NCCL_{} is not set and has no default", p.name));
}

/// The value as text ("" for an unset parameter without default).
std::string textValue(const params::ParamInfo& p) {
  if (p.type == params::Type::String) return p.text->get();
  if (auto v = p.integer->value()) return std::to_string(*v);
  if (auto d = p.integer->defaultValue()) return std::to_string(*d);
  return "";
}

template <class T>
ncclResult_t getTyped(const char* fn, ncclParamHandle_t h, T* out) {
  return guarded(fn, [&] {
    if (!out) throw hoccl::Error(hocclInvalidArgument, "out is NULL; pass the address of a variable");
    const params::ParamInfo& p = fromHandle(h);
    const int64_t v = intValue(p);
    const bool fits = std::is_signed_v<T> ? (v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max())
                                          : (v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max());
    if (!fits) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("NCCL_{} = {} does not fit the {}-bit {} type asked for", p.name, v, 8 * sizeof(T),
                                     std::is_signed_v<T> ? "signed" : "unsigned"));
    }
    *out = static_cast<T>(v);
    return ncclSuccess;
  });
}

thread_local std::string tlsText;               ///< ncclParamGetStr / GetParameter's answer
thread_local std::vector<const char*> tlsKeys;  ///< ncclParamGetAllParameterKeys' answer

}  // namespace

extern "C" {

ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  return guarded("ncclParamBind", [&] {
    if (!out) throw hoccl::Error(hocclInvalidArgument, "out is NULL; pass the address of an ncclParamHandle_t");
    const params::ParamInfo& p = require(key);
    *out = reinterpret_cast<ncclParamHandle_t>(const_cast<params::ParamInfo*>(&p));
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamBind)

ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out) { return getTyped("ncclParamGetI8", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetI8)
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out) { return getTyped("ncclParamGetI16", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetI16)
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out) { return getTyped("ncclParamGetI32", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetI32)
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out) { return getTyped("ncclParamGetI64", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetI64)
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out) { return getTyped("ncclParamGetU8", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetU8)
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out) { return getTyped("ncclParamGetU16", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetU16)
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out) { return getTyped("ncclParamGetU32", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetU32)
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out) { return getTyped("ncclParamGetU64", h, out); }
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetU64)

ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out) {
  return guarded("ncclParamGetStr", [&] {
    if (!out) throw hoccl::Error(hocclInvalidArgument, "out is NULL; pass the address of a const char*");
    tlsText = textValue(fromHandle(h));
    *out = tlsText.c_str();
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetStr)

ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return guarded("ncclParamGet", [&] {
    const params::ParamInfo& p = fromHandle(h);
    std::string bytes;
    if (p.type == params::Type::Int) {
      const int64_t v = intValue(p);
      bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
    } else {
      bytes = textValue(p);
      bytes.push_back('\0');
    }
    const int need = static_cast<int>(bytes.size());
    if (len) *len = need;
    if (!out || maxLen < need) {
      throw hoccl::Error(hocclInvalidArgument,
                         fmt::format("NCCL_{} needs {} bytes; out is {} with maxLen {}", p.name, need, out, maxLen));
    }
    std::memcpy(out, bytes.data(), bytes.size());
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamGet)

ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  return guarded("ncclParamGetParameter", [&] {
    if (!value) throw hoccl::Error(hocclInvalidArgument, "value is NULL; pass the address of a const char*");
    tlsText = textValue(require(key));
    *value = tlsText.c_str();
    if (valueLen) *valueLen = static_cast<int>(tlsText.size());
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetParameter)

ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return guarded("ncclParamGetAllParameterKeys", [&] {
    if (!table || !tableLen) throw hoccl::Error(hocclInvalidArgument, "table and tableLen must not be NULL");
    tlsKeys.clear();
    for (const std::string& k : keys()) tlsKeys.push_back(k.c_str());
    *table = tlsKeys.data();
    *tableLen = static_cast<int>(tlsKeys.size());
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamGetAllParameterKeys)

void pncclParamDumpAll(void) {
  (void)guarded("ncclParamDumpAll", [&] {
    for (const params::ParamInfo& p : params::all()) {
      std::string v;
      try {
        v = textValue(p);
      } catch (const hoccl::Error& e) {
        v = std::string("(invalid: ") + e.what() + ")";
      }
      HOCCL_INFO(kEnv, "NCCL_{} = {} ({})", p.name, v, p.doc);
    }
    return ncclSuccess;
  });
}
HOCCL_NCCL_WEAK_ALIAS(ncclParamDumpAll)

}  // extern "C"
