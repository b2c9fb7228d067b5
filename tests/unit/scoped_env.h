/// @file scoped_env.h
/// One environment variable set (or unset) for the life of a scope, then put back as it was: for tests that read
/// HOCCL_* parameters or launcher variables.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace hoccl::test {

/// Sets `name` to `value` (nullptr: unsets it) until the end of the scope, then restores the old value (or unsets).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace hoccl::test
