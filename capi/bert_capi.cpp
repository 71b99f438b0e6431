// Implementation of capi/bert.h over bert::Session. Every entry point runs its body through
// guard(), which turns any C++ exception into a bert_status and the thread-local message of
// bert_last_error(); out-parameters are written only after the body succeeded.
#include "bert.h"

#include <cstddef>
#include <cstring>
#include <deque>
#include <new>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "dist/launch.h"
#include "session/session.h"

// Every bert_status equals its bert::Code twin, so a status is the code cast.
#define BERT_SAME_CODE(status, code) \
  static_assert(status == static_cast<int>(bert::Code::code), #status " and bert::Code::" #code " differ")
BERT_SAME_CODE(BERT_OK, ok);
BERT_SAME_CODE(BERT_ERR_INVALID_ARGUMENT, invalid_argument);
BERT_SAME_CODE(BERT_ERR_CONFIG, config);
BERT_SAME_CODE(BERT_ERR_IO, io);
BERT_SAME_CODE(BERT_ERR_DATA, data);
BERT_SAME_CODE(BERT_ERR_CHECKPOINT, checkpoint);
BERT_SAME_CODE(BERT_ERR_OUT_OF_MEMORY, out_of_memory);
BERT_SAME_CODE(BERT_ERR_BACKEND, backend);
BERT_SAME_CODE(BERT_ERR_DISTRIBUTED, distributed);
BERT_SAME_CODE(BERT_ERR_ABORTED, aborted);
BERT_SAME_CODE(BERT_ERR_UNSUPPORTED, unsupported);
BERT_SAME_CODE(BERT_ERR_INTERNAL, internal);
#undef BERT_SAME_CODE
static_assert(BERT_NCCL_UNIQUE_ID_BYTES == bert::kNcclUniqueIdBytes, "bert.h and dist/launch.h differ on the NCCL id size");
static_assert(BERT_MAX_PARAM_DIMS == bert::kMaxParamDims, "bert.h and model/param_table.h differ on the parameter rank");

struct bert_session {
  std::unique_ptr<bert::Session> impl;
  std::vector<std::string> param_names;  // stable storage for bert_param_info
  // Every config text bert_session_config returned, kept until destruction (a checkpoint load
  // may change the config; earlier pointers stay valid). A deque never moves its elements.
  mutable std::deque<std::string> config_texts;
};

namespace {

thread_local std::string last_error;

template <typename F>
bert_status guard(F&& body) {
  try {
    body();
    return BERT_OK;
  } catch (const bert::Error& e) {
    last_error = e.what();
    return static_cast<bert_status>(e.code());
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return BERT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return BERT_ERR_INTERNAL;
  } catch (...) {
    last_error = "internal error: unknown exception";
    return BERT_ERR_INTERNAL;
  }
}

void require(const void* ptr, const char* what) {
  if (!ptr) bert::fail(bert::Code::invalid_argument, "argument '", what, "' is NULL");
}

void check_struct(size_t struct_size, size_t minimum, const char* what) {
  if (struct_size < minimum) {
    bert::fail(bert::Code::invalid_argument, what, ".struct_size = ", struct_size,
               " is smaller than this library's ", minimum, " (call ", what, "_init first)");
  }
}

// The size of Struct up to and including its field `last`.
#define BERT_SIZE_THROUGH(Struct, last) (offsetof(Struct, last) + sizeof(Struct::last))

// The sizes of the growable structs' versions this library reads: a struct_size of at least
// the first reads those fields. (Not sizeof, which counts tail padding and grows with new fields.)
// The first release's bert_batch ended after next_sentence_labels; its hosts still work.
constexpr size_t kBatchSizeV1 = BERT_SIZE_THROUGH(bert_batch, next_sentence_labels);
constexpr size_t kBatchSizeLabels = BERT_SIZE_THROUGH(bert_batch, end_positions);
// bert_eval_result before the fine-tuning fields (task_loss ...), and with them.
constexpr size_t kEvalResultSizeV1 = BERT_SIZE_THROUGH(bert_eval_result, masked_tokens);
constexpr size_t kEvalResultSizeTask = BERT_SIZE_THROUGH(bert_eval_result, task_count);
constexpr size_t kDistSize = BERT_SIZE_THROUGH(bert_dist, nccl_unique_id);
constexpr size_t kStepResultSize = BERT_SIZE_THROUGH(bert_step_result, tokens_per_second);
constexpr size_t kMemoryInfoSize = BERT_SIZE_THROUGH(bert_memory_info, peak_device_bytes);

bert::BatchView view_of(const bert_batch* b) {
  check_struct(b->struct_size, kBatchSizeV1, "bert_batch");
  bert::BatchView v;
  v.batch_size = b->batch_size;
  v.seq_length = b->seq_length;
  v.max_predictions = b->max_predictions;
  v.input_ids = b->input_ids;
  v.segment_ids = b->segment_ids;
  v.input_mask = b->input_mask;
  v.masked_lm_positions = b->masked_lm_positions;
  v.masked_lm_ids = b->masked_lm_ids;
  v.next_sentence_labels = b->next_sentence_labels;
  if (b->struct_size >= kBatchSizeLabels) {
    v.labels = b->labels;
    v.label_values = b->label_values;
    v.start_positions = b->start_positions;
    v.end_positions = b->end_positions;
  }
  return v;
}

void fill_result(const bert::StepStats& s, bert_step_result* r) {
  check_struct(r->struct_size, kStepResultSize, "bert_step_result");
  r->step = s.step;
  r->loss = static_cast<float>(s.loss);
  r->mlm_loss = static_cast<float>(s.mlm_loss);
  r->nsp_loss = static_cast<float>(s.nsp_loss);
  r->learning_rate = static_cast<float>(s.learning_rate);
  r->grad_norm = static_cast<float>(s.grad_norm);
  r->loss_scale = static_cast<float>(s.loss_scale);
  r->skipped = s.skipped ? 1 : 0;
  r->micro_batches = s.micro_batches;
  r->sequences = s.sequences;
  r->step_seconds = s.seconds;
  r->sequences_per_second = s.seconds > 0 ? s.sequences / s.seconds : 0.0;
  r->tokens_per_second = s.seconds > 0 ? s.tokens / s.seconds : 0.0;
}

// The integer a host passed for an enum parameter or field. C hosts may pass any int, and
// loading a value outside the enumerators as the C++ enum type is undefined behaviour, so the
// bytes are read as an int and checked before any use as the enum.
template <typename Enum>
int raw_value(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bert::ModelOutput output_of(const bert_output& what) {  // by reference: never loaded as the enum
  const int raw = raw_value(what);
  if (raw < BERT_OUTPUT_LOGITS || raw > BERT_OUTPUT_HIDDEN) {
    bert::fail(bert::Code::invalid_argument, "bert_output = ", raw, " is not one of BERT_OUTPUT_LOGITS, "
               "BERT_OUTPUT_POOLED, BERT_OUTPUT_HIDDEN");
  }
  return static_cast<bert::ModelOutput>(raw);
}

// The distributed setup of a new session: the host's bert_dist, else the launcher's environment.
bert::LaunchPlan launch_plan(const bert_dist* dist, const bert::SessionConfig& config) {
  bert::DistRequest request;
  request.timeout_s = config.dist.timeout_s;
  request.gpu = config.on_cuda();
  if (dist) {
    const int backend = raw_value(dist->backend);
    if (backend < BERT_DIST_AUTO || backend > BERT_DIST_NCCL) {
      bert::fail(bert::Code::invalid_argument, "bert_dist.backend = ", backend, " is not a bert_dist_backend");
    }
    request.backend = static_cast<bert::DistBackend>(backend);
    request.rank = dist->rank;
    request.world_size = dist->world_size;
    request.local_rank = dist->local_rank;
    if (dist->has_nccl_unique_id) {
      request.nccl_unique_id.emplace();
      std::memcpy(request.nccl_unique_id->data(), dist->nccl_unique_id, BERT_NCCL_UNIQUE_ID_BYTES);
    }
  }
  return bert::resolve_launch(request, bert::process_env());
}

bert::Session& session_of(bert_session* s) {
  require(s, "session");
  return *s->impl;
}

// guard() for a call that runs work on a session: the calling thread has the session's GPU
// current meanwhile and its own one again afterwards (any host thread may call).
template <typename F>
bert_status on_session(bert_session* s, F&& body) {
  return guard([&] {
    bert::Session& session = session_of(s);
    const auto on_device = session.on_this_thread();
    body(session);
  });
}

// The *_init_sized functions: the first min(host_size, sizeof(Struct)) bytes of `defaults`, with
// struct_size set to that count, so a host's smaller (older) struct is written only within itself.
template <typename Struct>
void init_prefix(Struct* out, size_t host_size, Struct defaults) {
  if (!out || host_size < sizeof(size_t)) return;
  const size_t n = host_size < sizeof(Struct) ? host_size : sizeof(Struct);
  defaults.struct_size = n;
  std::memcpy(static_cast<void*>(out), &defaults, n);
}

}  // namespace

extern "C" {

const char* bert_version(void) { return BERT_VERSION_STRING; }
int bert_api_version(void) { return BERT_API_VERSION; }
const char* bert_last_error(void) { return last_error.c_str(); }
bert_status bert_finalize(void) {
  return guard([] { bert::finalize_distributed(); });
}

const char* bert_status_string(bert_status status) {
  switch (raw_value(status)) {
    case BERT_OK: return "BERT_OK";
    case BERT_ERR_INVALID_ARGUMENT: return "BERT_ERR_INVALID_ARGUMENT";
    case BERT_ERR_CONFIG: return "BERT_ERR_CONFIG";
    case BERT_ERR_IO: return "BERT_ERR_IO";
    case BERT_ERR_DATA: return "BERT_ERR_DATA";
    case BERT_ERR_CHECKPOINT: return "BERT_ERR_CHECKPOINT";
    case BERT_ERR_OUT_OF_MEMORY: return "BERT_ERR_OUT_OF_MEMORY";
    case BERT_ERR_BACKEND: return "BERT_ERR_BACKEND";
    case BERT_ERR_DISTRIBUTED: return "BERT_ERR_DISTRIBUTED";
    case BERT_ERR_ABORTED: return "BERT_ERR_ABORTED";
    case BERT_ERR_UNSUPPORTED: return "BERT_ERR_UNSUPPORTED";
    case BERT_ERR_INTERNAL: return "BERT_ERR_INTERNAL";
  }
  return "BERT_ERR_UNKNOWN";
}

void bert_set_log_callback(bert_log_fn fn, void* user_data) {
  if (!fn) return bert::set_log_sink(nullptr);
  bert::set_log_sink([fn, user_data](int level, const char* message) {
    fn(static_cast<bert_log_level>(level), message, user_data);
  });
}

void bert_dist_init_sized(bert_dist* d, size_t size) {
  bert_dist defaults{};
  defaults.backend = BERT_DIST_AUTO;
  defaults.rank = defaults.world_size = defaults.local_rank = -1;
  init_prefix(d, size, defaults);
}

bert_status bert_dist_unique_id(unsigned char out[BERT_NCCL_UNIQUE_ID_BYTES]) {
  return guard([&] {
    require(out, "out");
    const bert::NcclUniqueId id = bert::nccl_unique_id();
    std::memcpy(out, id.data(), id.size());
  });
}

void bert_batch_init_sized(bert_batch* b, size_t size) { init_prefix(b, size, bert_batch{}); }

void bert_step_result_init_sized(bert_step_result* r, size_t size) { init_prefix(r, size, bert_step_result{}); }

void bert_eval_result_init_sized(bert_eval_result* r, size_t size) { init_prefix(r, size, bert_eval_result{}); }

bert_status bert_session_create(const char* config_json, const bert_dist* dist, bert_session** out) {
  return guard([&] {
    require(config_json, "config_json");
    require(out, "out");
    if (dist) check_struct(dist->struct_size, kDistSize, "bert_dist");
    bert::SessionConfig config = bert::parse_session_config(config_json);
    const auto keep = bert::Session::keep_thread_device(config);  // the session makes its GPU current
    auto s = std::make_unique<bert_session>();
    s->impl = std::make_unique<bert::Session>(config, bert::make_communicator(launch_plan(dist, config)));
    for (const bert::ParamEntry& e : s->impl->model().params().entries) s->param_names.push_back(e.name);
    *out = s.release();
  });
}

void bert_session_destroy(bert_session* session) {
  if (!session) return;
  try {
    const auto on_device = session->impl->on_this_thread();
    delete session;
  } catch (...) {  // no exception crosses the ABI: the thread's GPU could not be switched
    delete session;
  }
}

const char* bert_session_config(const bert_session* session) {
  if (!session) return "";
  std::deque<std::string>& texts = session->config_texts;
  try {
    if (texts.empty() || texts.back() != session->impl->config_json()) texts.push_back(session->impl->config_json());
  } catch (const std::bad_alloc&) {
    return "";  // no exception crosses the ABI
  }
  return texts.back().c_str();
}

void bert_session_abort(bert_session* session) {
  if (session) session->impl->abort();
}

void bert_session_clear_abort(bert_session* session) {
  if (session) session->impl->clear_abort();
}

bert_status bert_forward_backward(bert_session* session, const bert_batch* batch, bert_step_result* result) {
  return on_session(session, [&](bert::Session& s) {
    require(batch, "batch");
    if (result) check_struct(result->struct_size, kStepResultSize, "bert_step_result");
    bert::StepStats stats = s.forward_backward(view_of(batch));
    if (result) fill_result(stats, result);
  });
}

bert_status bert_allreduce(bert_session* session) {
  return on_session(session, [](bert::Session& s) { s.allreduce(); });
}

bert_status bert_optimizer_step(bert_session* session, bert_step_result* result) {
  return on_session(session, [&](bert::Session& s) {
    if (result) check_struct(result->struct_size, kStepResultSize, "bert_step_result");
    bert::StepStats stats = s.optimizer_step();
    if (result) fill_result(stats, result);
  });
}

bert_status bert_step(bert_session* session, const bert_batch* batch, bert_step_result* result) {
  return on_session(session, [&](bert::Session& s) {
    if (result) check_struct(result->struct_size, kStepResultSize, "bert_step_result");
    bert::BatchView view;
    if (batch) view = view_of(batch);
    bert::StepStats stats = s.step(batch ? &view : nullptr);
    if (result) fill_result(stats, result);
  });
}

bert_status bert_eval(bert_session* session, const bert_batch* batch, bert_eval_result* result) {
  return on_session(session, [&](bert::Session& s) {
    require(result, "result");
    const bool with_task = result->struct_size >= kEvalResultSizeTask;
    if (s.config().task.pretraining()) {
      check_struct(result->struct_size, kEvalResultSizeV1, "bert_eval_result");
    } else if (!with_task) {
      bert::fail(bert::Code::invalid_argument, "bert_eval_result.struct_size = ", result->struct_size,
                 " ends before task_loss, which a ", s.config().task.name(), " session fills (call bert_eval_result_init)");
    }
    bert::BatchView view;
    if (batch) view = view_of(batch);
    bert::EvalStats e = s.eval(batch ? &view : nullptr);
    result->mlm_accuracy = e.mlm_accuracy;
    result->mlm_loss = e.mlm_loss;
    result->nsp_accuracy = e.nsp_accuracy;
    result->nsp_loss = e.nsp_loss;
    result->sequences = e.sequences;
    result->masked_tokens = e.masked_tokens;
    if (with_task) {
      result->task_loss = e.task_loss;
      result->task_accuracy = e.task_accuracy;
      result->task_count = e.task_count;
    }
  });
}

bert_status bert_output_size(const bert_session* session, bert_output what, int32_t batch_size, int32_t seq_length,
                             size_t* count) {
  return guard([&] {
    require(session, "session");
    require(count, "count");
    const bert::ModelOutput output = output_of(what);
    if (batch_size <= 0 || seq_length <= 0) {
      bert::fail(bert::Code::invalid_argument, "batch_size ", batch_size, " and seq_length ", seq_length,
                 " must be positive");
    }
    const int max_seq = session->impl->config().data.max_seq_length;
    if (seq_length > max_seq) {  // bert_infer refuses such a batch
      bert::fail(bert::Code::invalid_argument, "seq_length ", seq_length, " exceeds data.max_seq_length ", max_seq);
    }
    const int64_t elems = session->impl->model().output_elems(output, batch_size, seq_length);
    if (static_cast<uint64_t>(elems) > SIZE_MAX / sizeof(float)) {
      bert::fail(bert::Code::invalid_argument, "an output of ", elems, " floats does not fit in memory");
    }
    *count = static_cast<size_t>(elems);
  });
}

bert_status bert_infer(bert_session* session, const bert_batch* batch, bert_output what, float* out, size_t out_len) {
  return on_session(session, [&](bert::Session& s) {
    require(batch, "batch");
    s.infer(view_of(batch), output_of(what), out, out_len);
  });
}

bert_status bert_allreduce_host(bert_session* session, float* data, size_t count, bert_reduce_op op) {
  return on_session(session, [&](bert::Session& s) {
    const int raw_op = raw_value(op);
    if (raw_op != BERT_REDUCE_SUM && raw_op != BERT_REDUCE_MEAN && raw_op != BERT_REDUCE_MAX) {
      bert::fail(bert::Code::invalid_argument, "unknown reduce op ", raw_op);
    }
    s.allreduce_host(data, static_cast<int64_t>(count), static_cast<bert::ReduceOp>(raw_op));
  });
}

bert_status bert_checkpoint(bert_session* session, const char* path) {
  return on_session(session, [&](bert::Session& s) { s.save_checkpoint(path ? path : ""); });
}

bert_status bert_checkpoint_load(bert_session* session, const char* path) {
  return on_session(session, [&](bert::Session& s) {
    require(path, "path");
    s.load_checkpoint(path);
  });
}

bert_status bert_checkpoint_load_weights(bert_session* session, const char* path) {
  return on_session(session, [&](bert::Session& s) {
    require(path, "path");
    s.load_weights(path);
  });
}

bert_status bert_checkpoint_resume(bert_session* session, const char* dir, int64_t* step) {
  return on_session(session, [&](bert::Session& s) {
    require(step, "step");
    const int64_t resumed = s.resume_latest(dir ? dir : "");
    *step = resumed;
  });
}

bert_status bert_param_count(const bert_session* session, size_t* count) {
  return guard([&] {
    require(session, "session");
    require(count, "count");
    *count = session->param_names.size();
  });
}

bert_status bert_param_info(const bert_session* session, size_t index, const char** name, int* ndim,
                            int64_t shape[4]) {
  return guard([&] {
    require(session, "session");
    const auto& entries = session->impl->model().params().entries;
    if (index >= entries.size()) {
      bert::fail(bert::Code::invalid_argument, "parameter index ", index, " is out of range (count ", entries.size(), ")");
    }
    const bert::ParamEntry& e = entries[index];
    if (name) *name = session->param_names[index].c_str();
    if (ndim) *ndim = static_cast<int>(e.shape.size());
    if (shape) {
      for (int i = 0; i < BERT_MAX_PARAM_DIMS; ++i) shape[i] = i < static_cast<int>(e.shape.size()) ? e.shape[i] : 1;
    }
  });
}

bert_status bert_param_read(bert_session* session, const char* name, float* dst, size_t count) {
  return on_session(session, [&](bert::Session& s) {
    require(name, "name");
    s.read_param(name, dst, count, false);
  });
}

bert_status bert_param_write(bert_session* session, const char* name, const float* src, size_t count) {
  return on_session(session, [&](bert::Session& s) {
    require(name, "name");
    s.write_param(name, src, count);
  });
}

bert_status bert_grad_read(bert_session* session, const char* name, float* dst, size_t count) {
  return on_session(session, [&](bert::Session& s) {
    require(name, "name");
    s.read_param(name, dst, count, true);
  });
}

void bert_memory_info_init_sized(bert_memory_info* info, size_t size) {
  init_prefix(info, size, bert_memory_info{});
}

bert_status bert_session_memory(const bert_session* session, bert_memory_info* info) {
  return guard([&] {
    require(session, "session");
    require(info, "info");
    check_struct(info->struct_size, kMemoryInfoSize, "bert_memory_info");
    const bert::SessionMemory m = session->impl->memory();
    info->parameter_bytes = m.parameter_bytes;
    info->gradient_bytes = m.gradient_bytes;
    info->optimizer_bytes = m.optimizer_bytes;
    info->activation_bytes = m.activation_bytes;
    info->peak_device_bytes = m.peak_bytes;
  });
}

bert_status bert_session_rank(const bert_session* session, int* rank, int* world_size, int* local_rank) {
  return guard([&] {
    require(session, "session");
    const bert::Communicator& comm = session->impl->communicator();
    if (rank) *rank = comm.rank();
    if (world_size) *world_size = comm.world_size();
    if (local_rank) *local_rank = comm.local_rank();
  });
}


// Binary compatibility: hosts built before the *_init macros call these symbols, which write the
// structs as they were then (and keep doing so when fields are appended). The header's macros of
// the same names are undefined here.
#undef bert_dist_init
#undef bert_batch_init
#undef bert_step_result_init
#undef bert_eval_result_init
#undef bert_memory_info_init
BERT_API void bert_dist_init(bert_dist* d);
BERT_API void bert_batch_init(bert_batch* b);
BERT_API void bert_step_result_init(bert_step_result* r);
BERT_API void bert_eval_result_init(bert_eval_result* r);
BERT_API void bert_memory_info_init(bert_memory_info* info);
void bert_dist_init(bert_dist* d) { bert_dist_init_sized(d, kDistSize); }
void bert_batch_init(bert_batch* b) { bert_batch_init_sized(b, kBatchSizeLabels); }
void bert_step_result_init(bert_step_result* r) {
  bert_step_result_init_sized(r, kStepResultSize);
}
void bert_eval_result_init(bert_eval_result* r) {
  bert_eval_result_init_sized(r, kEvalResultSizeTask);
}
void bert_memory_info_init(bert_memory_info* info) {
  bert_memory_info_init_sized(info, kMemoryInfoSize);
}

}  // extern "C"
