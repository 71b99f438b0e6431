// Process-wide log sink guarded by a mutex so engine threads can log concurrently.
#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace bert {
namespace {

std::mutex sink_mutex;
LogSink current_sink = nullptr;
void* current_user_data = nullptr;

const char* level_name(int level) {
  switch (level) {
    case log_debug: return "debug";
    case log_info: return "info";
    case log_warning: return "warning";
    default: return "error";
  }
}

}  // namespace

void set_log_sink(LogSink sink, void* user_data) {
  std::lock_guard<std::mutex> lock(sink_mutex);
  current_sink = sink;
  current_user_data = user_data;
}

void log_message(int level, const std::string& message) {
  std::lock_guard<std::mutex> lock(sink_mutex);
  if (current_sink) {
    current_sink(level, message.c_str(), current_user_data);
  } else if (level >= log_warning) {
    std::fprintf(stderr, "bertengine %s: %s\n", level_name(level), message.c_str());
  }
}

}  // namespace bert
