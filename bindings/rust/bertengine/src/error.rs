//! Error: a failed engine call's status and message (bert_last_error), or a check this crate
//! makes before calling (wrong slice lengths, a NUL inside a string).
use bertengine_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// The bert_status values of capi/bert.h other than BERT_OK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    Config,
    Io,
    Data,
    Checkpoint,
    OutOfMemory,
    Backend,
    Distributed,
    Aborted,
    Unsupported,
    Internal,
}

impl Status {
    pub(crate) fn from_raw(st: sys::bert_status) -> Status {
        match st {
            sys::BERT_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::BERT_ERR_CONFIG => Status::Config,
            sys::BERT_ERR_IO => Status::Io,
            sys::BERT_ERR_DATA => Status::Data,
            sys::BERT_ERR_CHECKPOINT => Status::Checkpoint,
            sys::BERT_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::BERT_ERR_BACKEND => Status::Backend,
            sys::BERT_ERR_DISTRIBUTED => Status::Distributed,
            sys::BERT_ERR_ABORTED => Status::Aborted,
            sys::BERT_ERR_UNSUPPORTED => Status::Unsupported,
            _ => Status::Internal,
        }
    }

    /// The numeric bert_status.
    pub fn code(self) -> i32 {
        match self {
            Status::InvalidArgument => sys::BERT_ERR_INVALID_ARGUMENT,
            Status::Config => sys::BERT_ERR_CONFIG,
            Status::Io => sys::BERT_ERR_IO,
            Status::Data => sys::BERT_ERR_DATA,
            Status::Checkpoint => sys::BERT_ERR_CHECKPOINT,
            Status::OutOfMemory => sys::BERT_ERR_OUT_OF_MEMORY,
            Status::Backend => sys::BERT_ERR_BACKEND,
            Status::Distributed => sys::BERT_ERR_DISTRIBUTED,
            Status::Aborted => sys::BERT_ERR_ABORTED,
            Status::Unsupported => sys::BERT_ERR_UNSUPPORTED,
            Status::Internal => sys::BERT_ERR_INTERNAL,
        }
    }

    /// The C name, e.g. "BERT_ERR_CONFIG".
    pub fn name(self) -> &'static str {
        // SAFETY: bert_status_string returns a static, NUL-terminated string, never NULL.
        unsafe { CStr::from_ptr(sys::bert_status_string(self.code())) }
            .to_str()
            .unwrap_or("BERT_ERR_INTERNAL")
    }
}

/// A failed call: the status and the engine's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// Turns a status into Ok or the Error with bert_last_error() (read on the calling thread).
    pub(crate) fn check(st: sys::bert_status) -> Result<()> {
        if st == sys::BERT_OK {
            return Ok(());
        }
        // SAFETY: bert_last_error returns a thread-local NUL-terminated string, never NULL.
        let msg = unsafe { CStr::from_ptr(sys::bert_last_error()) }
            .to_string_lossy()
            .into_owned();
        Err(Error::new(Status::from_raw(st), msg))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
