//! Session: owns one bert_session; each method is one C call with its types, errors and
//! lifetimes translated. Also the distributed setup, results, parameters and the log callback.
use crate::batch::Batch;
use crate::error::{Error, Result, Status};
use bertengine_sys as sys;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// Communicator of a distributed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistBackend {
    /// From the launcher's environment (Open MPI, Slurm, torchrun), else local.
    Auto,
    Local,
    Mpi,
    Nccl,
}

/// Placement of a session in a distributed run; `None` fields come from the environment.
#[derive(Clone, Debug)]
pub struct Dist {
    pub backend: DistBackend,
    pub rank: Option<i32>,
    pub world_size: Option<i32>,
    pub local_rank: Option<i32>,
    /// NCCL bootstrap id made by [`nccl_unique_id`] on rank 0.
    pub nccl_unique_id: Option<[u8; sys::BERT_NCCL_UNIQUE_ID_BYTES]>,
}

impl Default for Dist {
    fn default() -> Dist {
        Dist {
            backend: DistBackend::Auto,
            rank: None,
            world_size: None,
            local_rank: None,
            nccl_unique_id: None,
        }
    }
}

/// NCCL's bootstrap id (bert_dist_unique_id); call on rank 0 and carry it to every rank.
pub fn nccl_unique_id() -> Result<[u8; sys::BERT_NCCL_UNIQUE_ID_BYTES]> {
    let mut id = [0u8; sys::BERT_NCCL_UNIQUE_ID_BYTES];
    Error::check(unsafe { sys::bert_dist_unique_id(id.as_mut_ptr()) })?;
    Ok(id)
}

/// bert_step_result: losses and throughput of one call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    pub step: i64,
    pub loss: f32,
    pub mlm_loss: f32,
    pub nsp_loss: f32,
    pub learning_rate: f32,
    pub grad_norm: f32,
    pub loss_scale: f32,
    pub skipped: bool,
    pub micro_batches: i32,
    pub sequences: i64,
    pub step_seconds: f64,
    pub sequences_per_second: f64,
    pub tokens_per_second: f64,
}

impl From<sys::bert_step_result> for StepResult {
    fn from(r: sys::bert_step_result) -> StepResult {
        StepResult {
            step: r.step,
            loss: r.loss,
            mlm_loss: r.mlm_loss,
            nsp_loss: r.nsp_loss,
            learning_rate: r.learning_rate,
            grad_norm: r.grad_norm,
            loss_scale: r.loss_scale,
            skipped: r.skipped != 0,
            micro_batches: r.micro_batches,
            sequences: r.sequences,
            step_seconds: r.step_seconds,
            sequences_per_second: r.sequences_per_second,
            tokens_per_second: r.tokens_per_second,
        }
    }
}

/// bert_eval_result: masked-LM and next-sentence metrics (pretraining sessions), or the
/// fine-tuning head's loss and accuracy over `task_count` sequences or labelled tokens (task
/// sessions; accuracy NaN for regression, whose loss is the MSE). Fields of the other kind of
/// session are 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalResult {
    pub mlm_accuracy: f64,
    pub mlm_loss: f64,
    pub nsp_accuracy: f64,
    pub nsp_loss: f64,
    pub sequences: i64,
    pub masked_tokens: i64,
    pub task_loss: f64,
    pub task_accuracy: f64,
    pub task_count: i64,
}

/// bert_memory_info: backend memory a session holds, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    pub parameter_bytes: u64,
    pub gradient_bytes: u64,
    pub optimizer_bytes: u64,
    pub activation_bytes: u64,
    pub peak_device_bytes: u64,
}

/// Reduction of [`Session::allreduce_host`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
}

/// What [`Session::infer`] returns (bert_output), row-major f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The head's logits: `[B, num_labels]` (sequence classification), `[B, S, num_labels]`
    /// (token classification), `[B, 2, S]` (question answering: start then end logits),
    /// `[B, 2]` (pretraining: next-sentence logits).
    Logits,
    /// The pooler's output `[B, H]`.
    Pooled,
    /// The last hidden states `[B, S, H]`.
    Hidden,
}

/// A parameter's Hugging Face name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub shape: Vec<i64>,
}

