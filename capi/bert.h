/* bert.h: the C ABI of bertengine, a BERT pretraining, fine-tuning and inference engine (the
 * only public header).
 *
 * A host (C, Python, Go, Rust, a scheduler) creates a session from a JSON config, feeds it
 * batches or lets it read its own data, and steps the optimizer:
 *
 *     bert_session* s = NULL;
 *     if (bert_session_create("{\"model\": \"bert-tiny\"}", NULL, &s) != BERT_OK) {
 *       fprintf(stderr, "%s\n", bert_last_error()); return 1;
 *     }
 *     bert_step_result r; bert_step_result_init(&r);
 *     for (int i = 0; i < 100; ++i) bert_step(s, NULL, &r);   // synthetic data by default
 *     bert_checkpoint(s, "tiny.h5");
 *     bert_session_destroy(s);
 *
 * Conventions
 *  - Every fallible call returns a bert_status. On failure the message is in bert_last_error()
 *    (thread-local, valid until the next call on the same thread) and out-parameters are left
 *    untouched. No C++ exception crosses this boundary.
 *  - Structs that may grow start with `struct_size`; fill them with their *_init macro, which
 *    passes the size of the host's struct to the library's *_init_sized function: a host built
 *    against an older, smaller struct gets only its own bytes written, and the library reads
 *    only the fields its struct_size covers. (Bindings call *_init_sized with their struct's
 *    size.)
 *  - Configuration is JSON text; the schema is in README.md ("Config schema"). Unknown or
 *    ill-typed keys fail bert_session_create with a message naming the key.
 *  - Threads: a session may be used from any thread but by one thread at a time (it may move
 *    between threads). bert_session_abort and bert_last_error may be called from any thread at
 *    any time. Different sessions are independent. A GPU session makes its GPU current on the
 *    calling thread for the length of each call and the thread's own CUDA context current again
 *    before returning (none, if it had none). The CPU work runs on an OpenMP thread pool that
 *    belongs to the calling thread: a host that calls a session from one thread keeps that pool
 *    warm; calls from many threads each start a pool, and once the pools hold more threads than
 *    there are cores their workers sleep between parallel regions, which slows small calls. The
 *    Python and Go bindings create each session and make its calls on a thread of its own.
 *  - Collective calls (marked COLLECTIVE) must be called by every rank of a distributed run in
 *    the same order; with one rank they complete locally.
 *  - Returned pointers: each call that returns a pointer says how long it stays valid. Static
 *    strings live as long as the library is loaded; strings owned by a session live until
 *    bert_session_destroy.
 *  - The library changes nothing process-wide behind the host's back: no environment
 *    variables, signal handlers or exit hooks. What it takes on the host's behalf (MPI, when the
 *    host has not initialised it) bert_finalize gives back.
 */
#ifndef BERT_H
#define BERT_H

#include <stddef.h>
#include <stdint.h>

/* The library's own sources define BERT_BUILDING_LIBRARY (exports); hosts get imports, or
 * nothing when they link a static libbert and define BERT_STATIC. */
#if defined(_WIN32) && defined(BERT_BUILDING_LIBRARY)
#define BERT_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(BERT_STATIC)
#define BERT_API __declspec(dllimport)
#elif defined(__GNUC__)
#define BERT_API __attribute__((visibility("default")))
#else
#define BERT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header's ABI; bert_api_version() returns the library's. */
#define BERT_API_VERSION 1

/* Sizes fixed by the ABI. */
#define BERT_NCCL_UNIQUE_ID_BYTES 128 /* bert_dist.nccl_unique_id, bert_dist_unique_id */
#define BERT_MAX_PARAM_DIMS 4         /* the shape array of bert_param_info */

typedef enum bert_status {
  BERT_OK = 0,
  BERT_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, a bad batch, a size out of range */
  BERT_ERR_CONFIG = 2,           /* malformed JSON, unknown key, wrong type, impossible value */
  BERT_ERR_IO = 3,               /* a file could not be opened, read or written */
  BERT_ERR_DATA = 4,             /* a data shard or vocabulary is malformed */
  BERT_ERR_CHECKPOINT = 5,       /* a checkpoint is corrupt or does not match the model */
  BERT_ERR_OUT_OF_MEMORY = 6,
  BERT_ERR_BACKEND = 7,          /* CUDA, cuBLAS, cuDNN or the CPU backend failed */
  BERT_ERR_DISTRIBUTED = 8,      /* a collective failed or timed out */
  BERT_ERR_ABORTED = 9,          /* bert_session_abort stopped the call */
  BERT_ERR_UNSUPPORTED = 10,     /* not built in (e.g. CUDA in a CPU-only build) */
  BERT_ERR_INTERNAL = 11
} bert_status;

