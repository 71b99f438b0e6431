// JsonReader: typed, range-checked config access with unknown-key detection.
#include "core/json_reader.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace bert {

namespace {

struct TooDeep {};

}  // namespace

nlohmann::json parse_config_json(const std::string& text, const std::string& what) {
  const auto bound_depth = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, bound_depth);
  } catch (const TooDeep&) {
    fail(Code::config, what, " nests deeper than ", kMaxJsonDepth, " levels");
  } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of range (1e999)
    fail(Code::config, what, " is not valid JSON: ", e.what());
  }
}

nlohmann::json read_config_file(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  constexpr uintmax_t kMaxBytes = uintmax_t{16} << 20;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(Code::config, what, ": cannot open '", path, "': no such file");
  if (!fs::is_regular_file(st)) {
    fail(Code::config, what, ": '", path, "' is ", fs::is_directory(st) ? "a directory" : "not a regular file",
         ", not a JSON file");
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxBytes) fail(Code::config, what, ": '", path, "' has ", size, " bytes, more than a JSON config may (16 MiB)");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) fail(Code::config, what, ": cannot read '", path, "'");
  return parse_config_json(text.str(), what + ": '" + path + "'");
}

namespace {

constexpr size_t kBriefChars = 60;

// The first `n` bytes of text, shortened to end on a whole UTF-8 character.
std::string utf8_prefix(const std::string& text, size_t n) {
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

std::string bytes_note(size_t n) { return "... (" + std::to_string(n) + " bytes)"; }

}  // namespace

std::string brief(const std::string& text) {
  return text.size() <= kBriefChars ? text : utf8_prefix(text, kBriefChars) + bytes_note(text.size());
}

std::string brief(const nlohmann::json& value) {
  if (!value.is_string()) return brief(value.dump());
  const std::string& s = value.get_ref<const std::string&>();  // quoted, without formatting all of a long one
  if (s.size() <= kBriefChars) return value.dump();
  return nlohmann::json(utf8_prefix(s, kBriefChars)).dump() + bytes_note(s.size());
}

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
  if (!integral) fail(Code::config, "config key '", path(key), "' must be an integer, got ", brief(v));
  double d = v.get<double>();
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    fail(Code::config, "config key '", path(key), "' = ", brief(v), " is out of range [", min, ", ",
         max, "]");
  }
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
}

double JsonReader::get_number(const std::string& key, double fallback, double min, double max) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_number()) fail(Code::config, "config key '", path(key), "' must be a number, got ", brief(v));
  double d = v.get<double>();
  if (!(d >= min && d <= max)) {
    fail(Code::config, "config key '", path(key), "' = ", brief(v), " is out of range [", min, ", ",
         max, "]");
  }
  return d;
}

bool JsonReader::get_bool(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_boolean()) fail(Code::config, "config key '", path(key), "' must be true or false, got ", brief(v));
  return v.get<bool>();
}

std::string JsonReader::get_string(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  const nlohmann::json& v = raw(key);
  if (!v.is_string()) fail(Code::config, "config key '", path(key), "' must be a string, got ", brief(v));
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
  fail(Code::config, "config key '", path(key), "' = ", brief(nlohmann::json(value)), " is not one of: ", list);
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
