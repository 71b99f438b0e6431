// Package bertengine is the Go host of the bertengine BERT pretraining engine: an idiomatic
// layer over the SWIG-generated package bertengine/capi (capi/bert.h). It translates types,
// errors (*Error carrying the status and the engine's message) and lifetimes (Session owns the
// engine session; Close frees it); cancelling a call's context aborts the call.
package bertengine

// #include <stdlib.h>
// #include <bert.h>
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"

	"github.com/bertengine/bertengine/bindings/go/capi"
)

// Version is the engine library's version string; APIVersion its ABI version.
func Version() string { return capi.Bert_version() }
func APIVersion() int { return capi.Bert_api_version() }

// DistBackend selects the communicator of a distributed run.
type DistBackend int

const (
	DistAuto  DistBackend = C.BERT_DIST_AUTO  // from the launcher's environment (Open MPI, Slurm, torchrun), else local
	DistLocal DistBackend = C.BERT_DIST_LOCAL // one rank
	DistMPI   DistBackend = C.BERT_DIST_MPI
	DistNCCL  DistBackend = C.BERT_DIST_NCCL
)

// Dist places a session in a distributed run; -1 fields come from the environment.
type Dist struct {
	Backend                    DistBackend
	Rank, WorldSize, LocalRank int
	NCCLUniqueID               []byte // NCCLUniqueIDBytes bytes from NCCLUniqueID on rank 0, or nil
}

// DefaultDist is bert_dist_init's default: AUTO, everything from the environment.
func DefaultDist() Dist { return Dist{Backend: DistAuto, Rank: -1, WorldSize: -1, LocalRank: -1} }

// NCCLUniqueIDBytes is the size of NCCL's bootstrap id (BERT_NCCL_UNIQUE_ID_BYTES).
const NCCLUniqueIDBytes = C.BERT_NCCL_UNIQUE_ID_BYTES

// NCCLUniqueID makes NCCL's bootstrap id on rank 0 (bert_dist_unique_id).
func NCCLUniqueID() ([]byte, error) {
	buf := (*byte)(C.malloc(NCCLUniqueIDBytes))
	defer C.free(unsafe.Pointer(buf))
	if err := call(func() capi.Enum_SS_bert_status { return capi.Bert_dist_unique_id(buf) }); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(buf), NCCLUniqueIDBytes), nil
}

// Finalize gives back what the engine took process-wide (bert_finalize: MPI, when a session
// initialised it because the host had not). Call it once, after every session is closed and
// before the program exits; afterwards no MPI session can be created in this process.
func Finalize() error {
	return call(func() capi.Enum_SS_bert_status { return capi.Bert_finalize() })
}

// StepResult is bert_step_result: the losses and throughput of one call.
type StepResult struct {
	Step               int64
	Loss               float32
	MLMLoss            float32
	NSPLoss            float32
	LearningRate       float32
	GradNorm           float32
	LossScale          float32
	Skipped            bool
	MicroBatches       int
	Sequences          int64
	StepSeconds        float64
	SequencesPerSecond float64
	TokensPerSecond    float64
}

// EvalResult is bert_eval_result: masked-LM and next-sentence metrics (pretraining sessions), or
// the fine-tuning head's loss and accuracy over TaskCount sequences or labelled tokens (task
// sessions; accuracy NaN for regression, whose loss is the MSE). Fields of the other kind of
// session are 0.
type EvalResult struct {
	MLMAccuracy, MLMLoss, NSPAccuracy, NSPLoss float64
	Sequences, MaskedTokens                    int64
	TaskLoss, TaskAccuracy                     float64
	TaskCount                                  int64
}

// ReduceOp is the reduction of AllreduceHost.
type ReduceOp int

const (
	ReduceSum  ReduceOp = C.BERT_REDUCE_SUM
	ReduceMean ReduceOp = C.BERT_REDUCE_MEAN
	ReduceMax  ReduceOp = C.BERT_REDUCE_MAX
)

// MemoryInfo is bert_memory_info: backend memory a session holds, in bytes.
type MemoryInfo struct {
	ParameterBytes, GradientBytes, OptimizerBytes, ActivationBytes, PeakDeviceBytes uint64
}

// Param is a parameter's Hugging Face name and shape.
type Param struct {
	Name  string
	Shape []int64
}

