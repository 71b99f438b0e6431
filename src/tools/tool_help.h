// The command-line tools' help convention: -h or --help anywhere on the command line asks for
// the usage, which the tool then prints on stdout with status 0.
#pragma once

#include <string>

namespace bert_tools {

inline bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}

}  // namespace bert_tools
