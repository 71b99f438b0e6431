// GoogleTest helper shared by the test suites: expect a call to throw bert::Error of a given code
// whose message names every given part.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace bert::testing {

// Expects `fn` to throw Error(code) whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, Code code, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace bert::testing
