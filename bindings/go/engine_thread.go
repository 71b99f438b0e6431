// A session's own OS thread. The engine's OpenMP thread pool belongs to the OS thread that calls
// it, and goroutines move between OS threads: calls made from wherever a goroutine happens to run
// would start a pool on each thread they land on, and with more pooled threads than cores libgomp
// makes every worker sleep between parallel regions, so that each small call pays the wake-ups.
// A session is therefore created and called on one goroutine locked to its thread.
package bertengine

import (
	"runtime"

	"github.com/bertengine/bertengine/bindings/go/capi"
)

type engineThread struct {
	calls chan func()
}

func newEngineThread() *engineThread {
	t := &engineThread{calls: make(chan func())}
	go func() {
		// Never unlocked: when the goroutine returns (stop), its OS thread exits and takes the
		// thread's pool with it.
		runtime.LockOSThread()
		for f := range t.calls {
			f()
		}
	}()
	return t
}

// call runs f on the thread and returns its status as an error, bert_last_error read there.
func (t *engineThread) call(f func() capi.Enum_SS_bert_status) error {
	var err error
	done := make(chan struct{})
	t.calls <- func() {
		err = statusError(f())
		close(done)
	}
	<-done
	return err
}

// stop ends the thread; no call may follow.
func (t *engineThread) stop() { close(t.calls) }
