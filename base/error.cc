#include "base/error.h"

#include <cstring>

namespace hoccl {

void throwSystemError(const std::string& msg, int err) {
  throw Error(hocclSystemError, msg + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace hoccl