typedef struct bert_session bert_session; /* opaque */

/* Library version string ("0.1.0", static) and ABI version (compare with BERT_API_VERSION). */
BERT_API const char* bert_version(void);
BERT_API int bert_api_version(void);
/* Static name of a status ("BERT_ERR_CONFIG"); never NULL. */
BERT_API const char* bert_status_string(bert_status status);
/* Message of the last failed call on this thread ("" if none); valid until the next call into
 * the library on the same thread. */
BERT_API const char* bert_last_error(void);
/* Gives back what the library took process-wide on the host's behalf: today MPI, finalised if
 * (and only if) a session of this process initialised it because the host had not. Call it
 * once, after the last session is destroyed and before the process exits (under mpirun a
 * process that initialised MPI must finalise it); a host that initialised MPI itself
 * finalises it itself and need not call this. Afterwards no MPI session can be created in
 * this process (MPI cannot be initialised twice). BERT_ERR_INVALID_ARGUMENT while sessions
 * that use MPI still exist. Does nothing when there is nothing to give back. */
BERT_API bert_status bert_finalize(void);

/* ---- logging ------------------------------------------------------------------------- */
typedef enum bert_log_level {
  BERT_LOG_DEBUG = 0,
  BERT_LOG_INFO = 1,
  BERT_LOG_WARNING = 2,
  BERT_LOG_ERROR = 3
} bert_log_level;
typedef void (*bert_log_fn)(bert_log_level level, const char* message, void* user_data);
/* Process-wide log sink. NULL restores the default (warnings and errors to stderr).
 * The callback may be called from any thread that runs engine code, from several at once, and
 * never while the library holds a lock: it may call back into the library (log, create or use
 * sessions). A call that began before bert_set_log_callback replaced the callback may still be
 * delivered to the old one; message is valid only during the call. */
BERT_API void bert_set_log_callback(bert_log_fn fn, void* user_data);

/* ---- distributed setup ---------------------------------------------------------------- */
typedef enum bert_dist_backend {
  BERT_DIST_AUTO = 0,  /* from the launcher's environment (Open MPI, Slurm, torchrun), else local */
  BERT_DIST_LOCAL = 1, /* one rank, no communication */
  BERT_DIST_MPI = 2,
  BERT_DIST_NCCL = 3
} bert_dist_backend;

typedef struct bert_dist {
  size_t struct_size;
  bert_dist_backend backend;
  int rank;       /* -1: from the environment */
  int world_size; /* -1: from the environment */
  int local_rank; /* -1: from the environment; picks the GPU */
  int has_nccl_unique_id;
  unsigned char nccl_unique_id[BERT_NCCL_UNIQUE_ID_BYTES]; /* from bert_dist_unique_id on rank 0, carried by the host */
} bert_dist;

/* Fills defaults into the first `size` bytes (the host's sizeof(bert_dist)): backend AUTO,
 * ranks -1, no unique id. */
BERT_API void bert_dist_init_sized(bert_dist* dist, size_t size);
#define bert_dist_init(dist) bert_dist_init_sized((dist), sizeof(*(dist)))
/* Makes NCCL's unique id. Call it on rank 0 only, in the process that will be rank 0 (it
 * starts NCCL's bootstrap listener there), and carry the bytes to every rank by any means
 * (MPI_Bcast, a file, a TCP store, a Python orchestrator) into bert_dist.nccl_unique_id with
 * has_nccl_unique_id = 1. Without it, NCCL ranks bootstrap from NCCL_COMM_ID when the host set
 * it; else rank 0 hands its id to the others over TCP at MASTER_ADDR:MASTER_PORT + 1 when
 * those are set (torchrun); else, under mpirun, over MPI.
 * BERT_ERR_UNSUPPORTED in a build without CUDA/NCCL. */
