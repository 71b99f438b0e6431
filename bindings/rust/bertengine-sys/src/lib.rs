//! Raw declarations of bertengine's C ABI (capi/bert.h), one to one: the structs are
//! `#[repr(C)]`, the C enums are `c_int` type aliases with their constants. See the header for
//! ownership, threading and collective-call rules. Use the `bertengine` crate for a safe API.
//!
//! The functions are not linked at build time: the first call loads libbert with `dlopen` from
//! the path build.rs found (BERT_LIB_DIR or `pkg-config bert`), falling back to the dynamic
//! loader's search for `libbert.so.1`. A program using the crate thus runs without
//! LD_LIBRARY_PATH and without an rpath of its own (cargo cannot give dependents' binaries one).
#![allow(non_camel_case_types)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uchar, c_void};
use std::sync::OnceLock;

pub const BERT_API_VERSION: c_int = 1;
/// Sizes fixed by the ABI (checked against the C header by tests/layout.rs).
pub const BERT_NCCL_UNIQUE_ID_BYTES: usize = 128;
pub const BERT_MAX_PARAM_DIMS: usize = 4;

pub type bert_status = c_int;
pub const BERT_OK: bert_status = 0;
pub const BERT_ERR_INVALID_ARGUMENT: bert_status = 1;
pub const BERT_ERR_CONFIG: bert_status = 2;
pub const BERT_ERR_IO: bert_status = 3;
pub const BERT_ERR_DATA: bert_status = 4;
pub const BERT_ERR_CHECKPOINT: bert_status = 5;
pub const BERT_ERR_OUT_OF_MEMORY: bert_status = 6;
pub const BERT_ERR_BACKEND: bert_status = 7;
pub const BERT_ERR_DISTRIBUTED: bert_status = 8;
pub const BERT_ERR_ABORTED: bert_status = 9;
pub const BERT_ERR_UNSUPPORTED: bert_status = 10;
pub const BERT_ERR_INTERNAL: bert_status = 11;

pub type bert_log_level = c_int;
pub const BERT_LOG_DEBUG: bert_log_level = 0;
pub const BERT_LOG_INFO: bert_log_level = 1;
pub const BERT_LOG_WARNING: bert_log_level = 2;
pub const BERT_LOG_ERROR: bert_log_level = 3;
pub type bert_log_fn = Option<
    unsafe extern "C" fn(level: bert_log_level, message: *const c_char, user_data: *mut c_void),
>;

pub type bert_dist_backend = c_int;
pub const BERT_DIST_AUTO: bert_dist_backend = 0;
pub const BERT_DIST_LOCAL: bert_dist_backend = 1;
pub const BERT_DIST_MPI: bert_dist_backend = 2;
pub const BERT_DIST_NCCL: bert_dist_backend = 3;

pub type bert_reduce_op = c_int;
pub const BERT_REDUCE_SUM: bert_reduce_op = 0;
pub const BERT_REDUCE_MEAN: bert_reduce_op = 1;
pub const BERT_REDUCE_MAX: bert_reduce_op = 2;

pub type bert_output = c_int;
pub const BERT_OUTPUT_LOGITS: bert_output = 0;
pub const BERT_OUTPUT_POOLED: bert_output = 1;
pub const BERT_OUTPUT_HIDDEN: bert_output = 2;

