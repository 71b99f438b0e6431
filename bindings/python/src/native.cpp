// bertengine._native: the pybind11 layer over capi/bert.h. It only translates: NumPy buffers to
// bert_batch pointers, statuses to Python exceptions (built by bertengine.errors), the log
// callback to a Python callable. Text from the engine is decoded as UTF-8 with replacement
// characters, so a malformed byte never turns an engine error into a UnicodeDecodeError. A session
// is created, and its long calls run, on a worker thread of its own with the GIL released while the
// caller waits in slices, so Ctrl-C aborts them through bert_session_abort.
#include <bert.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <thread>

namespace py = pybind11;

namespace {

py::object g_error_factory;  // bertengine.errors.from_status(status, name, message) -> exception
py::object g_log_sink;       // callable(level: int, message: str) or None

// The engine's text as a Python str (invalid UTF-8 becomes U+FFFD).
py::str text(const char* s) {
  PyObject* o = PyUnicode_DecodeUTF8(s, static_cast<Py_ssize_t>(std::strlen(s)), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

struct CallError {
  bert_status status;
  std::string message;
};

[[noreturn]] void raise(const CallError& e) {
  py::object exc = g_error_factory(static_cast<int>(e.status), text(bert_status_string(e.status)),
                                   text(e.message.c_str()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

// Raises InvalidArgumentError for bad input the binding itself detects.
[[noreturn]] void invalid(const std::string& message) { raise(CallError{BERT_ERR_INVALID_ARGUMENT, message}); }

// Throws the matching BertError when st is not BERT_OK. Must run on the thread that made the call
// (bert_last_error is thread-local).
void check(bert_status st) {
  if (st != BERT_OK) raise(CallError{st, bert_last_error()});
}

void log_trampoline(bert_log_level level, const char* message, void*) {
  py::gil_scoped_acquire gil;
  if (!g_log_sink || g_log_sink.is_none()) return;
  try {
    g_log_sink(static_cast<int>(level), text(message));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("bertengine log callback");
  }
}

// One thread that creates a session and runs its calls; a session is used by one thread at a
// time, so tasks never overlap. The engine's OpenMP thread pool belongs to the thread that calls
// it: with every call on this one thread its workers stay warm (spinning briefly between parallel
// regions). Creating the session on the caller's thread gave that thread a second pool, and with
// more pooled threads than cores libgomp makes every worker sleep between regions (each small
// call then pays the wake-ups).
class Worker {
 public:
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Runs fn on the worker; returns when it finished. With the GIL released, waits in 50 ms
  // slices and, when on_interrupt is given, checks for signals: on a pending signal calls
  // on_interrupt once, waits for fn to finish and rethrows the signal's exception
  // (KeyboardInterrupt). Without it a signal is handled once fn has returned.
  void run(const std::function<void()>& fn, const std::function<void()>& on_interrupt) {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = fn;
      done_ = false;
    }
    cv_.notify_all();
    bool interrupted = false;
    for (;;) {
      bool finished;
      {
        py::gil_scoped_release release;
        std::unique_lock<std::mutex> lock(mu_);
        finished = cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; });
      }
      if (finished) break;
      if (!interrupted && on_interrupt && PyErr_CheckSignals() != 0) {
        interrupted = true;
        on_interrupt();
      }
    }
    if (interrupted) throw py::error_already_set();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || (task_ && !done_); });
      if (stop_) return;
      auto fn = std::move(task_);
      task_ = nullptr;
      lock.unlock();
      fn();
      lock.lock();
      done_ = true;
      cv_.notify_all();
    }
  }

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool done_ = true;
  bool stop_ = false;
};

const int32_t* int32_data(const py::array& a, const char* field) {
  if (!py::isinstance<py::array_t<int32_t>>(a) || !(a.flags() & py::array::c_style))
    invalid(std::string("batch field '") + field + "' must be a C-contiguous int32 array");
  return static_cast<const int32_t*>(a.data());
}

py::dict step_dict(const bert_step_result& r) {
  py::dict d;
  d["step"] = r.step;
  d["loss"] = r.loss;
  d["mlm_loss"] = r.mlm_loss;
  d["nsp_loss"] = r.nsp_loss;
  d["learning_rate"] = r.learning_rate;
  d["grad_norm"] = r.grad_norm;
  d["loss_scale"] = r.loss_scale;
  d["skipped"] = r.skipped != 0;
  d["micro_batches"] = r.micro_batches;
  d["sequences"] = r.sequences;
  d["step_seconds"] = r.step_seconds;
  d["sequences_per_second"] = r.sequences_per_second;
  d["tokens_per_second"] = r.tokens_per_second;
  return d;
}