BERT_API bert_status bert_dist_unique_id(unsigned char out[BERT_NCCL_UNIQUE_ID_BYTES]);

/* ---- batches and results -------------------------------------------------------------- */
/* One batch of samples with the fields of the NVIDIA DLE HDF5 shards, plus the labels of the
 * fine-tuning heads. Arrays are row-major and are only read during the call. Conventions as in
 * DLE: input_mask is 1 for real tokens, 0 for padding; masked_lm_positions is zero-padded and
 * the first 0 ends a sample's masks; next_sentence_labels is 0 (IsNext) or 1 (NotNext).
 * Which fields a call reads depends on the session's "task" (config) and the call:
 *   - every call: input_ids, segment_ids, input_mask;
 *   - training a pretraining session: masked_lm_positions/ids (when max_predictions > 0) and
 *     next_sentence_labels;
 *   - training "sequence_classification": labels [B] (class ids in [0, num_labels)), or with
 *     num_labels == 1 (regression, MSE loss) label_values [B];
 *   - training "token_classification": labels [B, S] (a class id, or any negative value such as
 *     -100 to leave the token out of the loss);
 *   - training "question_answering": start_positions [B] and end_positions [B] (token indices;
 *     as Hugging Face, clamped to [0, S] and S itself is left out of the loss);
 *   - bert_infer: no labels (label fields may be NULL).
 * Fields this session does not read may be NULL. The label fields were added in ABI 1 after the
 * first release: a bert_batch whose struct_size ends before them is read without labels. */
typedef struct bert_batch {
  size_t struct_size;
  int32_t batch_size;                  /* B */
  int32_t seq_length;                  /* S: at most data.max_seq_length */
  int32_t max_predictions;             /* P: at most data.max_predictions_per_seq */
  const int32_t* input_ids;            /* [B, S] */
  const int32_t* segment_ids;          /* [B, S], values 0 or 1 */
  const int32_t* input_mask;           /* [B, S], values 0 or 1 */
  const int32_t* masked_lm_positions;  /* [B, P] */
  const int32_t* masked_lm_ids;        /* [B, P] */
  const int32_t* next_sentence_labels; /* [B] */
  const int32_t* labels;               /* [B] or [B, S] (token classification) */
  const float* label_values;           /* [B] regression targets */
  const int32_t* start_positions;      /* [B] */
  const int32_t* end_positions;        /* [B] */
} bert_batch;

typedef struct bert_step_result {
  size_t struct_size;
  int64_t step;              /* optimizer steps completed so far */
  float loss;                /* the task's loss (pretraining: mlm_loss + nsp_loss; fine-tuning: as
                                Hugging Face's model computes it), averaged over the step's micro-batches */
  float mlm_loss;
  float nsp_loss;
  float learning_rate;       /* the rate used by this step */
  float grad_norm;           /* global norm of the averaged gradient, before clipping */
  float loss_scale;          /* dynamic loss scale (1 when not used) */
  int32_t skipped;           /* 1 if the update was skipped (non-finite gradients) */
  int32_t micro_batches;     /* micro-batches accumulated into this step */
  int64_t sequences;         /* sequences processed by this call */
  double step_seconds;       /* wall time of this call */
  double sequences_per_second;
  double tokens_per_second;  /* non-padding tokens per second */
} bert_step_result;

/* bert_eval's result. Pretraining sessions fill the mlm_* and nsp_* fields (the task_* fields
 * 0); fine-tuning sessions fill sequences and the task_* fields (the others 0), with the loss as Hugging Face's model computes it over the whole batch:
 *   - sequence_classification: mean cross-entropy, accuracy of the argmax class; regression
 *     (num_labels == 1): task_loss is the mean squared error and task_accuracy is NaN;
 *   - question_answering: (start cross-entropy + end cross-entropy) / 2, each the mean over the
 *     sequences whose position is inside the sequence (positions clamped to [0, S], S left out;
 *     NaN when none is); task_accuracy: the fraction of sequences whose argmax start AND argmax
 *     end equal the labels;
 *   - token_classification: mean cross-entropy and accuracy over the labelled tokens (label >= 0;
 *     -100 and other negatives are left out, as Hugging Face's ignore index); task_count counts
 *     them (NaN loss and accuracy when there are none).
 * The task_* fields were added in ABI 1 after mlm/nsp: a bert_eval_result whose struct_size
 * ends before them still works for pretraining sessions; fine-tuning sessions refuse it. */