/// Opaque session handle.
#[repr(C)]
pub struct bert_session {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct bert_dist {
    pub struct_size: usize,
    pub backend: bert_dist_backend,
    pub rank: c_int,
    pub world_size: c_int,
    pub local_rank: c_int,
    pub has_nccl_unique_id: c_int,
    pub nccl_unique_id: [c_uchar; BERT_NCCL_UNIQUE_ID_BYTES],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct bert_batch {
    pub struct_size: usize,
    pub batch_size: i32,
    pub seq_length: i32,
    pub max_predictions: i32,
    pub input_ids: *const i32,
    pub segment_ids: *const i32,
    pub input_mask: *const i32,
    pub masked_lm_positions: *const i32,
    pub masked_lm_ids: *const i32,
    pub next_sentence_labels: *const i32,
    pub labels: *const i32,
    pub label_values: *const f32,
    pub start_positions: *const i32,
    pub end_positions: *const i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct bert_step_result {
    pub struct_size: usize,
    pub step: i64,
    pub loss: f32,
    pub mlm_loss: f32,
    pub nsp_loss: f32,
    pub learning_rate: f32,
    pub grad_norm: f32,
    pub loss_scale: f32,
    pub skipped: i32,
    pub micro_batches: i32,
    pub sequences: i64,
    pub step_seconds: f64,
    pub sequences_per_second: f64,
    pub tokens_per_second: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct bert_eval_result {
    pub struct_size: usize,
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

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct bert_memory_info {
    pub struct_size: usize,
    pub parameter_bytes: u64,
    pub gradient_bytes: u64,
    pub optimizer_bytes: u64,
    pub activation_bytes: u64,
    pub peak_device_bytes: u64,
}

mod loader {
    use std::os::raw::{c_char, c_int, c_void};

    const RTLD_NOW: c_int = 2;
    extern "C" {
        fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        fn dlerror() -> *const c_char;
    }

    /// The library's handle: the path found at build time, else the loader's search.
    pub fn open(candidates: &[&std::ffi::CStr]) -> Result<usize, String> {
        let mut errors = Vec::new();
        for name in candidates {
            // SAFETY: name is NUL-terminated; dlerror returns NULL or a NUL-terminated string.
            unsafe {
                let handle = dlopen(name.as_ptr(), RTLD_NOW);
                if !handle.is_null() {
                    return Ok(handle as usize);
                }
                let err = dlerror();
                if !err.is_null() {
                    errors.push(std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned());
                }
            }
        }
        Err(errors.join("; "))
    }

    pub fn symbol(handle: usize, name: &std::ffi::CStr) -> *mut c_void {
        // SAFETY: handle came from dlopen and is never closed.
        unsafe { dlsym(handle as *mut c_void, name.as_ptr()) }
    }
}

/// Declares each C function as a Rust function of the same signature that calls through a
/// pointer resolved from libbert on first use.
macro_rules! bert_functions {
    ($(pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        #[allow(non_snake_case)]
        struct Functions {
            $($name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        fn functions() -> &'static Functions {
            static FUNCTIONS: OnceLock<Functions> = OnceLock::new();
            FUNCTIONS.get_or_init(|| {
                let built = concat!(env!("BERTENGINE_SYS_LIB_PATH"), "\0");
                let built = CStr::from_bytes_with_nul(built.as_bytes()).unwrap_or(c"libbert.so.1");
                let handle = loader::open(&[built, c"libbert.so.1"]).unwrap_or_else(|e| {
                    panic!("bertengine-sys: cannot load libbert ({e}); build with BERT_LIB_DIR or \
                            `pkg-config bert` pointing at it, or set LD_LIBRARY_PATH")
                });
                Functions {
                    $($name: {
                        let sym = loader::symbol(handle, CStr::from_bytes_with_nul(
                            concat!(stringify!($name), "\0").as_bytes()).unwrap());
                        assert!(!sym.is_null(), "bertengine-sys: libbert has no {}", stringify!($name));
                        // SAFETY: the symbol is the C function of this signature (capi/bert.h).
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) $(-> $ret)?>(sym) }
                    },)*
                }
            })
        }

        $(
            /// See capi/bert.h.
            ///
            /// # Safety
            /// The pointer arguments must satisfy the C function's contract (capi/bert.h).
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                (functions().$name)($($arg),*)
            }
        )*
    };
}

bert_functions! {
    pub fn bert_version() -> *const c_char;
    pub fn bert_api_version() -> c_int;
    pub fn bert_status_string(status: bert_status) -> *const c_char;
    pub fn bert_last_error() -> *const c_char;
    pub fn bert_finalize() -> bert_status;
    pub fn bert_set_log_callback(f: bert_log_fn, user_data: *mut c_void);

    pub fn bert_dist_init_sized(dist: *mut bert_dist, size: usize);
    pub fn bert_dist_unique_id(out: *mut c_uchar) -> bert_status;

    pub fn bert_batch_init_sized(batch: *mut bert_batch, size: usize);
    pub fn bert_step_result_init_sized(result: *mut bert_step_result, size: usize);
    pub fn bert_eval_result_init_sized(result: *mut bert_eval_result, size: usize);

    pub fn bert_session_create(
        config_json: *const c_char,
        dist: *const bert_dist,
        out: *mut *mut bert_session,
    ) -> bert_status;
    pub fn bert_session_destroy(session: *mut bert_session);
    pub fn bert_session_config(session: *const bert_session) -> *const c_char;
    pub fn bert_session_abort(session: *mut bert_session);
    pub fn bert_session_clear_abort(session: *mut bert_session);

    pub fn bert_forward_backward(
        session: *mut bert_session,
        batch: *const bert_batch,
        result: *mut bert_step_result,
    ) -> bert_status;
    pub fn bert_allreduce(session: *mut bert_session) -> bert_status;
    pub fn bert_optimizer_step(
        session: *mut bert_session,
        result: *mut bert_step_result,
    ) -> bert_status;
    pub fn bert_step(
        session: *mut bert_session,
        batch: *const bert_batch,
        result: *mut bert_step_result,
    ) -> bert_status;
    pub fn bert_eval(
        session: *mut bert_session,
        batch: *const bert_batch,
        result: *mut bert_eval_result,
    ) -> bert_status;
    pub fn bert_allreduce_host(
        session: *mut bert_session,
        data: *mut f32,
        count: usize,
        op: bert_reduce_op,
    ) -> bert_status;

    pub fn bert_checkpoint(session: *mut bert_session, path: *const c_char) -> bert_status;
    pub fn bert_checkpoint_load(session: *mut bert_session, path: *const c_char) -> bert_status;
    pub fn bert_checkpoint_load_weights(
        session: *mut bert_session,
        path: *const c_char,
    ) -> bert_status;
    pub fn bert_checkpoint_resume(
        session: *mut bert_session,
        dir: *const c_char,
        step: *mut i64,
    ) -> bert_status;

    pub fn bert_memory_info_init_sized(info: *mut bert_memory_info, size: usize);
    pub fn bert_session_memory(
        session: *const bert_session,
        info: *mut bert_memory_info,
    ) -> bert_status;

    pub fn bert_param_count(session: *const bert_session, count: *mut usize) -> bert_status;
    pub fn bert_param_info(
        session: *const bert_session,
        index: usize,
        name: *mut *const c_char,
        ndim: *mut c_int,
        shape: *mut i64,
    ) -> bert_status;
    pub fn bert_output_size(
        session: *const bert_session,
        what: bert_output,
        batch_size: i32,
        seq_length: i32,
        count: *mut usize,
    ) -> bert_status;
    pub fn bert_infer(
        session: *mut bert_session,
        batch: *const bert_batch,
        what: bert_output,
        out: *mut f32,
        out_len: usize,
    ) -> bert_status;
    pub fn bert_param_read(
        session: *mut bert_session,
        name: *const c_char,
        dst: *mut f32,
        count: usize,
    ) -> bert_status;
    pub fn bert_param_write(
        session: *mut bert_session,
        name: *const c_char,
        src: *const f32,
        count: usize,
    ) -> bert_status;
    pub fn bert_grad_read(
        session: *mut bert_session,
        name: *const c_char,
        dst: *mut f32,
        count: usize,
    ) -> bert_status;

    pub fn bert_session_rank(
        session: *const bert_session,
        rank: *mut c_int,
        world_size: *mut c_int,
        local_rank: *mut c_int,
    ) -> bert_status;
}
