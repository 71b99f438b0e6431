package bertengine

// #include <bert.h>
import "C"

import (
	"fmt"

	"github.com/bertengine/bertengine/bindings/go/capi"
)

// Status is a bert_status of capi/bert.h.
type Status int

// The statuses of capi/bert.h.
const (
	OK                 Status = C.BERT_OK
	ErrInvalidArgument Status = C.BERT_ERR_INVALID_ARGUMENT // a bad batch, a size out of range, a closed session
	ErrConfig          Status = C.BERT_ERR_CONFIG           // malformed JSON, unknown key, wrong type, impossible value
	ErrIO              Status = C.BERT_ERR_IO               // a file could not be opened, read or written
	ErrData            Status = C.BERT_ERR_DATA             // a data shard or vocabulary is malformed
	ErrCheckpoint      Status = C.BERT_ERR_CHECKPOINT       // a checkpoint is corrupt or does not match the model
	ErrOutOfMemory     Status = C.BERT_ERR_OUT_OF_MEMORY
	ErrBackend         Status = C.BERT_ERR_BACKEND     // CUDA, cuBLAS, cuDNN or the CPU backend failed
	ErrDistributed     Status = C.BERT_ERR_DISTRIBUTED // a collective failed or timed out
	ErrAborted         Status = C.BERT_ERR_ABORTED     // the call was aborted (context cancelled, Abort)
	ErrUnsupported     Status = C.BERT_ERR_UNSUPPORTED // not built in (e.g. CUDA in a CPU-only build)
	ErrInternal        Status = C.BERT_ERR_INTERNAL
)

// String is the status's C name, e.g. "BERT_ERR_CONFIG".
func (s Status) String() string { return capi.Bert_status_string(capi.Enum_SS_bert_status(s)) }

// Error is a failed engine call: its status and the engine's message (bert_last_error).
// When a cancelled context aborted the call, Unwrap returns the context's error, so
// errors.Is(err, context.Canceled) holds.
type Error struct {
	Status  Status
	Message string
	cause   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Status, e.Message) }

// Unwrap returns the context error that aborted the call, if any.
func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, &Error{Status: s}) match any error with status s.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

func newError(status Status, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}
