// libFuzzer target: config JSON text through the C ABI's bert_session_create, as every host calls
// it — the parse, its error messages (bert_last_error), the validation and the building of the
// session. A config that parses is run small: a model of more than kMaxParams parameters becomes
// a tiny one, batches and lengths are capped and file paths dropped (synthetic data, no
// checkpoint directory, no logs), so each input costs milliseconds and the fuzzer explores the
// keys rather than waiting on allocations. Any status is fine; a crash, hang, leak or sanitizer
// report is a finding.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "core/error.h"
#include "model/param_table.h"
#include "session/session_config.h"

namespace {

constexpr int64_t kMaxParams = 2'000'000;
constexpr int kMaxTokens = 4096;  // micro_batch x max_seq_length

// The config as the fuzzer runs it (see the top of the file), or "" when it does not parse.
std::string small_config(const std::string& text) {
  bert::SessionConfig parsed;
  try {
    parsed = bert::parse_session_config(text);
  } catch (const bert::Error&) {
    return "";
  }
  nlohmann::json config = parsed.to_json();
  if (bert::ParamTable(parsed.model, parsed.task).total_elems > kMaxParams) {
    config["model"] = {{"vocab_size", 64}, {"hidden_size", 16}, {"num_hidden_layers", 1},
                       {"num_attention_heads", 2}, {"intermediate_size", 32}, {"max_position_embeddings", 64}};
    config["data"]["max_seq_length"] = 32;
  }
  nlohmann::json& train = config["train"];
  if (parsed.train.micro_batch * parsed.data.max_seq_length > kMaxTokens) train["micro_batch"] = 2;
  train["threads"] = 1;
  train.erase("init_checkpoint");
  config["data"]["source"] = "synthetic";
  for (const char* key : {"train_dir", "eval_dir"}) config["data"].erase(key);
  config["checkpoint"].erase("dir");
  config.erase("log");
  config["device"] = "cpu";
  return config.dump();
}

void create_and_destroy(const std::string& text) {
  bert_session* session = nullptr;
  if (bert_session_create(text.c_str(), nullptr, &session) == BERT_OK) {
    bert_session_destroy(session);
  } else if (bert_last_error() == nullptr) {
    __builtin_trap();  // a failed call always leaves its message
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string small = small_config(text);
  // The raw text when it does not parse (the error path every host reaches), else the small config.
  create_and_destroy(small.empty() ? text : small);
  return 0;
}
