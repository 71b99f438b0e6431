//! Checks that the Rust declarations of the C structs have the sizes and field offsets the C
//! compiler gives them (shim/layout.c, compiled by build.rs).
use bertengine_sys::*;
#[cfg(bert_layout_shim)]
use std::mem::{offset_of, size_of};

#[cfg(bert_layout_shim)]
extern "C" {
    fn bert_sys_layout_count() -> usize;
    fn bert_sys_layout(i: usize) -> usize;
}

#[cfg(bert_layout_shim)]
#[test]
fn struct_layout_matches_c() {
    let layout: &[(&str, usize)] = &[
        ("sizeof bert_dist", size_of::<bert_dist>()),
        ("bert_dist.struct_size", offset_of!(bert_dist, struct_size)),
        ("bert_dist.backend", offset_of!(bert_dist, backend)),
        ("bert_dist.rank", offset_of!(bert_dist, rank)),
        ("bert_dist.world_size", offset_of!(bert_dist, world_size)),
        ("bert_dist.local_rank", offset_of!(bert_dist, local_rank)),
        (
            "bert_dist.has_nccl_unique_id",
            offset_of!(bert_dist, has_nccl_unique_id),
        ),
        (
            "bert_dist.nccl_unique_id",
            offset_of!(bert_dist, nccl_unique_id),
        ),
        ("sizeof bert_batch", size_of::<bert_batch>()),
        (
            "bert_batch.struct_size",
            offset_of!(bert_batch, struct_size),
        ),
        ("bert_batch.batch_size", offset_of!(bert_batch, batch_size)),
        ("bert_batch.seq_length", offset_of!(bert_batch, seq_length)),
        (
            "bert_batch.max_predictions",
            offset_of!(bert_batch, max_predictions),
        ),
        ("bert_batch.input_ids", offset_of!(bert_batch, input_ids)),
        (
            "bert_batch.segment_ids",
            offset_of!(bert_batch, segment_ids),
        ),
        ("bert_batch.input_mask", offset_of!(bert_batch, input_mask)),
        (
            "bert_batch.masked_lm_positions",
            offset_of!(bert_batch, masked_lm_positions),
        ),
        (
            "bert_batch.masked_lm_ids",
            offset_of!(bert_batch, masked_lm_ids),
        ),
        (
            "bert_batch.next_sentence_labels",
            offset_of!(bert_batch, next_sentence_labels),
        ),
        ("bert_batch.labels", offset_of!(bert_batch, labels)),
        (
            "bert_batch.label_values",
            offset_of!(bert_batch, label_values),
        ),
        (
            "bert_batch.start_positions",
            offset_of!(bert_batch, start_positions),
        ),
        (
            "bert_batch.end_positions",
            offset_of!(bert_batch, end_positions),
        ),
        ("sizeof bert_step_result", size_of::<bert_step_result>()),
        (
            "bert_step_result.struct_size",
            offset_of!(bert_step_result, struct_size),
        ),
        ("bert_step_result.step", offset_of!(bert_step_result, step)),
        ("bert_step_result.loss", offset_of!(bert_step_result, loss)),
        (
            "bert_step_result.mlm_loss",
            offset_of!(bert_step_result, mlm_loss),
        ),
        (
            "bert_step_result.nsp_loss",
            offset_of!(bert_step_result, nsp_loss),
        ),
        (
            "bert_step_result.learning_rate",
            offset_of!(bert_step_result, learning_rate),
        ),
        (
            "bert_step_result.grad_norm",
            offset_of!(bert_step_result, grad_norm),
        ),
        (
            "bert_step_result.loss_scale",
            offset_of!(bert_step_result, loss_scale),
        ),
        (
            "bert_step_result.skipped",
            offset_of!(bert_step_result, skipped),
        ),
        (
            "bert_step_result.micro_batches",
            offset_of!(bert_step_result, micro_batches),
        ),
        (
            "bert_step_result.sequences",
            offset_of!(bert_step_result, sequences),
        ),
        (
            "bert_step_result.step_seconds",
            offset_of!(bert_step_result, step_seconds),
        ),
        (
            "bert_step_result.sequences_per_second",
            offset_of!(bert_step_result, sequences_per_second),
        ),
        (
            "bert_step_result.tokens_per_second",
            offset_of!(bert_step_result, tokens_per_second),
        ),
        ("sizeof bert_eval_result", size_of::<bert_eval_result>()),
        (
            "bert_eval_result.struct_size",
            offset_of!(bert_eval_result, struct_size),
        ),
        (
            "bert_eval_result.mlm_accuracy",
            offset_of!(bert_eval_result, mlm_accuracy),
        ),
        (
            "bert_eval_result.mlm_loss",
            offset_of!(bert_eval_result, mlm_loss),
        ),
        (
            "bert_eval_result.nsp_accuracy",
            offset_of!(bert_eval_result, nsp_accuracy),
        ),
        (
            "bert_eval_result.nsp_loss",
            offset_of!(bert_eval_result, nsp_loss),
        ),
        (
            "bert_eval_result.sequences",
            offset_of!(bert_eval_result, sequences),
        ),
        (
            "bert_eval_result.masked_tokens",
            offset_of!(bert_eval_result, masked_tokens),
        ),
        (
            "bert_eval_result.task_loss",
            offset_of!(bert_eval_result, task_loss),
        ),
        (
            "bert_eval_result.task_accuracy",
            offset_of!(bert_eval_result, task_accuracy),
        ),
        (
            "bert_eval_result.task_count",
            offset_of!(bert_eval_result, task_count),
        ),
        ("sizeof bert_memory_info", size_of::<bert_memory_info>()),
        (
            "bert_memory_info.struct_size",
            offset_of!(bert_memory_info, struct_size),
        ),
        (
            "bert_memory_info.parameter_bytes",
            offset_of!(bert_memory_info, parameter_bytes),
        ),
        (
            "bert_memory_info.gradient_bytes",
            offset_of!(bert_memory_info, gradient_bytes),
        ),
        (
            "bert_memory_info.optimizer_bytes",
            offset_of!(bert_memory_info, optimizer_bytes),
        ),
        (
            "bert_memory_info.activation_bytes",
            offset_of!(bert_memory_info, activation_bytes),
        ),
        (
            "bert_memory_info.peak_device_bytes",
            offset_of!(bert_memory_info, peak_device_bytes),
        ),
        ("sizeof bert_status", size_of::<bert_status>()),
        ("sizeof bert_dist_backend", size_of::<bert_dist_backend>()),
        ("sizeof bert_reduce_op", size_of::<bert_reduce_op>()),
        ("sizeof bert_log_level", size_of::<bert_log_level>()),
        ("BERT_NCCL_UNIQUE_ID_BYTES", BERT_NCCL_UNIQUE_ID_BYTES),
        ("BERT_MAX_PARAM_DIMS", BERT_MAX_PARAM_DIMS),
    ];
    assert_eq!(
        unsafe { bert_sys_layout_count() },
        layout.len(),
        "shim/layout.c and this table list different fields"
    );
    for (i, (name, rust)) in layout.iter().enumerate() {
        assert_eq!(
            *rust,
            unsafe { bert_sys_layout(i) },
            "{name}: Rust {rust}, C differs"
        );
    }
}

#[test]
fn library_matches_header_version() {
    assert_eq!(unsafe { bert_api_version() }, BERT_API_VERSION);
}

#[cfg(not(bert_layout_shim))]
#[test]
fn struct_layout_matches_c() {
    eprintln!("skipped: build.rs could not compile shim/layout.c (no C compiler or bert.h; see its warning)");
}
