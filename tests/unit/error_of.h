/// @file error_of.h
/// errorOf: the message of the hoccl::Error a call throws, after checking its code (Catch2 checks).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "base/error.h"

namespace hoccl::test {

/// The message of the hoccl::Error that `f` throws, after checking its code; fails the test when nothing is thrown.
template <typename F>
std::string errorOf(F&& f, hocclResult_t code) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  FAIL("no error thrown");
  return "";
}

}  // namespace hoccl::test