typedef struct bert_eval_result {
  size_t struct_size;
  double mlm_accuracy;   /* fraction of masked tokens predicted exactly */
  double mlm_loss;       /* mean cross-entropy over masked tokens */
  double nsp_accuracy;
  double nsp_loss;
  int64_t sequences;
  int64_t masked_tokens;
  double task_loss;      /* fine-tuning head's mean loss (see above) */
  double task_accuracy;  /* NaN for regression */
  int64_t task_count;    /* sequences, or labelled tokens for token_classification */
} bert_eval_result;

/* Zero the first `size` bytes (the host's sizeof of the struct) and set struct_size = size
 * (capped at the library's own size). Nothing is written when size < sizeof(size_t). */
BERT_API void bert_batch_init_sized(bert_batch* batch, size_t size);
BERT_API void bert_step_result_init_sized(bert_step_result* result, size_t size);
BERT_API void bert_eval_result_init_sized(bert_eval_result* result, size_t size);
#define bert_batch_init(batch) bert_batch_init_sized((batch), sizeof(*(batch)))
#define bert_step_result_init(result) bert_step_result_init_sized((result), sizeof(*(result)))
#define bert_eval_result_init(result) bert_eval_result_init_sized((result), sizeof(*(result)))

/* ---- sessions ------------------------------------------------------------------------- */
/* Creates a session from JSON config text. dist may be NULL (same as bert_dist_init).
 * COLLECTIVE in a distributed run. On success *out owns a session; free it with
 * bert_session_destroy. The config's "task" picks the head (pretraining by default; see
 * README.md); "mode": "inference" creates a session for bert_infer only: it allocates no
 * gradients, optimizer state or data source, keeps two layers' activations instead of all of
 * them, and its training and checkpoint-writing calls return BERT_ERR_UNSUPPORTED. Weights
 * come from train.init_checkpoint or bert_checkpoint_load_weights. */
BERT_API bert_status bert_session_create(const char* config_json, const bert_dist* dist,
                                         bert_session** out);
/* Frees the session and everything it owns. NULL is ignored. */
BERT_API void bert_session_destroy(bert_session* session);
/* The resolved config (defaults filled in) as JSON text, owned by the session and valid until
 * bert_session_destroy (a later bert_checkpoint_load that changes the config does not free
 * the text returned before it; call again for the new one). "" for a NULL session. */
BERT_API const char* bert_session_config(const bert_session* session);
/* Makes a call running on another thread (or the next call) return BERT_ERR_ABORTED at its
 * next checkpoint between layers. Safe from any thread and from signal handlers. The
 * gradients accumulated for the current step are discarded; weights are unchanged. */
BERT_API void bert_session_abort(bert_session* session);
/* Withdraws an abort that no call has consumed yet, so the next call runs. A host whose
 * watcher (a cancelled context, Ctrl-C) may abort just as the call returns calls this after
 * stopping the watcher. Safe from any thread. */
BERT_API void bert_session_clear_abort(bert_session* session);

/* ---- training ------------------------------------------------------------------------- */
/* Forward and backward of one micro-batch (batch_size <= train.micro_batch); gradients
 * accumulate until bert_optimizer_step. result (may be NULL) receives the losses. */
BERT_API bert_status bert_forward_backward(bert_session* session, const bert_batch* batch,
                                           bert_step_result* result);
/* COLLECTIVE. Sums the accumulated gradients over ranks (nothing to do with one rank).
 * Every collective call waits at most dist.timeout_s for the other ranks and then returns
 * BERT_ERR_DISTRIBUTED naming the operation and this rank; the session can then only be
 * destroyed (its communicator refuses further collectives). */
BERT_API bert_status bert_allreduce(bert_session* session);
/* Averages the accumulated gradients over micro-batches and ranks, clips, applies the
 * optimizer with the scheduled learning rate, and zeroes the gradients. */
BERT_API bert_status bert_optimizer_step(bert_session* session, bert_step_result* result);
/* One whole optimizer step. With batch != NULL, the batch (batch_size <= micro_batch *
 * accumulation_steps) is split into micro-batches of train.micro_batch; with batch == NULL
 * the session draws train.accumulation_steps micro-batches from its own data source.
 * COLLECTIVE. */
