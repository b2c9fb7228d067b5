/*
 * libFuzzer target: PaRO strategy names (src/paro/strategy.cc), as users give them to hocclParo* and hoccl-paro.
 * Whatever parses must name itself: parseStrategy(s.name()) == s; bad text ends in InvalidArgument.
 */
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "paro/strategy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  try {
    const hoccl::paro::Strategy s = hoccl::paro::parseStrategy(text);
    if (hoccl::paro::parseStrategy(s.name()) != s) std::abort();
    (void)s.alias();
  } catch (const hoccl::Error& e) {
    if (e.code() != hocclInvalidArgument) std::abort();
  }
  return 0;
}