py::dict eval_dict(const bert_eval_result& r) {
  py::dict d;
  d["mlm_accuracy"] = r.mlm_accuracy;
  d["mlm_loss"] = r.mlm_loss;
  d["nsp_accuracy"] = r.nsp_accuracy;
  d["nsp_loss"] = r.nsp_loss;
  d["sequences"] = r.sequences;
  d["masked_tokens"] = r.masked_tokens;
  d["task_loss"] = r.task_loss;
  d["task_accuracy"] = r.task_accuracy;
  d["task_count"] = r.task_count;
  return d;
}

// Owns one bert_session*. Batches arrive as the ten arrays already validated by the Python
// layer (bertengine.batch); this class re-checks dtype and layout before taking pointers.
class NativeSession {
 public:
  NativeSession(const std::string& config, int backend, int rank, int world_size, int local_rank,
                const py::object& nccl_unique_id) {
    bert_dist dist;
    bert_dist_init_sized(&dist, sizeof dist);
    dist.backend = static_cast<bert_dist_backend>(backend);
    dist.rank = rank;
    dist.world_size = world_size;
    dist.local_rank = local_rank;
    if (!nccl_unique_id.is_none()) {
      std::string id = nccl_unique_id.cast<py::bytes>();
      if (id.size() != BERT_NCCL_UNIQUE_ID_BYTES) invalid("nccl_unique_id must be BERT_NCCL_UNIQUE_ID_BYTES bytes");
      std::memcpy(dist.nccl_unique_id, id.data(), id.size());
      dist.has_nccl_unique_id = 1;
    }
    CallError err{BERT_OK, {}};
    bert_session* s = nullptr;
    worker_ = std::make_unique<Worker>();
    worker_->run([&] {
      err.status = bert_session_create(config.c_str(), &dist, &s);
      if (err.status != BERT_OK) err.message = bert_last_error();
    }, nullptr);
    if (err.status != BERT_OK) raise(err);
    session_ = s;
  }
  ~NativeSession() { close(); }

  void close() {
    if (busy_.load()) {
      raise(CallError{BERT_ERR_INVALID_ARGUMENT,
                      "cannot close the session while a call runs on another thread (abort() it first)"});
    }
    worker_.reset();
    bert_session_destroy(session_);
    session_ = nullptr;
  }
  bool closed() const { return session_ == nullptr; }
  void abort() { bert_session_abort(live()); }
  py::str config() {
    Busy busy(this);
    return text(bert_session_config(live()));
  }
  py::tuple rank() {
    Busy busy(this);
    int rank = 0, world_size = 0, local_rank = 0;
    check(bert_session_rank(live(), &rank, &world_size, &local_rank));
    return py::make_tuple(rank, world_size, local_rank);
  }