BERT_API bert_status bert_step(bert_session* session, const bert_batch* batch,
                               bert_step_result* result);
/* Evaluation without dropout or gradient: on the batch, or (batch == NULL) on the configured
 * evaluation set: every sequence of the shards in data.eval_dir (or the first data.eval_samples
 * of them, in file-name order), or data.eval_batches synthetic batches. The set is cut into
 * micro-batches of train.micro_batch that are dealt to the ranks and summed, so the result is
 * the same for any number of ranks; with batch == NULL the call is COLLECTIVE.
 * A fine-tuning session ("task") evaluates a labelled batch (the labels its training reads; any
 * batch_size, cut into micro-batches) on this rank: batch == NULL is BERT_ERR_INVALID_ARGUMENT
 * (evaluation sets hold pretraining shards), as is a batch without its labels. */
BERT_API bert_status bert_eval(bert_session* session, const bert_batch* batch,
                               bert_eval_result* result);

typedef enum bert_reduce_op { BERT_REDUCE_SUM = 0, BERT_REDUCE_MEAN = 1, BERT_REDUCE_MAX = 2 } bert_reduce_op;
/* COLLECTIVE: every rank must call it, with the same count and op, in the same order.
 * In-place reduction of a small host float array across ranks (metrics the host wants to
 * combine); MEAN divides the sum by the world size. */
BERT_API bert_status bert_allreduce_host(bert_session* session, float* data, size_t count,
                                         bert_reduce_op op);

/* ---- inference ------------------------------------------------------------------------ */
/* What bert_infer returns, float32, row-major, for a batch of B sequences of length S:
 *  - BERT_OUTPUT_LOGITS: the head's logits: sequence_classification [B, num_labels] (the
 *    regression value when num_labels == 1); token_classification [B, S, num_labels];
 *    question_answering [B, 2, S] (each sequence's start logits, then its end logits); a
 *    pretraining session: the next-sentence logits [B, 2];
 *  - BERT_OUTPUT_POOLED: the pooler's output [B, H] (pretraining and sequence_classification;
 *    the QA and token models have no pooler, as in Hugging Face: BERT_ERR_INVALID_ARGUMENT);
 *  - BERT_OUTPUT_HIDDEN: the last encoder layer's hidden states [B, S, H] (embeddings).
 * Per-token outputs are 0 at padding positions (input_mask 0). */
typedef enum bert_output {
  BERT_OUTPUT_LOGITS = 0,
  BERT_OUTPUT_POOLED = 1,
  BERT_OUTPUT_HIDDEN = 2
} bert_output;
/* Floats bert_infer writes for `what` on batch_size sequences of seq_length tokens. */
BERT_API bert_status bert_output_size(const bert_session* session, bert_output what, int32_t batch_size,
                                      int32_t seq_length, size_t* count);
/* Runs the model without dropout or gradients on `batch` (any batch_size: it is cut into
 * micro-batches of train.micro_batch; seq_length <= data.max_seq_length) and copies `what` into
 * out, a host buffer of out_len floats that must hold at least bert_output_size(...) of them.
 * The batch arrays and out are only used during the call; the session keeps no pointer.
 * Works in training and inference sessions; changes no weights, step or random stream.
 * BERT_ERR_INVALID_ARGUMENT (naming the field or size) for a bad batch or a short buffer; out
 * is then untouched (an aborted call may have written part of it). */
BERT_API bert_status bert_infer(bert_session* session, const bert_batch* batch, bert_output what, float* out,
                                size_t out_len);

/* ---- checkpoints ---------------------------------------------------------------------- */
/* A checkpoint is one HDF5 file with the whole training state: fp32 weights under
 * /model/<Hugging Face name>, the optimizer's state under /optimizer/<slot>/<name> (LAMB and
 * AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer), and attributes: format and engine version, the config JSON, a "state" JSON (global step, phase,
 * optimizer steps, dropout stream position, loss scale, every rank's data-loader cursor) and a
 * checksum of all tensor bytes that loading verifies. It is written under a temporary name,
 * fsynced and renamed: it is either whole or absent.
 *
 * COLLECTIVE. Writes the checkpoint to path; with path == NULL, to
 * <checkpoint.dir>/ckpt_<step>.h5, then deletes old ones per checkpoint.keep/keep_every.
 * Rank 0 writes the file; every rank's data cursor is gathered into it. A failed write
 * returns an error, leaves earlier checkpoints intact, and training can continue. Every
 * checkpoint records its run's id (fresh per session, taken over from a loaded checkpoint);
 * rank 0 refuses (BERT_ERR_CHECKPOINT) to write into a checkpoint.dir whose most recent
 * checkpoint is another run's. */
