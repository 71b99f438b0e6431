// Shared helpers of the command-line tools.
#include "tool_common.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace bert_tools {

std::string read_file_or_exit(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "error: cannot open '%s'\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int finish(int code) {
  if (failed(bert_finalize(), "bert_finalize")) return code ? code : 1;
  return code;
}

bool failed(bert_status status, const char* what) {
  if (status == BERT_OK) return false;
  std::fprintf(stderr, "error: %s: %s: %s\n", what, bert_status_string(status), bert_last_error());
  return true;
}

int launcher_rank() {
  for (const char* key : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char* value = std::getenv(key)) return std::atoi(value);
  }
  return 0;
}

bool evaluation_due(long long step, long long every, long long every_samples, long long global_batch) {
  if (every > 0) return step % every == 0;
  if (every_samples > 0) return step * global_batch / every_samples > (step - 1) * global_batch / every_samples;
  return false;
}

std::string format_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

long peak_rss_bytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

}  // namespace bert_tools
