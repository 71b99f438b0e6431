// The engine's log lines (bert_set_log_callback) delivered to a Go function. The C callback is
// an exported Go function; the engine may call it from any thread that runs engine code.
package bertengine

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi
#cgo LDFLAGS: -L${SRCDIR}/../../build -Wl,-rpath,${SRCDIR}/../../build -lbert
#include <bert.h>
void bertengineGoLog(bert_log_level level, char* message, void* user_data);
*/
import "C"

import (
	"sync"
	"unsafe"
)

// LogLevel is a bert_log_level.
type LogLevel int

const (
	LogDebug   LogLevel = C.BERT_LOG_DEBUG
	LogInfo    LogLevel = C.BERT_LOG_INFO
	LogWarning LogLevel = C.BERT_LOG_WARNING
	LogError   LogLevel = C.BERT_LOG_ERROR
)

var (
	logMu   sync.RWMutex
	logSink func(LogLevel, string)
)

// SetLogCallback routes the engine's log lines (process-wide) to f; nil restores the default
// (warnings and errors to stderr). f may run on any thread, concurrently with other calls.
func SetLogCallback(f func(level LogLevel, message string)) {
	logMu.Lock()
	logSink = f
	logMu.Unlock()
	if f == nil {
		C.bert_set_log_callback(nil, nil)
		return
	}
	C.bert_set_log_callback(C.bert_log_fn(unsafe.Pointer(C.bertengineGoLog)), nil)
}

//export bertengineGoLog
func bertengineGoLog(level C.bert_log_level, message *C.char, _ unsafe.Pointer) {
	logMu.RLock()
	f := logSink
	logMu.RUnlock()
	if f != nil {
		f(LogLevel(level), C.GoString(message))
	}
}
