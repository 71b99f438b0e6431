// TrainingState to and from the JSON of a checkpoint's /metadata/state.
#include "ckpt/training_state.h"

#include <cmath>

#include "core/error.h"

namespace bert {

nlohmann::json TrainingState::to_json() const {
  return {{"global_step", global_step},
          {"phase", phase},
          {"optimizer_steps", optimizer_steps},
          {"micro_step", micro_step},
          {"seed", seed},
          {"loss_scale", loss_scale},
          {"loss_scale_clean_steps", loss_scale_clean_steps},
          {"world_size", world_size},
          {"run_id", run_id},
          {"written_ns", written_ns},
          {"data_cursors", data_cursors}};
}

TrainingState TrainingState::from_json(const nlohmann::json& st, const std::string& path) {
  TrainingState s;
  try {
    s.global_step = st.at("global_step").get<int64_t>();
    s.phase = st.at("phase").get<int>();
    s.optimizer_steps = st.at("optimizer_steps").get<int64_t>();
    s.micro_step = st.at("micro_step").get<uint64_t>();
    s.seed = st.at("seed").get<uint64_t>();
    s.loss_scale = st.value("loss_scale", 1.0);
    s.loss_scale_clean_steps = st.value("loss_scale_clean_steps", int64_t{0});
    s.run_id = st.value("run_id", std::string(kLegacyRunId));
    s.written_ns = st.value("written_ns", int64_t{-1});
    s.data_cursors = st.at("data_cursors").get<std::vector<std::string>>();
    s.world_size = st.value("world_size", static_cast<int>(s.data_cursors.size()));
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has an incomplete training state: ", e.what());
  }
  if (!(s.loss_scale > 0) || !std::isfinite(s.loss_scale)) {
    fail(Code::checkpoint, "checkpoint '", path, "' has an invalid loss_scale ", s.loss_scale);
  }
  if (s.data_cursors.empty()) fail(Code::checkpoint, "checkpoint '", path, "' has no data cursor (data_cursors is empty)");
  return s;
}

}  // namespace bert
