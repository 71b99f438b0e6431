// Engine logging: one process-wide sink (the C API's bert_set_log_callback) that every part of
// the engine writes to. Without a sink, warnings and errors go to stderr. The sink is called
// with no lock held, so it may log or call into the engine itself.
#pragma once

#include <functional>
#include <string>

namespace bert {

enum LogLevel : int { log_debug = 0, log_info = 1, log_warning = 2, log_error = 3 };

using LogSink = std::function<void(int level, const char* message)>;

// An empty sink restores the default (stderr). A message already being delivered may still
// reach the sink this call replaced.
void set_log_sink(LogSink sink);
void log_message(int level, const std::string& message);

}  // namespace bert