// Size is the number of elements of the parameter.
func (p Param) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= int(d)
	}
	return n
}

// Session is one engine session. Its methods may be called from any goroutine, one at a time
// (they serialise on an internal lock, as the engine requires); Close frees it. The session is
// created and its calls run on an OS thread of its own (engine_thread.go).
type Session struct {
	mu      sync.Mutex                  // held by every call and by Close
	abortMu sync.Mutex                  // guards handle for Abort, which must not wait for mu
	handle  capi.Struct_SS_bert_session // nil once closed
	thread  *engineThread               // runs creation and the calls; stopped by Close
}

// call runs f on a locked OS thread so that bert_last_error is read on the thread that failed.
func call(f func() capi.Enum_SS_bert_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return statusError(f())
}

// statusError is nil for OK, else the status with bert_last_error (read on the calling thread).
func statusError(st capi.Enum_SS_bert_status) error {
	if s := Status(st); s != OK {
		return &Error{Status: s, Message: capi.Bert_last_error()}
	}
	return nil
}

// NewSession creates a session from JSON config text (schema: README.md "Config schema").
func NewSession(config string) (*Session, error) {
	return NewDistSession(config, DefaultDist())
}

// NewDistSession creates a session in a distributed run. Collective: every rank calls it.
func NewDistSession(config string, dist Dist) (*Session, error) {
	d := capi.NewBert_dist()
	defer capi.DeleteBert_dist(d)
	capi.Bert_dist_init_sized(d, int64(C.sizeof_bert_dist))
	d.SetBackend(capi.Enum_SS_bert_dist_backend(dist.Backend))
	d.SetRank(dist.Rank)
	d.SetWorld_size(dist.WorldSize)
	d.SetLocal_rank(dist.LocalRank)
	if dist.NCCLUniqueID != nil {
		if len(dist.NCCLUniqueID) != NCCLUniqueIDBytes {
			return nil, newError(ErrInvalidArgument, "Dist.NCCLUniqueID must be %d bytes, got %d", NCCLUniqueIDBytes, len(dist.NCCLUniqueID))
		}
		d.SetHas_nccl_unique_id(1)
		dst := unsafe.Slice(d.GetNccl_unique_id(), NCCLUniqueIDBytes)
		copy(dst, dist.NCCLUniqueID)
	}
	out := capi.New_sessionp()
	defer capi.Delete_sessionp(out)
	thread := newEngineThread()
	if err := thread.call(func() capi.Enum_SS_bert_status { return capi.Bert_session_create(config, d, out) }); err != nil {
		thread.stop()
		return nil, err
	}
	s := &Session{handle: capi.Sessionp_value(out), thread: thread}
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close frees the engine session; later calls return an ErrInvalidArgument error. Idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortMu.Lock()
	defer s.abortMu.Unlock()
	if s.handle != nil {
		capi.Bert_session_destroy(s.handle)
		s.handle = nil
		s.thread.stop()
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// Abort makes the call running on another goroutine (or the next call) return ErrAborted.
func (s *Session) Abort() {
	s.abortMu.Lock()
	defer s.abortMu.Unlock()
	if s.handle != nil {
		capi.Bert_session_abort(s.handle)
	}
}

// locked runs f with the session's lock held and its handle open.
func (s *Session) locked(f func(h capi.Struct_SS_bert_session) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handle == nil {
		return newError(ErrInvalidArgument, "the session is closed")
	}
	return f(s.handle)
}

// run calls f under the lock; cancelling ctx meanwhile aborts it through bert_session_abort.
func (s *Session) run(ctx context.Context, f func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status) error {
	return s.locked(func(h capi.Struct_SS_bert_session) error {
		if err := ctx.Err(); err != nil {
			return &Error{Status: ErrAborted, Message: "context done before the call: " + err.Error(), cause: err}
		}
		done := make(chan struct{})
		watcher := make(chan struct{})
		aborted := false // written by the watcher, read after <-watcher
		go func() {
			defer close(watcher)
			select {
			case <-ctx.Done():
				capi.Bert_session_abort(h)
				aborted = true
			case <-done:
			}
		}()
		err := s.thread.call(func() capi.Enum_SS_bert_status { return f(h) })
		close(done)
		<-watcher
		if aborted {
			// The cancellation may have come after the call's last abort check: it must not
			// abort the next call.
			capi.Bert_session_clear_abort(h)
		}
		if e, ok := err.(*Error); ok && e.Status == ErrAborted && ctx.Err() != nil {
			e.cause = ctx.Err()
		}
		return err
	})
}

// Config returns the resolved config (defaults filled in) as JSON text.
func (s *Session) Config() (string, error) {
	var out string
	err := s.locked(func(h capi.Struct_SS_bert_session) error {
		out = capi.Bert_session_config(h)
		return nil
	})
	return out, err
}

// Rank is this session's place in a distributed run (bert_session_rank).
type Rank struct {
	Rank, WorldSize, LocalRank int
}

// Rank returns the session's rank, world size and local rank (0, 1, 0 without a distributed run).
func (s *Session) Rank() (Rank, error) {
	var out Rank
	err := s.locked(func(h capi.Struct_SS_bert_session) error {
		rank, world, local := capi.New_intp(), capi.New_intp(), capi.New_intp()
		defer capi.Delete_intp(rank)
		defer capi.Delete_intp(world)
		defer capi.Delete_intp(local)
		if err := s.thread.call(func() capi.Enum_SS_bert_status { return capi.Bert_session_rank(h, rank, world, local) }); err != nil {
			return err
		}
		out = Rank{Rank: capi.Intp_value(rank), WorldSize: capi.Intp_value(world), LocalRank: capi.Intp_value(local)}
		return nil
	})
	return out, err
}

// Step runs one optimizer step on batch, or (batch == nil) on the session's own data.
// Collective in a distributed run.
func (s *Session) Step(ctx context.Context, batch *Batch) (StepResult, error) {
	return s.stepLike(ctx, batch, capi.Bert_step)
}

// ForwardBackward accumulates one micro-batch's gradients; OptimizerStep applies them.
func (s *Session) ForwardBackward(ctx context.Context, batch *Batch) (StepResult, error) {
	if batch == nil {
		return StepResult{}, newError(ErrInvalidArgument, "ForwardBackward needs a batch")
	}
	return s.stepLike(ctx, batch, capi.Bert_forward_backward)
}

func (s *Session) stepLike(ctx context.Context, batch *Batch,
	f func(capi.Struct_SS_bert_session, capi.Bert_batch, capi.Bert_step_result) capi.Enum_SS_bert_status) (StepResult, error) {
	cb, err := batch.toC()
	if err != nil {
		return StepResult{}, err
	}
	defer cb.free()
	r := capi.NewBert_step_result()
	defer capi.DeleteBert_step_result(r)
	capi.Bert_step_result_init_sized(r, int64(C.sizeof_bert_step_result))
	if err := s.run(ctx, func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status { return f(h, cb.batch, r) }); err != nil {
		return StepResult{}, err
	}
	return stepResult(r), nil
}

// Allreduce sums the accumulated gradients over ranks. Collective.
func (s *Session) Allreduce(ctx context.Context) error {
	return s.run(ctx, capi.Bert_allreduce)
}

// OptimizerStep averages the accumulated gradients, clips and applies the optimizer.
func (s *Session) OptimizerStep(ctx context.Context) (StepResult, error) {
	r := capi.NewBert_step_result()
	defer capi.DeleteBert_step_result(r)
	capi.Bert_step_result_init_sized(r, int64(C.sizeof_bert_step_result))
	if err := s.run(ctx, func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status { return capi.Bert_optimizer_step(h, r) }); err != nil {
		return StepResult{}, err
	}
	return stepResult(r), nil
}

// Eval evaluates without dropout or gradients on batch, or (nil) on the configured eval data
// (a task session: a batch with its labels, required).
func (s *Session) Eval(ctx context.Context, batch *Batch) (EvalResult, error) {
	cb, err := batch.toC()
	if err != nil {
		return EvalResult{}, err
	}
	defer cb.free()
	r := capi.NewBert_eval_result()
	defer capi.DeleteBert_eval_result(r)
	capi.Bert_eval_result_init_sized(r, int64(C.sizeof_bert_eval_result))
	if err := s.run(ctx, func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status { return capi.Bert_eval(h, cb.batch, r) }); err != nil {
		return EvalResult{}, err
	}
	return EvalResult{MLMAccuracy: r.GetMlm_accuracy(), MLMLoss: r.GetMlm_loss(), NSPAccuracy: r.GetNsp_accuracy(),
		NSPLoss: r.GetNsp_loss(), Sequences: r.GetSequences(), MaskedTokens: r.GetMasked_tokens(),
		TaskLoss: r.GetTask_loss(), TaskAccuracy: r.GetTask_accuracy(), TaskCount: r.GetTask_count()}, nil
}

// Output selects what Infer returns (bert_output).
type Output int

const (
	// OutputLogits: the head's logits, [B, num_labels] (sequence classification),
	// [B, S, num_labels] (token classification), [B, 2, S] (question answering: start then end
	// logits) or [B, 2] (pretraining: next-sentence logits).
	OutputLogits Output = C.BERT_OUTPUT_LOGITS
	// OutputPooled: the pooler's output [B, H].
	OutputPooled Output = C.BERT_OUTPUT_POOLED
	// OutputHidden: the last hidden states [B, S, H].
	OutputHidden Output = C.BERT_OUTPUT_HIDDEN
)

// Infer runs the model on batch without dropout or gradients (bert_infer) and returns the
// output, row-major as listed at Output; per-token outputs are 0 at padding positions.
// Cancelling ctx aborts it.
func (s *Session) Infer(ctx context.Context, batch *Batch, what Output) ([]float32, error) {
	if batch == nil {
		return nil, newError(ErrInvalidArgument, "Infer needs a batch")
	}
	cb, err := batch.toC()
	if err != nil {
		return nil, err
	}
	defer cb.free()
	var buf []float32
	err = s.run(ctx, func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		n := capi.New_sizep()
		defer capi.Delete_sizep(n)
		if st := capi.Bert_output_size(h, capi.Enum_SS_bert_output(what), batch.BatchSize, batch.SeqLength, n); st != capi.BERT_OK {
			return st
		}
		buf = cFloats(int(capi.Sizep_value(n)))
		return capi.Bert_infer(h, cb.batch, capi.Enum_SS_bert_output(what), &buf[0], int64(len(buf)))
	})
	if buf != nil {
		defer C.free(unsafe.Pointer(&buf[0]))
	}
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), buf...), nil
}