BERT_API bert_status bert_checkpoint(bert_session* session, const char* path);
/* Resumes the full training state from a checkpoint: afterwards training continues exactly
 * (bit-identical losses on the CPU backend) as if it had never stopped. The model shapes must
 * match and the checkpoint's phase must equal train.phase. On any error the session is
 * unchanged. */
BERT_API bert_status bert_checkpoint_load(bert_session* session, const char* path);
/* Loads only the weights (/model) of a checkpoint or weights file: for starting phase 2,
 * fine-tuning or continued pretraining. Optimizer state, step and data position are kept.
 * train.init_checkpoint does this at session creation. */
BERT_API bert_status bert_checkpoint_load_weights(bert_session* session, const char* path);
/* Resumes from the newest checkpoint in dir (NULL: checkpoint.dir) that passes verification;
 * only checkpoints of the run that wrote the directory's most recent checkpoint are considered
 * (others are named in a warning), and partial files of interrupted writes are removed. *step
 * receives the resumed step, or -1 when dir holds no checkpoint (BERT_OK). If checkpoints newer
 * than the one it would resume (or all of them) fail verification, it returns
 * BERT_ERR_CHECKPOINT naming each file and why, with the session and the files unchanged (a
 * resumed run would write over them); with checkpoint.discard_invalid it renames each to
 * <name>.invalid and resumes from the newest valid one (or returns -1 when there is none). */
BERT_API bert_status bert_checkpoint_resume(bert_session* session, const char* dir, int64_t* step);

/* ---- parameters (Hugging Face BertForPreTraining names and shapes) --------------------- */
BERT_API bert_status bert_param_count(const bert_session* session, size_t* count);
/* Name and shape of parameter `index` (< count); shape[i] is 1 for i >= *ndim. *name is owned
 * by the session and valid until bert_session_destroy. */
BERT_API bert_status bert_param_info(const bert_session* session, size_t index, const char** name,
                                     int* ndim, int64_t shape[BERT_MAX_PARAM_DIMS]);
/* Copies a parameter (count = product of its shape) out of / into the session. */
BERT_API bert_status bert_param_read(bert_session* session, const char* name, float* dst,
                                     size_t count);
BERT_API bert_status bert_param_write(bert_session* session, const char* name, const float* src,
                                      size_t count);
/* Copies the gradient accumulated since the last optimizer step (the sum over micro-batches
 * of each micro-batch's mean-loss gradient, not yet averaged). */
BERT_API bert_status bert_grad_read(bert_session* session, const char* name, float* dst,
                                    size_t count);

/* ---- memory ----------------------------------------------------------------------------- */
typedef struct bert_memory_info {
  size_t struct_size;
  uint64_t parameter_bytes;  /* fp32 weights (flat buffer) */
  uint64_t gradient_bytes;
  uint64_t optimizer_bytes;  /* optimizer state (Adam: moments and the update buffer; SGD: momentum) */
  uint64_t activation_bytes; /* the activation arena, sized once for the largest micro-batch */
  uint64_t peak_device_bytes; /* peak backend memory held at once (device memory on a GPU) */
} bert_memory_info;
/* As bert_batch_init_sized. */
BERT_API void bert_memory_info_init_sized(bert_memory_info* info, size_t size);
#define bert_memory_info_init(info) bert_memory_info_init_sized((info), sizeof(*(info)))
/* The backend memory this session holds, from the engine's own accounting. */
BERT_API bert_status bert_session_memory(const bert_session* session, bert_memory_info* info);

/* This session's place in the distributed run (rank 0 of 1 without one); any argument but
 * the session may be NULL. */
BERT_API bert_status bert_session_rank(const bert_session* session, int* rank, int* world_size,
                                       int* local_rank);

#ifdef __cplusplus
}
#endif

#endif /* BERT_H */
