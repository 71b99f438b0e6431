//! Batch: one batch of pretraining samples (NVIDIA DLE field names) borrowing the caller's
//! row-major i32 slices; checked for lengths before the engine sees it.
use crate::error::{Error, Result, Status};
use bertengine_sys as sys;

/// `input_ids`, `segment_ids`, `input_mask`: `batch_size * seq_length` values;
/// `masked_lm_positions`, `masked_lm_ids`: `batch_size * max_predictions`;
/// `next_sentence_labels`: `batch_size`.
#[derive(Clone, Copy, Debug)]
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
        for (name, data, want) in [
            ("input_ids", self.input_ids, bs),
            ("segment_ids", self.segment_ids, bs),
            ("input_mask", self.input_mask, bs),
            ("masked_lm_positions", self.masked_lm_positions, bp),
            ("masked_lm_ids", self.masked_lm_ids, bp),
            ("next_sentence_labels", self.next_sentence_labels, b),
        ] {
            if data.len() != want {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("batch field {name} has {} values, want {want}", data.len()),
                ));
            }
        }
        // SAFETY: bert_batch is plain data; bert_batch_init fills struct_size and defaults.
        let mut raw: sys::bert_batch = unsafe { std::mem::zeroed() };
        unsafe { sys::bert_batch_init(&mut raw) };
        raw.batch_size = dim("batch_size", b)?;
        raw.seq_length = dim("seq_length", s)?;
        raw.max_predictions = dim("max_predictions", p)?;
        raw.input_ids = self.input_ids.as_ptr();
        raw.segment_ids = self.segment_ids.as_ptr();
        raw.input_mask = self.input_mask.as_ptr();
        raw.masked_lm_positions = self.masked_lm_positions.as_ptr();
        raw.masked_lm_ids = self.masked_lm_ids.as_ptr();
        raw.next_sentence_labels = self.next_sentence_labels.as_ptr();
        Ok(raw)
    }
}
