// Engine logging: one process-wide sink (the C API's bert_set_log_callback) that every part of
// the engine writes to. Without a sink, warnings and errors go to stderr.
#pragma once

#include <string>

namespace bert {

enum LogLevel : int { log_debug = 0, log_info = 1, log_warning = 2, log_error = 3 };

using LogSink = void (*)(int level, const char* message, void* user_data);

void set_log_sink(LogSink sink, void* user_data);
void log_message(int level, const std::string& message);

}  // namespace bert
