//! Safe Rust host for bertengine, a BERT pretraining, fine-tuning and inference engine with a C
//! ABI (capi/bert.h).
//!
//! ```no_run
//! let mut s = bertengine::Session::new(r#"{"model": "bert-tiny", "train": {"steps": 100}}"#)?;
//! for _ in 0..100 {
//!     let r = s.step(None)?;
//!     println!("step {} loss {:.4}", r.step, r.loss);
//! }
//! s.checkpoint(Some("tiny.h5".as_ref()))?;
//! # Ok::<(), bertengine::Error>(())
//! ```
//!
//! [`Session`] owns the engine session and frees it on drop. It is `Send` (the header allows a
//! session to move between threads, one thread at a time) but not `Sync`; [`AbortHandle`]
//! stops a running call from another thread. Every fallible call returns [`Result`].
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<bertengine::Session>(); // a session is used by one thread at a time
//! ```
mod batch;
mod error;
mod session;

pub use batch::Batch;
pub use error::{Error, Result, Status};
pub use session::{
    nccl_unique_id, set_log_callback, AbortHandle, Dist, DistBackend, EvalResult, LogLevel, Output,
    Param, RankInfo, ReduceOp, Session, StepResult,
};

use bertengine_sys as sys;
use std::ffi::CStr;

/// The engine library's version string ("0.1.0").
pub fn version() -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::bert_version()) }
        .to_string_lossy()
        .into_owned()
}

/// The library's ABI version; equals [`bertengine_sys::BERT_API_VERSION`] when compatible.
pub fn api_version() -> i32 {
    unsafe { sys::bert_api_version() }
}

/// Gives back what the engine took process-wide (bert_finalize: MPI, when a session
/// initialised it because the host had not). Call once, after every session is dropped and
/// before the process exits; afterwards no MPI session can be created in this process.
pub fn finalize() -> Result<()> {
    Error::check(unsafe { sys::bert_finalize() })
}
