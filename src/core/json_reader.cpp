// JsonReader: typed, range-checked config access with unknown-key detection.
#include "core/json_reader.h"

#include <cmath>

#include "core/error.h"

namespace bert {

JsonReader::JsonReader(const nlohmann::json& object, std::string prefix)
    : object_(&object), empty_(nlohmann::json::object()), prefix_(std::move(prefix)) {
  if (!object.is_object()) {
    fail(Code::config, "config key '", prefix_.empty() ? "<root>" : prefix_,
         "' must be a JSON object, got ", object.type_name());
  }
}

bool JsonReader::has(const std::string& key) const { return object_->contains(key); }

std::string JsonReader::path(const std::string& key) const {
  return prefix_.empty() ? key : prefix_ + "." + key;
}

const nlohmann::json& JsonReader::raw(const std::string& key) {
  read_.insert(key);
  return object_->at(key);
}

int64_t JsonReader::get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  bool integral = v.is_number_integer() ||
                  (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!integral) fail(Code::config, "config key '", path(key), "' must be an integer, got ", v.dump());
  double d = v.get<double>();
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    fail(Code::config, "config key '", path(key), "' = ", v.dump(), " is out of range [", min, ", ",
         max, "]");
  }
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
}

double JsonReader::get_number(const std::string& key, double fallback, double min, double max) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_number()) fail(Code::config, "config key '", path(key), "' must be a number, got ", v.dump());
  double d = v.get<double>();
  if (!(d >= min && d <= max)) {
    fail(Code::config, "config key '", path(key), "' = ", v.dump(), " is out of range [", min, ", ",
         max, "]");
  }
  return d;
}

bool JsonReader::get_bool(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_boolean()) fail(Code::config, "config key '", path(key), "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

std::string JsonReader::get_string(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_string()) fail(Code::config, "config key '", path(key), "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

std::string JsonReader::get_choice(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& choices) {
  std::string value = get_string(key, fallback);
  for (const std::string& c : choices) {
    if (c == value) return value;
  }
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(Code::config, "config key '", path(key), "' = \"", value, "\" is not one of: ", list);
}

JsonReader JsonReader::object(const std::string& key) {
  if (!has(key)) return JsonReader(empty_, path(key));
  return JsonReader(raw(key), path(key));
}

void JsonReader::ignore(const std::vector<std::string>& keys) {
  for (const std::string& k : keys) read_.insert(k);
}

void JsonReader::finish() const {
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (!read_.count(it.key())) fail(Code::config, "unknown config key '", path(it.key()), "'");
  }
}

}  // namespace bert
