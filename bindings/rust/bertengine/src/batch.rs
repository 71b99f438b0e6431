//! Batch: one batch of samples (NVIDIA DLE field names, plus the labels of the fine-tuning
//! heads) borrowing the caller's row-major slices; checked for lengths before the engine sees
//! it. An empty slice is an absent field (NULL).
use crate::error::{Error, Result, Status};
use bertengine_sys as sys;
use std::ptr;

/// `input_ids`, `segment_ids`, `input_mask`: `batch_size * seq_length` values;
/// `masked_lm_positions`, `masked_lm_ids`: `batch_size * max_predictions`;
/// `next_sentence_labels`: `batch_size` (pretraining). Fine-tuning labels (see `bert_batch` in
/// bert.h): `labels` `batch_size` (sequence classification) or `batch_size * seq_length`
/// (token classification, negative = ignored); `label_values` `batch_size` (regression);
/// `start_positions`, `end_positions` `batch_size` (question answering). Fields a call does not
/// need may be empty: `Batch { input_ids: &ids, segment_ids: &seg, input_mask: &mask,
/// batch_size: b, seq_length: s, ..Default::default() }` is an inference batch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Batch<'a> {
    pub batch_size: usize,
    pub seq_length: usize,
    pub max_predictions: usize,
    pub input_ids: &'a [i32],
    pub segment_ids: &'a [i32],
    pub input_mask: &'a [i32],
    pub masked_lm_positions: &'a [i32],
    pub masked_lm_ids: &'a [i32],
    pub next_sentence_labels: &'a [i32],
    pub labels: &'a [i32],
    pub label_values: &'a [f32],
    pub start_positions: &'a [i32],
    pub end_positions: &'a [i32],
}

fn or_null<T>(data: &[T]) -> *const T {
    if data.is_empty() {
        ptr::null()
    } else {
        data.as_ptr()
    }
}

impl<'a> Batch<'a> {
    /// The bert_batch pointing into the slices (valid while they are borrowed).
    pub(crate) fn as_raw(&self) -> Result<sys::bert_batch> {
        let dim = |name: &str, v: usize| {
            i32::try_from(v).map_err(|_| {
                Error::new(
                    Status::InvalidArgument,
                    format!("batch {name} {v} is too large"),
                )
            })
        };
        let (b, s, p) = (self.batch_size, self.seq_length, self.max_predictions);
        let bs = b.checked_mul(s).ok_or_else(|| {
            Error::new(Status::InvalidArgument, "batch_size * seq_length overflows")
        })?;
        let bp = b.checked_mul(p).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                "batch_size * max_predictions overflows",
            )
        })?;
        // (name, length, allowed lengths): optional fields may also be empty.
        for (name, len, want) in [
            ("input_ids", self.input_ids.len(), [bs, bs]),
            ("segment_ids", self.segment_ids.len(), [bs, bs]),
            ("input_mask", self.input_mask.len(), [bs, bs]),
            ("masked_lm_positions", self.masked_lm_positions.len(), [bp, bp]),
            ("masked_lm_ids", self.masked_lm_ids.len(), [bp, bp]),
            ("next_sentence_labels", self.next_sentence_labels.len(), [b, 0]),
            ("labels", self.labels.len(), [b, bs]),
            ("label_values", self.label_values.len(), [b, 0]),
            ("start_positions", self.start_positions.len(), [b, 0]),
            ("end_positions", self.end_positions.len(), [b, 0]),
        ] {
            let optional = !name.starts_with("input") && name != "segment_ids" && !name.starts_with("masked");
            if !(want.contains(&len) || (optional && len == 0)) {
                let wanted = if want[0] == want[1] || want[1] == 0 {
                    format!("{}", want[0])
                } else {
                    format!("{} or {}", want[0], want[1])
                };
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("batch field {name} has {len} values, want {wanted}"),
                ));
            }
        }
        // SAFETY: bert_batch is plain data; bert_batch_init_sized fills struct_size and defaults.
        let mut raw: sys::bert_batch = unsafe { std::mem::zeroed() };
        unsafe { sys::bert_batch_init_sized(&mut raw, std::mem::size_of::<sys::bert_batch>()) };
        raw.batch_size = dim("batch_size", b)?;
        raw.seq_length = dim("seq_length", s)?;
        raw.max_predictions = dim("max_predictions", p)?;
        raw.input_ids = self.input_ids.as_ptr();
        raw.segment_ids = self.segment_ids.as_ptr();
        raw.input_mask = self.input_mask.as_ptr();
        raw.masked_lm_positions = or_null(self.masked_lm_positions);
        raw.masked_lm_ids = or_null(self.masked_lm_ids);
        raw.next_sentence_labels = or_null(self.next_sentence_labels);
        raw.labels = or_null(self.labels);
        raw.label_values = or_null(self.label_values);
        raw.start_positions = or_null(self.start_positions);
        raw.end_positions = or_null(self.end_positions);
        Ok(raw)
    }
}
