// Strict reading of one JSON object of the config: every key read is typed and range-checked,
// and finish() rejects keys nobody read. Error messages name the full key ("train.lr").
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

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
