// The one command-line parser every tool uses. A tool declares its options (those that take a
// value and those that are flags) and how many positional arguments it takes; the parser refuses
// everything else before anything runs: an unknown option, an option without its value, a value
// given to a flag, too few or too many positional arguments. An option given again overrides its
// earlier value (as wrapper scripts that append their overrides expect). Values are
// read strictly: integers and numbers in a range, booleans, one of a list of choices (no atoi:
// "abc" is not 0, "1e3" is not 1, "inf" is not a thread count). A refusal prints "error: ..." on
// stderr (with the usage when the call's shape is wrong) and exits with status 2.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace bert_tools {

// -h or --help anywhere on the command line asks for the usage, which the tool then prints on
// stdout with status 0.
bool asks_for_help(int argc, char** argv);

class CommandLine {
 public:
  static constexpr size_t kUnbounded = size_t{1} << 20;  // max_positional for "any number"
  struct Spec {
    std::set<std::string> with_value = {};  // "--name" options followed by a value ("--name=value" too)
    std::set<std::string> flags = {};       // "--name" options without a value
    size_t min_positional = 0;         // arguments that are not options ("-" is one: stdin)
    size_t max_positional = 0;
    std::string positional_name = "arguments";  // what they are, for messages: "CONFIG files"
  };
  // Parses argv[first..argc). `tool` names the tool (and subcommand) in messages; `usage` is
  // printed after a refusal of the call's shape.
  CommandLine(std::string tool, std::string usage, int argc, char** argv, int first, const Spec& spec);

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string text(const std::string& name, const std::string& fallback = "") const;
  std::string required(const std::string& name) const;  // given, and not empty
  long long integer(const std::string& name, long long fallback, long long min, long long max) const;
  double number(const std::string& name, double fallback, double min, double max) const;
  bool boolean(const std::string& name, bool fallback) const;  // 1, 0, true or false
  std::string choice(const std::string& name, const std::string& fallback, const std::vector<std::string>& allowed) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  [[noreturn]] void refuse_call(const std::string& message) const;
  [[noreturn]] void refuse_value(const std::string& name, const std::string& expected) const;

  std::string tool_, usage_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

}  // namespace bert_tools