impl Param {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Engine log levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

/// Routes the engine's log lines to `f` (None: the default, warnings and errors to stderr).
/// `f` may be called from any thread that runs engine code.
pub fn set_log_callback(f: Option<fn(LogLevel, &str)>) {
    unsafe extern "C" fn trampoline(
        level: sys::bert_log_level,
        message: *const c_char,
        user: *mut c_void,
    ) {
        // SAFETY: user is the fn pointer registered below; message is a NUL-terminated string.
        let f: fn(LogLevel, &str) = std::mem::transmute::<*mut c_void, fn(LogLevel, &str)>(user);
        let level = match level {
            sys::BERT_LOG_DEBUG => LogLevel::Debug,
            sys::BERT_LOG_INFO => LogLevel::Info,
            sys::BERT_LOG_WARNING => LogLevel::Warning,
            sys::BERT_LOG_ERROR => LogLevel::Error,
            _ => LogLevel::Error, // a level of a newer library
        };
        let msg = CStr::from_ptr(message).to_string_lossy();
        // A panic must not unwind into C.
        let _ = std::panic::catch_unwind(|| f(level, &msg));
    }
    match f {
        Some(f) => unsafe { sys::bert_set_log_callback(Some(trampoline), f as *mut c_void) },
        None => unsafe { sys::bert_set_log_callback(None, ptr::null_mut()) },
    }
}

/// The handle, shared with abort handles; destroyed when the last owner goes.
struct Handle(NonNull<sys::bert_session>);

// SAFETY: the header allows bert_session_abort from any thread at any time; every other call
// goes through Session, which is not Sync and so is used by one thread at a time.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { sys::bert_session_destroy(self.0.as_ptr()) }
    }
}

/// Stops a call running on another thread: it returns [`Status::Aborted`] at its next check
/// between layers (or, if none is running, the next call does). Keeps the session alive.
#[derive(Clone)]
pub struct AbortHandle(Arc<Handle>);

impl AbortHandle {
    pub fn abort(&self) {
        unsafe { sys::bert_session_abort(self.0 .0.as_ptr()) }
    }

    /// Withdraws an abort no call has consumed yet (bert_session_clear_abort): a watcher that
    /// may abort just as the call returns calls this after stopping, so the next call runs.
    pub fn clear(&self) {
        unsafe { sys::bert_session_clear_abort(self.0 .0.as_ptr()) }
    }
}

/// This session's place in a distributed run (bert_session_rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankInfo {
    pub rank: i32,
    pub world_size: i32,
    pub local_rank: i32,
}

/// A BERT pretraining session (bert_session). Dropping it frees the engine session.
pub struct Session {
    handle: Arc<Handle>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("handle", &self.handle.0)
            .finish()
    }
}

fn cstring(what: &str, s: &[u8]) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{what} contains a NUL byte"),
        )
    })
}

fn path_cstring(path: &Path) -> Result<CString> {
    cstring("path", path.as_os_str().as_bytes())
}

impl Session {
    /// Creates a session from JSON config text (schema: README.md "Config schema").
    pub fn new(config: &str) -> Result<Session> {
        Session::with_dist(config, &Dist::default())
    }

    /// Creates a session in a distributed run. Collective: every rank calls it.
    pub fn with_dist(config: &str, dist: &Dist) -> Result<Session> {
        let cfg = cstring("config", config.as_bytes())?;
        // SAFETY: bert_dist is plain data; bert_dist_init_sized fills it.
        let mut d: sys::bert_dist = unsafe { std::mem::zeroed() };
        unsafe { sys::bert_dist_init_sized(&mut d, std::mem::size_of::<sys::bert_dist>()) };
        d.backend = match dist.backend {
            DistBackend::Auto => sys::BERT_DIST_AUTO,
            DistBackend::Local => sys::BERT_DIST_LOCAL,
            DistBackend::Mpi => sys::BERT_DIST_MPI,
            DistBackend::Nccl => sys::BERT_DIST_NCCL,
        };
        d.rank = dist.rank.unwrap_or(-1);
        d.world_size = dist.world_size.unwrap_or(-1);
        d.local_rank = dist.local_rank.unwrap_or(-1);
        if let Some(id) = dist.nccl_unique_id {
            d.has_nccl_unique_id = 1;
            d.nccl_unique_id = id;
        }
        let mut raw: *mut sys::bert_session = ptr::null_mut();
        Error::check(unsafe { sys::bert_session_create(cfg.as_ptr(), &d, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(Status::Internal, "bert_session_create returned no session")
        })?;
        Ok(Session {
            handle: Arc::new(Handle(raw)),
            _not_sync: PhantomData,
        })
    }

    /// Frees the session now (the same as dropping it; a pending AbortHandle keeps it alive).
    pub fn close(self) {}

    fn raw(&self) -> *mut sys::bert_session {
        self.handle.0.as_ptr()
    }

    /// A handle that aborts this session's running call from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.handle.clone())
    }

    /// The resolved config (defaults filled in) as JSON text.
    pub fn config(&self) -> String {
        unsafe { CStr::from_ptr(sys::bert_session_config(self.raw())) }
            .to_string_lossy()
            .into_owned()
    }