  py::dict step(const py::object& arrays) {
    bert_step_result r;
    bert_step_result_init_sized(&r, sizeof r);
    with_batch(arrays, [&](bert_session* s, const bert_batch* b) { return bert_step(s, b, &r); });
    return step_dict(r);
  }
  py::dict forward_backward(const py::object& arrays) {
    bert_step_result r;
    bert_step_result_init_sized(&r, sizeof r);
    with_batch(arrays, [&](bert_session* s, const bert_batch* b) { return bert_forward_backward(s, b, &r); });
    return step_dict(r);
  }
  py::dict eval(const py::object& arrays) {
    bert_eval_result r;
    bert_eval_result_init_sized(&r, sizeof r);
    with_batch(arrays, [&](bert_session* s, const bert_batch* b) { return bert_eval(s, b, &r); });
    return eval_dict(r);
  }
  void allreduce() {
    call([](bert_session* s) { return bert_allreduce(s); });
  }
  size_t output_size(int what, int32_t batch_size, int32_t seq_length) {
    Busy busy(this);
    size_t n = 0;
    check(bert_output_size(live(), static_cast<bert_output>(what), batch_size, seq_length, &n));
    return n;
  }
  // Writes the output into `out` (allocated by the Python layer from output_size).
  void infer(const py::object& arrays, int what, py::array_t<float, py::array::c_style> out) {
    float* ptr = out.mutable_data();
    const size_t n = static_cast<size_t>(out.size());
    with_batch(arrays, [&](bert_session* s, const bert_batch* b) {
      return bert_infer(s, b, static_cast<bert_output>(what), ptr, n);
    });
  }
  py::dict optimizer_step() {
    bert_step_result r;
    bert_step_result_init_sized(&r, sizeof r);
    call([&](bert_session* s) { return bert_optimizer_step(s, &r); });
    return step_dict(r);
  }
  void allreduce_host(py::array_t<float, py::array::c_style> data, int op) {
    if (!py::isinstance<py::array_t<float>>(data)) invalid("allreduce_host needs a float32 array");
    float* ptr = data.mutable_data();
    size_t n = static_cast<size_t>(data.size());
    call([&](bert_session* s) { return bert_allreduce_host(s, ptr, n, static_cast<bert_reduce_op>(op)); });
  }
  void checkpoint(const py::object& path) {
    std::string p = path.is_none() ? std::string() : path.cast<std::string>();
    bool has = !path.is_none();
    call([&](bert_session* s) { return bert_checkpoint(s, has ? p.c_str() : nullptr); });
  }
  void load_checkpoint(const std::string& path) {
    call([&](bert_session* s) { return bert_checkpoint_load(s, path.c_str()); });
  }
  void load_weights(const std::string& path) {
    call([&](bert_session* s) { return bert_checkpoint_load_weights(s, path.c_str()); });
  }
  int64_t resume(const py::object& dir) {
    std::string d = dir.is_none() ? std::string() : dir.cast<std::string>();
    bool has = !dir.is_none();
    int64_t step = -1;
    call([&](bert_session* s) { return bert_checkpoint_resume(s, has ? d.c_str() : nullptr, &step); });
    return step;
  }

  py::dict memory() {
    Busy busy(this);
    bert_memory_info info;
    bert_memory_info_init_sized(&info, sizeof info);
    check(bert_session_memory(live(), &info));
    py::dict d;
    d["parameter_bytes"] = info.parameter_bytes;
    d["gradient_bytes"] = info.gradient_bytes;
    d["optimizer_bytes"] = info.optimizer_bytes;
    d["activation_bytes"] = info.activation_bytes;
    d["peak_device_bytes"] = info.peak_device_bytes;
    return d;
  }