// AllreduceHost reduces data in place across ranks. Collective.
func (s *Session) AllreduceHost(ctx context.Context, data []float32, op ReduceOp) error {
	if len(data) == 0 {
		return nil
	}
	buf := cFloats(len(data))
	defer C.free(unsafe.Pointer(&buf[0]))
	copy(buf, data)
	err := s.run(ctx, func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return capi.Bert_allreduce_host(h, &buf[0], int64(len(buf)), capi.Enum_SS_bert_reduce_op(op))
	})
	if err == nil {
		copy(data, buf)
	}
	return err
}

// Checkpoint writes the full training state to path ("": <checkpoint.dir>/ckpt_<step>.h5,
// pruned per checkpoint.keep). Collective; rank 0 writes the file.
func (s *Session) Checkpoint(path string) error {
	return s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status { return capi.Bert_checkpoint(h, path) })
}

// LoadCheckpoint resumes the full training state from a checkpoint file.
func (s *Session) LoadCheckpoint(path string) error {
	return s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return capi.Bert_checkpoint_load(h, path)
	})
}

// LoadWeights loads only the weights of a checkpoint or weights file.
func (s *Session) LoadWeights(path string) error {
	return s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return capi.Bert_checkpoint_load_weights(h, path)
	})
}

// Resume resumes from the newest valid checkpoint in dir ("": checkpoint.dir); it returns the
// step, or -1 if there is none.
func (s *Session) Resume(dir string) (int64, error) {
	p := capi.New_int64p()
	defer capi.Delete_int64p(p)
	err := s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return capi.Bert_checkpoint_resume(h, dir, p)
	})
	if err != nil {
		return 0, err
	}
	return capi.Int64p_value(p), nil
}

