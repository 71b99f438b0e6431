package bertengine

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const tiny = `{"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
 "train": {"micro_batch": 16, "steps": 80, "lr": 0.02, "threads": 1},
 "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}}`

func newTiny(t *testing.T) *Session {
	t.Helper()
	s, err := NewSession(tiny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func makeBatch(b, s, p int) *Batch {
	rng := rand.New(rand.NewSource(1))
	out := &Batch{BatchSize: b, SeqLength: s, MaxPredictions: p}
	for i := 0; i < b; i++ {
		for j := 0; j < s; j++ {
			out.InputIDs = append(out.InputIDs, int32(5+rng.Intn(95)))
			out.SegmentIDs = append(out.SegmentIDs, int32(j*2/s))
			out.InputMask = append(out.InputMask, 1)
		}
		for k := 0; k < p; k++ {
			out.MaskedLMPositions = append(out.MaskedLMPositions, int32(1+3*k))
			out.MaskedLMIDs = append(out.MaskedLMIDs, int32(5+rng.Intn(95)))
		}
		out.NextSentenceLabels = append(out.NextSentenceLabels, int32(i%2))
	}
	return out
}

func mean(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s / float32(len(x))
}

func TestTrainingLossFalls(t *testing.T) {
	s := newTiny(t)
	var losses []float32
	for i := 0; i < 80; i++ {
		r, err := s.Step(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Step != int64(i+1) || r.Sequences != 16 {
			t.Fatalf("step %d: %+v", i, r)
		}
		losses = append(losses, r.MLMLoss)
	}
	if drop := mean(losses[:5]) - mean(losses[75:]); drop <= 0.2 {
		t.Fatalf("MLM loss fell by %.3f (<= 0.2): %v", drop, losses)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.h5")
	a := newTiny(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := a.Step(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Checkpoint(path); err != nil {
		t.Fatal(err)
	}
	want, _ := a.Step(ctx, nil)
	b := newTiny(t)
	if err := b.LoadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	got, err := b.Step(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != want.Loss || got.Step != 4 {
		t.Fatalf("resumed step %d loss %v, want step 4 loss %v", got.Step, got.Loss, want.Loss)
	}
}

func TestBatchAndParams(t *testing.T) {
	s := newTiny(t)
	ctx := context.Background()
	b := makeBatch(4, 32, 5)
	fb, err := s.ForwardBackward(ctx, b)
	if err != nil || fb.Loss <= 0 {
		t.Fatalf("ForwardBackward: %+v %v", fb, err)
	}
	g, err := s.ReadGrad("cls.predictions.bias")
	if err != nil || len(g) != 100 {
		t.Fatalf("ReadGrad: %d values, %v", len(g), err)
	}
	if err := s.Allreduce(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := s.OptimizerStep(ctx); err != nil || r.Step != 1 {
		t.Fatalf("OptimizerStep: %+v %v", r, err)
	}
	params, err := s.Params()
	if err != nil || params[0].Name != "bert.embeddings.word_embeddings.weight" || params[0].Shape[0] != 100 || params[0].Shape[1] != 32 {
		t.Fatalf("Params: %v %v", params[:1], err)
	}
	mem, err := s.Memory()
	if err != nil || mem.ParameterBytes < 4*100*32 || mem.ActivationBytes == 0 {
		t.Fatalf("Memory: %+v %v", mem, err)
	}
	w := make([]float32, 32)
	for i := range w {
		w[i] = float32(i)
	}
	if err := s.WriteParam("bert.pooler.dense.bias", w); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.ReadParam("bert.pooler.dense.bias"); r[31] != 31 {
		t.Fatalf("ReadParam after WriteParam: %v", r)
	}
	ev, err := s.Eval(ctx, b)
	if err != nil || ev.Sequences != 4 || ev.MaskedTokens != 20 {
		t.Fatalf("Eval: %+v %v", ev, err)
	}
	x := []float32{1, 2, 3}
	if err := s.AllreduceHost(ctx, x, ReduceSum); err != nil || x[2] != 3 {
		t.Fatalf("AllreduceHost: %v %v", x, err)
	}
}

func wantStatus(t *testing.T, err error, st Status, contains string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != st || !strings.Contains(e.Message, contains) {
		t.Fatalf("got %v, want status %v with %q", err, st, contains)
	}
}

func TestBadInput(t *testing.T) {
	_, err := NewSession(`{"train": {"lr_typo": 1}}`)
	wantStatus(t, err, ErrConfig, "lr_typo")
	_, err = NewSession(`{not json`)
	wantStatus(t, err, ErrConfig, "")

	s := newTiny(t)
	ctx := context.Background()
	b := makeBatch(4, 32, 5)
	b.InputMask = b.InputMask[:10]
	_, err = s.Step(ctx, b)
	wantStatus(t, err, ErrInvalidArgument, "InputMask has 10 elements, want 128")
	_, err = s.Step(ctx, makeBatch(4, 48, 5))
	wantStatus(t, err, ErrInvalidArgument, "48")
	err = s.WriteParam("bert.pooler.dense.bias", make([]float32, 31))
	wantStatus(t, err, ErrInvalidArgument, "")
	_, err = s.ReadParam("nope")
	wantStatus(t, err, ErrInvalidArgument, "nope")
	err = s.LoadCheckpoint(filepath.Join(t.TempDir(), "missing.h5"))
	wantStatus(t, err, ErrIO, "missing.h5")
	if !errors.Is(err, &Error{Status: ErrIO}) {
		t.Fatal("errors.Is by status")
	}

	s.Close()
	_, err = s.Step(ctx, nil)
	wantStatus(t, err, ErrInvalidArgument, "closed")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelAbortsStep(t *testing.T) {
	s, err := NewSession(`{"model": "bert-tiny", "train": {"micro_batch": 32, "accumulation_steps": 64, "threads": 1},
	  "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Step(ctx, nil)
	wantStatus(t, err, ErrAborted, "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not wrap context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("abort took %v", el)
	}
	_, err = s.Step(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a done context must not start a step: %v", err)
	}
}

func TestAbortFromAnotherGoroutine(t *testing.T) {
	s := newTiny(t)
	s.Abort()
	_, err := s.Step(context.Background(), nil)
	wantStatus(t, err, ErrAborted, "")
	if r, err := s.Step(context.Background(), nil); err != nil || r.Step != 1 {
		t.Fatalf("after an abort: %+v %v", r, err)
	}
	s.Close()
	s.Abort() // closed: nothing to abort, no crash
}

func TestCheckpointDirDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.Replace(tiny, `"data"`, `"checkpoint": {"dir": "`+dir+`"}, "data"`, 1)
	a, err := NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < 2; i++ {
		if _, err := a.Step(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Checkpoint(""); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "ckpt_2.h5")); len(m) != 1 {
		t.Fatalf("Checkpoint(\"\") did not write %s/ckpt_2.h5", dir)
	}
	b, err := NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if step, err := b.Resume(""); err != nil || step != 2 {
		t.Fatalf("Resume(\"\") = %d, %v; want 2", step, err)
	}
	empty := t.TempDir()
	if step, err := b.Resume(empty); err != nil || step != -1 {
		t.Fatalf("Resume(empty dir) = %d, %v; want -1", step, err)
	}
}

func TestRankWithoutDistributedRun(t *testing.T) {
	s, err := NewDistSession(tiny, Dist{Backend: DistLocal, Rank: -1, WorldSize: -1, LocalRank: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Rank()
	if err != nil || r != (Rank{Rank: 0, WorldSize: 1, LocalRank: 0}) {
		t.Fatalf("Rank() = %+v, %v", r, err)
	}
	s.Close()
	if _, err := s.Rank(); !errors.Is(err, &Error{Status: ErrInvalidArgument}) {
		t.Fatalf("Rank() on a closed session: %v", err)
	}
}

// A session is created and called on one OS thread of its own (the engine's OpenMP pool belongs
// to the thread that calls it): its log lines from creation and from a call made on another
// locked goroutine come from the same thread, and not from the creating goroutine's.
func TestCallsRunOnTheSessionThread(t *testing.T) {
	var mu sync.Mutex
	threads := map[string]int{}
	SetLogCallback(func(level LogLevel, message string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(message, "session: ") {
			threads["create"] = syscall.Gettid()
		} else if strings.Contains(message, "ckpt_5.h5") {
			threads["resume"] = syscall.Gettid()
		}
	})
	defer SetLogCallback(nil)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ckpt_5.h5"), []byte("not hdf5"), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread() // this goroutine keeps its thread: the call below cannot run on it
	defer runtime.UnlockOSThread()
	s, err := NewSession(strings.Replace(tiny, `"data":`, `"checkpoint": {"discard_invalid": true}, "data":`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resumed := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, err := s.Resume(dir)
		resumed <- err
	}()
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if threads["create"] == 0 || threads["create"] != threads["resume"] || threads["create"] == syscall.Gettid() {
		t.Fatalf("threads of the log lines: %v, the creating goroutine's: %d", threads, syscall.Gettid())
	}
}

func TestLogCallback(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	SetLogCallback(func(level LogLevel, message string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, message)
	})
	defer SetLogCallback(nil)
	// Resuming from a directory with a corrupt checkpoint is refused; with
	// checkpoint.discard_invalid it is set aside with a warning naming it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ckpt_5.h5"), []byte("not hdf5"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newTiny(t).Resume(dir); err == nil || !strings.Contains(err.Error(), "ckpt_5.h5") {
		t.Fatalf("Resume over a corrupt checkpoint: %v", err)
	}
	s, err := NewSession(strings.Replace(tiny, `"data":`, `"checkpoint": {"discard_invalid": true}, "data":`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	step, err := s.Resume(dir)
	if err != nil || step != -1 {
		t.Fatalf("Resume = %d, %v", step, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(lines, "\n"), "ckpt_5.h5") {
		t.Fatalf("no log line names the corrupt checkpoint: %q", lines)
	}
}
