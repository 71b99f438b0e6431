// Strict reading of one JSON object of the config: every key read is typed and range-checked,
// and finish() rejects keys nobody read. Error messages name the full key ("train.lr").
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

// Deepest nesting a config (or config file) may have; deeper input is refused at parse time
// (formatting a value nested 50,000 deep would overflow the stack).
inline constexpr int kMaxJsonDepth = 64;
// Parses `text`; Error(config) "<what> is not valid JSON: ..." or "... nests deeper than 64 levels".
nlohmann::json parse_config_json(const std::string& text, const std::string& what);
// Reads and parses a JSON file of at most 16 MiB (a config, bert_config.json); Error(config)
// naming `what` and the path when it is missing, not a regular file, too large or not JSON.
nlohmann::json read_config_file(const std::string& path, const std::string& what);
// A value for a message: at most 60 characters of its JSON text, then "... (N bytes)".
std::string brief(const nlohmann::json& value);
std::string brief(const std::string& text);

class JsonReader {
 public:
  // `prefix` is the dotted path of this object ("train"); empty for the root.
  JsonReader(const nlohmann::json& object, std::string prefix);

  bool has(const std::string& key) const;
  std::string path(const std::string& key) const;
  const nlohmann::json& raw(const std::string& key);  // marks the key as read

  int64_t get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  double get_number(const std::string& key, double fallback, double min, double max);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  // A string that must be one of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices);
  // A nested object (empty object when absent).
  JsonReader object(const std::string& key);
  // Marks keys as known but unused (metadata such as "architectures").
  void ignore(const std::vector<std::string>& keys);
  // Throws Error(config) naming the first key that was never read.
  void finish() const;

 private:
  const nlohmann::json* object_;
  nlohmann::json empty_;
  std::string prefix_;
  std::set<std::string> read_;
};

}  // namespace bert
