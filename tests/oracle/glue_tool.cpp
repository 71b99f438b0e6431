// Test helper for test_glue.py: exposes the core's GLUE reader and task metrics on the command
// line so Python can compare them with its own reading and with scipy/numpy.
//   glue_tool read TASK FILE          one JSON object per example (id, text_a, text_b, label, value)
//   glue_tool metric NAME < PAIRS     "pred gold" lines (ints, or floats for pearson_spearman);
//                                     prints one "name value" line per metric
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/glue.h"
#include "data/task_metrics.h"

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "read" && argc == 4) {
      int64_t skipped = 0;
      for (const bert::GlueExample& e : bert::read_glue_tsv(bert::glue_task(argv[2]), argv[3], &skipped)) {
        std::cout << nlohmann::json({{"id", e.id}, {"text_a", e.text_a}, {"text_b", e.text_b}, {"label", e.label},
                                     {"value", e.value}})
                         .dump()
                  << "\n";
      }
      std::cout << nlohmann::json({{"skipped", skipped}}).dump() << "\n";
      return 0;
    }
    if (cmd == "metric" && argc == 3) {
      std::vector<int32_t> p, g;
      std::vector<double> pv, gv;
      double a = 0, b = 0;
      while (std::cin >> a >> b) {
        p.push_back(static_cast<int32_t>(a));
        g.push_back(static_cast<int32_t>(b));
        pv.push_back(a);
        gv.push_back(b);
      }
      for (const auto& [name, value] : bert::task_metrics(argv[2], p, g, pv, gv)) std::printf("%s %.12g\n", name.c_str(), value);
      return 0;
    }
    std::fprintf(stderr, "usage: glue_tool read TASK FILE | glue_tool metric NAME < pairs\n");
    return 2;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