  py::list params() {
    Busy busy(this);
    size_t count = 0;
    check(bert_param_count(live(), &count));
    py::list out;
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      int ndim = 0;
      int64_t shape[BERT_MAX_PARAM_DIMS] = {};
      check(bert_param_info(live(), i, &name, &ndim, shape));
      py::tuple t(ndim);
      for (int d = 0; d < ndim; ++d) t[d] = shape[d];
      out.append(py::make_tuple(text(name), t));
    }
    return out;
  }
  void read_param(const std::string& name, py::array_t<float, py::array::c_style> dst, bool grad) {
    Busy busy(this);
    float* ptr = dst.mutable_data();
    size_t n = static_cast<size_t>(dst.size());
    bert_session* s = live();
    bert_status st;
    {
      py::gil_scoped_release release;
      st = grad ? bert_grad_read(s, name.c_str(), ptr, n) : bert_param_read(s, name.c_str(), ptr, n);
      if (st != BERT_OK) last_ = bert_last_error();
    }
    if (st != BERT_OK) raise(CallError{st, last_});
  }
  void write_param(const std::string& name, py::array_t<float, py::array::c_style> src) {
    Busy busy(this);
    const float* ptr = src.data();
    size_t n = static_cast<size_t>(src.size());
    bert_session* s = live();
    bert_status st;
    {
      py::gil_scoped_release release;
      st = bert_param_write(s, name.c_str(), ptr, n);
      if (st != BERT_OK) last_ = bert_last_error();
    }
    if (st != BERT_OK) raise(CallError{st, last_});
  }

 private:
  // Marks the session in use for one call: the engine allows one thread at a time, and Python
  // threads could otherwise overlap calls (the GIL is released while a call runs).
  struct Busy {
    explicit Busy(NativeSession* s) : self(s) {
      bool expected = false;
      if (!self->busy_.compare_exchange_strong(expected, true)) {
        raise(CallError{BERT_ERR_INVALID_ARGUMENT,
                        "the session is in use by a call on another thread (one thread at a time)"});
      }
    }
    ~Busy() { self->busy_.store(false); }
    NativeSession* self;
  };

  bert_session* live() const {
    if (!session_) raise(CallError{BERT_ERR_INVALID_ARGUMENT, "the session is closed"});
    return session_;
  }

  // Runs fn(session) on the worker thread; Ctrl-C aborts it; a failure raises BertError.
  template <class F>
  void call(F&& fn) {
    Busy busy(this);
    bert_session* s = live();
    CallError err{BERT_OK, {}};
    try {
      worker_->run(
          [&] {
            err.status = fn(s);
            if (err.status != BERT_OK) err.message = bert_last_error();
          },
          [s] { bert_session_abort(s); });
    } catch (const py::error_already_set&) {
      bert_session_clear_abort(s);  // Ctrl-C after the call's last abort check must not abort the next call
      throw;
    }
    if (err.status != BERT_OK) raise(err);
  }

  // arrays: None or a tuple of the ten bert_batch arrays (input_ids, segment_ids, input_mask,
  // masked_lm_positions, masked_lm_ids, next_sentence_labels, labels, label_values,
  // start_positions, end_positions), C-contiguous int32 (label_values float32), the first three
  // [B,S] and the others None when absent (shapes checked by the Python layer).
  template <class F>
  void with_batch(const py::object& arrays, F&& fn) {
    if (arrays.is_none()) {
      call([&](bert_session* s) { return fn(s, nullptr); });
      return;
    }
    py::tuple t = arrays.cast<py::tuple>();
    if (t.size() != 10) invalid("a batch is ten arrays (None where absent)");
    static const char* names[10] = {"input_ids", "segment_ids", "input_mask", "masked_lm_positions",
                                    "masked_lm_ids", "next_sentence_labels", "labels", "label_values",
                                    "start_positions", "end_positions"};
    py::array a[10];
    const void* ptrs[10] = {};
    for (int i = 0; i < 10; ++i) {
      if (t[i].is_none()) {
        if (i < 3) invalid(std::string("batch field '") + names[i] + "' is required");
        continue;
      }
      a[i] = t[i].cast<py::array>();
      if (i == 7) {
        if (!py::isinstance<py::array_t<float>>(a[i]) || !(a[i].flags() & py::array::c_style))
          invalid("batch field 'label_values' must be a C-contiguous float32 array");
        ptrs[i] = a[i].data();
      } else {
        ptrs[i] = int32_data(a[i], names[i]);
      }
    }
    if (a[0].ndim() != 2 || (ptrs[3] && a[3].ndim() != 2) || (ptrs[5] && a[5].ndim() != 1))
      invalid("batch arrays have the wrong number of dimensions");
    bert_batch b;
    bert_batch_init_sized(&b, sizeof b);
    b.batch_size = static_cast<int32_t>(a[0].shape(0));
    b.seq_length = static_cast<int32_t>(a[0].shape(1));
    b.max_predictions = ptrs[3] ? static_cast<int32_t>(a[3].shape(1)) : 0;
    b.input_ids = static_cast<const int32_t*>(ptrs[0]);
    b.segment_ids = static_cast<const int32_t*>(ptrs[1]);
    b.input_mask = static_cast<const int32_t*>(ptrs[2]);
    b.masked_lm_positions = static_cast<const int32_t*>(ptrs[3]);
    b.masked_lm_ids = static_cast<const int32_t*>(ptrs[4]);
    b.next_sentence_labels = static_cast<const int32_t*>(ptrs[5]);
    b.labels = static_cast<const int32_t*>(ptrs[6]);
    b.label_values = static_cast<const float*>(ptrs[7]);
    b.start_positions = static_cast<const int32_t*>(ptrs[8]);
    b.end_positions = static_cast<const int32_t*>(ptrs[9]);
    call([&](bert_session* s) { return fn(s, &b); });
  }

  bert_session* session_ = nullptr;
  std::unique_ptr<Worker> worker_;
  std::string last_;
  std::atomic<bool> busy_{false};
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Low-level binding of capi/bert.h; use the bertengine package instead.";
  m.def("version", [] { return text(bert_version()); });
  m.def("api_version", &bert_api_version);
  m.attr("HEADER_API_VERSION") = BERT_API_VERSION;
  m.attr("NCCL_UNIQUE_ID_BYTES") = BERT_NCCL_UNIQUE_ID_BYTES;
  // The header's enum values, which the Python layer names (errors.py, session.py) rather than
  // restating their numbers.
