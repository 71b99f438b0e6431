/* Sizes and offsets of capi/bert.h's structs as the C compiler lays them out, and its size
 * constants, in the order of
 * LAYOUT in bertengine-sys/tests/layout.rs, which compares them with the Rust declarations. */
#include <stddef.h>
#include <bert.h>

static const size_t layout[] = {
    sizeof(bert_dist), offsetof(bert_dist, struct_size), offsetof(bert_dist, backend),
    offsetof(bert_dist, rank), offsetof(bert_dist, world_size), offsetof(bert_dist, local_rank),
    offsetof(bert_dist, has_nccl_unique_id), offsetof(bert_dist, nccl_unique_id),

    sizeof(bert_batch), offsetof(bert_batch, struct_size), offsetof(bert_batch, batch_size),
    offsetof(bert_batch, seq_length), offsetof(bert_batch, max_predictions),
    offsetof(bert_batch, input_ids), offsetof(bert_batch, segment_ids),
    offsetof(bert_batch, input_mask), offsetof(bert_batch, masked_lm_positions),
    offsetof(bert_batch, masked_lm_ids), offsetof(bert_batch, next_sentence_labels),
    offsetof(bert_batch, labels), offsetof(bert_batch, label_values),
    offsetof(bert_batch, start_positions), offsetof(bert_batch, end_positions),

    sizeof(bert_step_result), offsetof(bert_step_result, struct_size),
    offsetof(bert_step_result, step), offsetof(bert_step_result, loss),
    offsetof(bert_step_result, mlm_loss), offsetof(bert_step_result, nsp_loss),
    offsetof(bert_step_result, learning_rate), offsetof(bert_step_result, grad_norm),
    offsetof(bert_step_result, loss_scale), offsetof(bert_step_result, skipped),
    offsetof(bert_step_result, micro_batches), offsetof(bert_step_result, sequences),
    offsetof(bert_step_result, step_seconds), offsetof(bert_step_result, sequences_per_second),
    offsetof(bert_step_result, tokens_per_second),

    sizeof(bert_eval_result), offsetof(bert_eval_result, struct_size),
    offsetof(bert_eval_result, mlm_accuracy), offsetof(bert_eval_result, mlm_loss),
    offsetof(bert_eval_result, nsp_accuracy), offsetof(bert_eval_result, nsp_loss),
    offsetof(bert_eval_result, sequences), offsetof(bert_eval_result, masked_tokens),
    offsetof(bert_eval_result, task_loss), offsetof(bert_eval_result, task_accuracy),
    offsetof(bert_eval_result, task_count),

    sizeof(bert_memory_info), offsetof(bert_memory_info, struct_size),
    offsetof(bert_memory_info, parameter_bytes), offsetof(bert_memory_info, gradient_bytes),
    offsetof(bert_memory_info, optimizer_bytes), offsetof(bert_memory_info, activation_bytes),
    offsetof(bert_memory_info, peak_device_bytes),

    sizeof(bert_status), sizeof(bert_dist_backend), sizeof(bert_reduce_op), sizeof(bert_log_level),

    BERT_NCCL_UNIQUE_ID_BYTES, BERT_MAX_PARAM_DIMS,
};

size_t bert_sys_layout_count(void) { return sizeof layout / sizeof layout[0]; }
size_t bert_sys_layout(size_t i) { return i < sizeof layout / sizeof layout[0] ? layout[i] : (size_t)-1; }
