// GoogleTest helpers for tests that drive the engine through the C ABI: create a session from a
// JSON config, run one step, or run bert_infer into a buffer of bert_output_size floats (-1 where
// nothing is written), failing the test (with bert_last_error()) when a call fails.
#pragma once

#include <bert.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

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

inline std::vector<float> infer(bert_session* s, const bert_batch& b, bert_output what) {
  size_t n = 0;
  EXPECT_EQ(bert_output_size(s, what, b.batch_size, b.seq_length, &n), BERT_OK) << bert_last_error();
  std::vector<float> out(n, -1.0f);
  EXPECT_EQ(bert_infer(s, &b, what, out.data(), out.size()), BERT_OK) << bert_last_error();
  return out;
}