#define BERT_ENUM(value) std::pair<const char*, int>{#value, value}
  const std::pair<const char*, int> enum_values[] = {
      BERT_ENUM(BERT_OK), BERT_ENUM(BERT_ERR_INVALID_ARGUMENT), BERT_ENUM(BERT_ERR_CONFIG),
      BERT_ENUM(BERT_ERR_IO), BERT_ENUM(BERT_ERR_DATA), BERT_ENUM(BERT_ERR_CHECKPOINT),
      BERT_ENUM(BERT_ERR_OUT_OF_MEMORY), BERT_ENUM(BERT_ERR_BACKEND), BERT_ENUM(BERT_ERR_DISTRIBUTED),
      BERT_ENUM(BERT_ERR_ABORTED), BERT_ENUM(BERT_ERR_UNSUPPORTED), BERT_ENUM(BERT_ERR_INTERNAL),
      BERT_ENUM(BERT_LOG_DEBUG), BERT_ENUM(BERT_LOG_INFO), BERT_ENUM(BERT_LOG_WARNING),
      BERT_ENUM(BERT_LOG_ERROR), BERT_ENUM(BERT_DIST_AUTO), BERT_ENUM(BERT_DIST_LOCAL),
      BERT_ENUM(BERT_DIST_MPI), BERT_ENUM(BERT_DIST_NCCL), BERT_ENUM(BERT_REDUCE_SUM),
      BERT_ENUM(BERT_REDUCE_MEAN), BERT_ENUM(BERT_REDUCE_MAX), BERT_ENUM(BERT_OUTPUT_LOGITS),
      BERT_ENUM(BERT_OUTPUT_POOLED), BERT_ENUM(BERT_OUTPUT_HIDDEN),
  };
#undef BERT_ENUM
  for (const auto& [name, value] : enum_values) m.attr(name) = value;
  m.def("finalize", [] { check(bert_finalize()); });
  m.def("status_string", [](int st) { return text(bert_status_string(static_cast<bert_status>(st))); });
  m.def("last_error", [] { return text(bert_last_error()); });
  m.def("dist_unique_id", [] {
    unsigned char id[BERT_NCCL_UNIQUE_ID_BYTES];
    check(bert_dist_unique_id(id));
    return py::bytes(reinterpret_cast<const char*>(id), sizeof id);
  });
  m.def("set_error_factory", [](py::object f) { g_error_factory = std::move(f); });
  m.def("set_log_sink", [](py::object sink) {
    bool on = !sink.is_none();
    g_log_sink = std::move(sink);
    bert_set_log_callback(on ? &log_trampoline : nullptr, nullptr);
  });

  py::class_<NativeSession>(m, "NativeSession")
      .def(py::init<const std::string&, int, int, int, int, const py::object&>())
      .def("close", &NativeSession::close)
      .def_property_readonly("closed", &NativeSession::closed)
      .def("abort", &NativeSession::abort)
      .def("config", &NativeSession::config)
      .def("rank", &NativeSession::rank)
      .def("step", &NativeSession::step)
      .def("forward_backward", &NativeSession::forward_backward)
      .def("eval", &NativeSession::eval)
      .def("allreduce", &NativeSession::allreduce)
      .def("output_size", &NativeSession::output_size)
      .def("infer", &NativeSession::infer, py::arg("arrays"), py::arg("what"), py::arg("out").noconvert())
      .def("optimizer_step", &NativeSession::optimizer_step)
      .def("allreduce_host", &NativeSession::allreduce_host, py::arg("data").noconvert(), py::arg("op"))
      .def("checkpoint", &NativeSession::checkpoint)
      .def("load_checkpoint", &NativeSession::load_checkpoint)
      .def("load_weights", &NativeSession::load_weights)
      .def("resume", &NativeSession::resume)
      .def("memory", &NativeSession::memory)
      .def("params", &NativeSession::params)
      .def("read_param", &NativeSession::read_param, py::arg("name"), py::arg("dst").noconvert(), py::arg("grad"))
      .def("write_param", &NativeSession::write_param, py::arg("name"), py::arg("src").noconvert());

  // Detach the log sink before the interpreter goes away.
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    bert_set_log_callback(nullptr, nullptr);
    g_log_sink = py::none();
    g_error_factory = py::none();
  }));
}