// Memory reports the backend memory this session holds (bert_session_memory).
func (s *Session) Memory() (MemoryInfo, error) {
	info := capi.NewBert_memory_info()
	defer capi.DeleteBert_memory_info(info)
	capi.Bert_memory_info_init_sized(info, int64(C.sizeof_bert_memory_info))
	err := s.locked(func(h capi.Struct_SS_bert_session) error {
		return s.thread.call(func() capi.Enum_SS_bert_status { return capi.Bert_session_memory(h, info) })
	})
	if err != nil {
		return MemoryInfo{}, err
	}
	return MemoryInfo{ParameterBytes: info.GetParameter_bytes(), GradientBytes: info.GetGradient_bytes(),
		OptimizerBytes: info.GetOptimizer_bytes(), ActivationBytes: info.GetActivation_bytes(),
		PeakDeviceBytes: info.GetPeak_device_bytes()}, nil
}

// Params lists the parameters (Hugging Face BertForPreTraining names) with their shapes.
func (s *Session) Params() ([]Param, error) {
	var out []Param
	err := s.locked(func(h capi.Struct_SS_bert_session) error {
		count := capi.New_sizep()
		defer capi.Delete_sizep(count)
		if err := s.thread.call(func() capi.Enum_SS_bert_status { return capi.Bert_param_count(h, count) }); err != nil {
			return err
		}
		name, ndim, shape := capi.New_cstrp(), capi.New_intp(), capi.New_int64Array(C.BERT_MAX_PARAM_DIMS)
		defer capi.Delete_cstrp(name)
		defer capi.Delete_intp(ndim)
		defer capi.Delete_int64Array(shape)
		for i := int64(0); i < capi.Sizep_value(count); i++ {
			if err := s.thread.call(func() capi.Enum_SS_bert_status { return capi.Bert_param_info(h, i, name, ndim, shape) }); err != nil {
				return err
			}
			p := Param{Name: capi.Cstrp_value(name)}
			for d := 0; d < capi.Intp_value(ndim); d++ {
				p.Shape = append(p.Shape, capi.Int64Array_getitem(shape, d))
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// ReadParam copies a parameter out of the session (len = product of its shape).
func (s *Session) ReadParam(name string) ([]float32, error) {
	return s.readFloats(name, capi.Bert_param_read)
}

// ReadGrad copies the gradient accumulated since the last optimizer step.
func (s *Session) ReadGrad(name string) ([]float32, error) {
	return s.readFloats(name, capi.Bert_grad_read)
}

func (s *Session) readFloats(name string,
	f func(capi.Struct_SS_bert_session, string, *float32, int64) capi.Enum_SS_bert_status) ([]float32, error) {
	n, err := s.paramSize(name)
	if err != nil {
		return nil, err
	}
	buf := cFloats(n)
	defer C.free(unsafe.Pointer(&buf[0]))
	err = s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return f(h, name, &buf[0], int64(n))
	})
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), buf...), nil
}

// WriteParam overwrites a parameter; len(values) must equal its size.
func (s *Session) WriteParam(name string, values []float32) error {
	if len(values) == 0 {
		return newError(ErrInvalidArgument, "WriteParam(%q): no values", name)
	}
	buf := cFloats(len(values))
	defer C.free(unsafe.Pointer(&buf[0]))
	copy(buf, values)
	return s.run(context.Background(), func(h capi.Struct_SS_bert_session) capi.Enum_SS_bert_status {
		return capi.Bert_param_write(h, name, &buf[0], int64(len(buf)))
	})
}

func (s *Session) paramSize(name string) (int, error) {
	params, err := s.Params()
	if err != nil {
		return 0, err
	}
	for _, p := range params {
		if p.Name == name {
			return p.Size(), nil
		}
	}
	return 0, newError(ErrInvalidArgument, "no parameter named %q", name)
}

func stepResult(r capi.Bert_step_result) StepResult {
	return StepResult{Step: r.GetStep(), Loss: r.GetLoss(), MLMLoss: r.GetMlm_loss(), NSPLoss: r.GetNsp_loss(),
		LearningRate: r.GetLearning_rate(), GradNorm: r.GetGrad_norm(), LossScale: r.GetLoss_scale(),
		Skipped: r.GetSkipped() != 0, MicroBatches: r.GetMicro_batches(), Sequences: r.GetSequences(),
		StepSeconds: r.GetStep_seconds(), SequencesPerSecond: r.GetSequences_per_second(),
		TokensPerSecond: r.GetTokens_per_second()}
}

// cFloats allocates n floats in C memory (the engine may keep no Go pointers); free with C.free.
func cFloats(n int) []float32 {
	return unsafe.Slice((*float32)(C.malloc(C.size_t(n)*4)), n)
}
