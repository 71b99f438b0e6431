// The tools' shared command-line parser: see command_line.h.
#include "command_line.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bert_tools {

bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}

CommandLine::CommandLine(std::string tool, std::string usage, int argc, char** argv, int first, const Spec& spec)
    : tool_(std::move(tool)), usage_(std::move(usage)) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (spec.with_value.count(name)) {
      if (eq != std::string::npos) {
        values_[name] = a.substr(eq + 1);
      } else if (i + 1 < argc) {
        values_[name] = argv[++i];
      } else {
        refuse_call(name + " needs a value");
      }
    } else if (spec.flags.count(name)) {
      if (eq != std::string::npos) refuse_call(name + " takes no value, got '" + a + "'");
      flags_.insert(name);
    } else {
      refuse_call("unknown option '" + a.substr(0, std::min<size_t>(a.size(), 200)) + "' for " + tool_);
    }
  }
  if (positional_.size() < spec.min_positional || positional_.size() > spec.max_positional) {
    const std::string min = std::to_string(spec.min_positional), max = std::to_string(spec.max_positional);
    const std::string wanted = spec.min_positional == spec.max_positional ? min
                               : spec.max_positional >= kUnbounded  ? "at least " + min
                                                                     : min + " to " + max;
    refuse_call(tool_ + " takes " + wanted + " " + spec.positional_name + ", got " + std::to_string(positional_.size()));
  }
}

void CommandLine::refuse_call(const std::string& message) const {
  std::fprintf(stderr, "error: %s\n%s", message.c_str(), usage_.c_str());
  std::exit(2);
}

void CommandLine::refuse_value(const std::string& name, const std::string& expected) const {
  std::string got = values_.at(name);
  if (got.size() > 200) got = got.substr(0, 200) + "...";
  std::fprintf(stderr, "error: %s expects %s, got '%s'\n", name.c_str(), expected.c_str(), got.c_str());
  std::exit(2);
}

std::string CommandLine::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string CommandLine::required(const std::string& name) const {
  if (!has(name)) refuse_call(tool_ + " needs " + name);
  if (values_.at(name).empty()) refuse_value(name, "a value that is not empty");
  return text(name);
}

long long CommandLine::integer(const std::string& name, long long fallback, long long min, long long max) const {
  if (!has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    refuse_value(name, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

double CommandLine::number(const std::string& name, double fallback, double min, double max) const {
  if (!has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  const double value = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(value) || value < min || value > max) {
    char range[96];
    std::snprintf(range, sizeof range, "a finite number in [%g, %g]", min, max);
    refuse_value(name, range);
  }
  return value;
}

bool CommandLine::boolean(const std::string& name, bool fallback) const {
  if (!has(name)) return fallback;
  const std::string& v = values_.at(name);
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  refuse_value(name, "1, 0, true or false");
}

std::string CommandLine::choice(const std::string& name, const std::string& fallback,
                                const std::vector<std::string>& allowed) const {
  if (!has(name)) return fallback;
  for (const std::string& a : allowed)
    if (a == values_.at(name)) return a;
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) list += (i ? (i + 1 == allowed.size() ? " or " : ", ") : "") + allowed[i];
  refuse_value(name, list);
}

}  // namespace bert_tools