    /// One optimizer step on `batch`, or (None) on the session's own data. Collective.
    pub fn step(&mut self, batch: Option<&Batch<'_>>) -> Result<StepResult> {
        let raw = batch.map(Batch::as_raw).transpose()?;
        let mut r = step_result();
        Error::check(unsafe {
            sys::bert_step(self.raw(), raw.as_ref().map_or(ptr::null(), |b| b), &mut r)
        })?;
        Ok(r.into())
    }

    /// Forward and backward of one micro-batch; gradients accumulate until optimizer_step.
    pub fn forward_backward(&mut self, batch: &Batch<'_>) -> Result<StepResult> {
        let raw = batch.as_raw()?;
        let mut r = step_result();
        Error::check(unsafe { sys::bert_forward_backward(self.raw(), &raw, &mut r) })?;
        Ok(r.into())
    }

    /// Sums the accumulated gradients over ranks. Collective.
    pub fn allreduce(&mut self) -> Result<()> {
        Error::check(unsafe { sys::bert_allreduce(self.raw()) })
    }

    /// Averages the accumulated gradients, clips and applies the optimizer.
    pub fn optimizer_step(&mut self) -> Result<StepResult> {
        let mut r = step_result();
        Error::check(unsafe { sys::bert_optimizer_step(self.raw(), &mut r) })?;
        Ok(r.into())
    }

    /// Evaluation without dropout or gradients on `batch`, or (None) on the configured eval data
    /// (a task session: a batch with its labels, required).
    pub fn eval(&mut self, batch: Option<&Batch<'_>>) -> Result<EvalResult> {
        let raw = batch.map(Batch::as_raw).transpose()?;
        let mut r: sys::bert_eval_result = Default::default();
        unsafe { sys::bert_eval_result_init_sized(&mut r, std::mem::size_of::<sys::bert_eval_result>()) };
        Error::check(unsafe {
            sys::bert_eval(self.raw(), raw.as_ref().map_or(ptr::null(), |b| b), &mut r)
        })?;
        Ok(EvalResult {
            mlm_accuracy: r.mlm_accuracy,
            mlm_loss: r.mlm_loss,
            nsp_accuracy: r.nsp_accuracy,
            nsp_loss: r.nsp_loss,
            sequences: r.sequences,
            masked_tokens: r.masked_tokens,
            task_loss: r.task_loss,
            task_accuracy: r.task_accuracy,
            task_count: r.task_count,
        })
    }

    /// Runs the model on `batch` without dropout or gradients (bert_infer) and returns `what`
    /// as a `Vec` of `bert_output_size` floats; per-token outputs are 0 at padding positions.
    pub fn infer(&mut self, batch: &Batch<'_>, what: Output) -> Result<Vec<f32>> {
        let raw = batch.as_raw()?;
        let what = match what {
            Output::Logits => sys::BERT_OUTPUT_LOGITS,
            Output::Pooled => sys::BERT_OUTPUT_POOLED,
            Output::Hidden => sys::BERT_OUTPUT_HIDDEN,
        };
        let mut count = 0usize;
        Error::check(unsafe {
            sys::bert_output_size(self.raw(), what, raw.batch_size, raw.seq_length, &mut count)
        })?;
        let mut out = vec![0f32; count];
        Error::check(unsafe { sys::bert_infer(self.raw(), &raw, what, out.as_mut_ptr(), out.len()) })?;
        Ok(out)
    }

    /// Reduces `data` in place across ranks. Collective.
    pub fn allreduce_host(&mut self, data: &mut [f32], op: ReduceOp) -> Result<()> {
        let op = match op {
            ReduceOp::Sum => sys::BERT_REDUCE_SUM,
            ReduceOp::Mean => sys::BERT_REDUCE_MEAN,
            ReduceOp::Max => sys::BERT_REDUCE_MAX,
        };
        Error::check(unsafe {
            sys::bert_allreduce_host(self.raw(), data.as_mut_ptr(), data.len(), op)
        })
    }

    /// Writes the full training state to `path` (None: checkpoint.dir/ckpt_<step>.h5).
    /// Collective; rank 0 writes the file.
    pub fn checkpoint(&mut self, path: Option<&Path>) -> Result<()> {
        let p = path.map(path_cstring).transpose()?;
        Error::check(unsafe {
            sys::bert_checkpoint(self.raw(), p.as_ref().map_or(ptr::null(), |p| p.as_ptr()))
        })
    }

    /// Resumes the full training state from a checkpoint (exact continuation).
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<()> {
        let p = path_cstring(path)?;
        Error::check(unsafe { sys::bert_checkpoint_load(self.raw(), p.as_ptr()) })
    }

