// Process-wide log sink. The mutex guards only the pointer to the current sink: a message
// takes a reference to the sink under it and delivers outside it, so a sink that logs or
// calls back into the engine cannot deadlock, and replacing the sink never frees one in use.
#include "core/log.h"

#include <cstdio>
#include <memory>
#include <mutex>

namespace bert {
namespace {

std::mutex sink_mutex;
std::shared_ptr<const LogSink> current_sink;

const char* level_name(int level) {
  switch (level) {
    case log_debug: return "debug";
    case log_info: return "info";
    case log_warning: return "warning";
    default: return "error";
  }
}

std::shared_ptr<const LogSink> sink_now() {
  std::lock_guard<std::mutex> lock(sink_mutex);
  return current_sink;
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::shared_ptr<const LogSink> next = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(sink_mutex);
  current_sink.swap(next);
}

void log_message(int level, const std::string& message) {
  const std::shared_ptr<const LogSink> sink = sink_now();
  if (sink) {
    (*sink)(level, message.c_str());
  } else if (level >= log_warning) {
    std::fprintf(stderr, "bertengine %s: %s\n", level_name(level), message.c_str());
  }
}

}  // namespace bert
