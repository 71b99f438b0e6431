// GoogleTest helpers for tests that drive the engine through the C ABI: create a session from a
// JSON config and run one step, failing the test (with bert_last_error()) when a call fails.
#pragma once

#include <bert.h>
#include <gtest/gtest.h>

#include <string>

inline bert_session* create(const std::string& cfg) {
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(cfg.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  return s;
}

inline bert_step_result step(bert_session* s) {
  bert_step_result r;
  bert_step_result_init(&r);
  EXPECT_EQ(bert_step(s, nullptr, &r), BERT_OK) << bert_last_error();
  return r;
}