    /// Loads only the weights of a checkpoint or weights file.
    pub fn load_weights(&mut self, path: &Path) -> Result<()> {
        let p = path_cstring(path)?;
        Error::check(unsafe { sys::bert_checkpoint_load_weights(self.raw(), p.as_ptr()) })
    }

    /// Resumes from the newest valid checkpoint in `dir` (None: checkpoint.dir); returns its
    /// step, or None when there is none.
    pub fn resume(&mut self, dir: Option<&Path>) -> Result<Option<i64>> {
        let d = dir.map(path_cstring).transpose()?;
        let mut step = -1i64;
        Error::check(unsafe {
            sys::bert_checkpoint_resume(
                self.raw(),
                d.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
                &mut step,
            )
        })?;
        Ok((step >= 0).then_some(step))
    }

    /// The session's rank, world size and local rank (0, 1, 0 without a distributed run).
    pub fn rank(&self) -> Result<RankInfo> {
        let (mut rank, mut world_size, mut local_rank) = (0, 0, 0);
        Error::check(unsafe {
            sys::bert_session_rank(self.raw(), &mut rank, &mut world_size, &mut local_rank)
        })?;
        Ok(RankInfo {
            rank,
            world_size,
            local_rank,
        })
    }

    /// The backend memory this session holds (bert_session_memory).
    pub fn memory(&self) -> Result<MemoryInfo> {
        let mut m: sys::bert_memory_info = Default::default();
        unsafe { sys::bert_memory_info_init_sized(&mut m, std::mem::size_of::<sys::bert_memory_info>()) };
        Error::check(unsafe { sys::bert_session_memory(self.raw(), &mut m) })?;
        Ok(MemoryInfo {
            parameter_bytes: m.parameter_bytes,
            gradient_bytes: m.gradient_bytes,
            optimizer_bytes: m.optimizer_bytes,
            activation_bytes: m.activation_bytes,
            peak_device_bytes: m.peak_device_bytes,
        })
    }

    /// The parameters (Hugging Face BertForPreTraining names) and their shapes.
    pub fn params(&self) -> Result<Vec<Param>> {
        let mut count = 0usize;
        Error::check(unsafe { sys::bert_param_count(self.raw(), &mut count) })?;
        (0..count)
            .map(|i| {
                let (mut name, mut ndim, mut shape) = (ptr::null(), 0, [0i64; sys::BERT_MAX_PARAM_DIMS]);
                Error::check(unsafe {
                    sys::bert_param_info(self.raw(), i, &mut name, &mut ndim, shape.as_mut_ptr())
                })?;
                let name = unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned();
                Ok(Param {
                    name,
                    shape: shape[..ndim.clamp(0, sys::BERT_MAX_PARAM_DIMS as i32) as usize].to_vec(),
                })
            })
            .collect()
    }

    fn param_len(&self, name: &str) -> Result<usize> {
        self.params()?
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.len())
            .ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    format!("no parameter named '{name}'"),
                )
            })
    }

    /// A copy of a parameter (row-major, product-of-shape values).
    pub fn read_param(&mut self, name: &str) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.param_len(name)?];
        self.read_param_into(name, &mut out)?;
        Ok(out)
    }

    /// Copies a parameter into `dst`, whose length must be the parameter's size.
    pub fn read_param_into(&mut self, name: &str, dst: &mut [f32]) -> Result<()> {
        let n = cstring("parameter name", name.as_bytes())?;
        Error::check(unsafe {
            sys::bert_param_read(self.raw(), n.as_ptr(), dst.as_mut_ptr(), dst.len())
        })
    }

    /// The gradient accumulated since the last optimizer step.
    pub fn read_grad(&mut self, name: &str) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.param_len(name)?];
        let n = cstring("parameter name", name.as_bytes())?;
        Error::check(unsafe {
            sys::bert_grad_read(self.raw(), n.as_ptr(), out.as_mut_ptr(), out.len())
        })?;
        Ok(out)
    }

    /// Overwrites a parameter; `src.len()` must be its size.
    pub fn write_param(&mut self, name: &str, src: &[f32]) -> Result<()> {
        let n = cstring("parameter name", name.as_bytes())?;
        Error::check(unsafe {
            sys::bert_param_write(self.raw(), n.as_ptr(), src.as_ptr(), src.len())
        })
    }
}

fn step_result() -> sys::bert_step_result {
    let mut r: sys::bert_step_result = Default::default();
    unsafe { sys::bert_step_result_init_sized(&mut r, std::mem::size_of::<sys::bert_step_result>()) };
    r
}
