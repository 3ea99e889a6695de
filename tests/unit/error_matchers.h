#pragma once
// Helpers for tests that check an error's type and what its message tells the user.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace mirrored::testing {

// Runs `fn`, which must throw `Exception`, and returns the message. Any other exception
// escapes and fails the test with its own message.
template <typename Exception, typename Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const Exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, none was thrown";
  return {};
}

inline void expect_mentions(const std::string& message, std::initializer_list<std::string> words) {
  for (const std::string& word : words) {
    EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' missing from: " << message;
  }
}

}  // namespace mirrored::testing
