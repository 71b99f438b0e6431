// Test helper for test_glue.py and test_conll.py: exposes the core's GLUE and CoNLL readers and
// the task metrics on the command line so Python can compare them with its own reading, scipy,
// numpy and conlleval's rules.
//   glue_tool read TASK FILE          one JSON object per example (id, text_a, text_b, label, value)
//   glue_tool metric NAME < PAIRS     "pred gold" lines (ints, or floats for pearson_spearman);
//                                     prints one "name value" line per metric
//   glue_tool conll-read FILE         one JSON object per sentence (words, tags)
//   glue_tool conll-scores GOLD PRED  files of one sentence's tags per line; prints a JSON object
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tasks/conll.h"
#include "tasks/glue.h"
#include "tasks/task_metrics.h"

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
    if (cmd == "conll-read" && argc == 3) {
      for (const bert::ConllSentence& s : bert::read_conll(argv[2])) {
        std::cout << nlohmann::json({{"words", s.words}, {"tags", s.tags}}).dump() << "\n";
      }
      return 0;
    }
    if (cmd == "conll-scores" && argc == 4) {
      auto read_tags = [](const char* path) {
        std::ifstream in(path);
        std::vector<std::vector<std::string>> out;
        for (std::string line; std::getline(in, line);) {
          std::istringstream words(line);
          out.emplace_back();
          for (std::string t; words >> t;) out.back().push_back(t);
        }
        return out;
      };
      const bert::EntityScores e = bert::entity_scores(read_tags(argv[2]), read_tags(argv[3]));
      std::cout << nlohmann::json({{"precision", e.precision}, {"recall", e.recall}, {"f1", e.f1}, {"gold", e.gold},
                                   {"predicted", e.predicted}, {"correct", e.correct}})
                       .dump()
                << "\n";
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
    std::fprintf(stderr, "usage: glue_tool read TASK FILE | metric NAME < pairs | conll-read FILE | conll-scores GOLD PRED\n");
    return 2;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
