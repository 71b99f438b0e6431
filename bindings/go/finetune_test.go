package bertengine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

const tinyClassifier = `{"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
 "task": {"type": "sequence_classification", "num_labels": 2},
 "train": {"micro_batch": 16, "steps": 40, "lr": 0.003, "optimizer": "adamw", "warmup_proportion": 0.1, "threads": 1%s},
 "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}%s}`

// A classifier learns whether token 7 sits at position 2 (Eval: accuracy 1), then an inference
// session loaded from its checkpoint returns the same logits as a slice of BatchSize*2 floats
// and evaluates the same.
func TestFineTuneAndInfer(t *testing.T) {
	ctx := context.Background()
	s, err := NewSession(strings.Replace(strings.Replace(tinyClassifier, "%s", "", 1), "%s", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := makeBatch(16, 32, 0)
	b.NextSentenceLabels = nil
	b.Labels = make([]int32, 16)
	for i := 0; i < 16; i++ {
		b.Labels[i] = int32(i % 2)
		b.InputIDs[i*32+2] = 8 - int32(i%2) // 7 for label 1, 8 for label 0
	}
	var first, last float32
	for i := 0; i < 40; i++ {
		r, err := s.Step(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Loss
		}
		last = r.Loss
	}
	if first < 0.6 || first > 0.8 || last > 0.1 {
		t.Fatalf("loss %v -> %v, want ~0.69 -> < 0.1", first, last)
	}
	logits, err := s.Infer(ctx, b, OutputLogits)
	if err != nil {
		t.Fatal(err)
	}
	if len(logits) != 16*2 {
		t.Fatalf("%d logits, want 32", len(logits))
	}
	for i := 0; i < 16; i++ {
		if (logits[2*i+1] > logits[2*i]) != (b.Labels[i] == 1) {
			t.Fatalf("sequence %d: logits %v, label %d", i, logits[2*i:2*i+2], b.Labels[i])
		}
	}
	ev, err := s.Eval(ctx, b)
	if err != nil || ev.TaskAccuracy != 1 || ev.TaskLoss > 0.1 || ev.TaskCount != 16 || ev.Sequences != 16 {
		t.Fatalf("Eval: %+v, %v", ev, err)
	}
	hidden, err := s.Infer(ctx, b, OutputHidden)
	if err != nil || len(hidden) != 16*32*32 {
		t.Fatalf("hidden: %d floats, %v", len(hidden), err)
	}
	path := filepath.Join(t.TempDir(), "cls.h5")
	if err := s.Checkpoint(path); err != nil {
		t.Fatal(err)
	}
	inf, err := NewSession(strings.Replace(strings.Replace(tinyClassifier, "%s", `, "init_checkpoint": "`+path+`"`, 1),
		"%s", `, "mode": "inference"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	again, err := inf.Infer(ctx, &Batch{BatchSize: 16, SeqLength: 32, InputIDs: b.InputIDs, SegmentIDs: b.SegmentIDs,
		InputMask: b.InputMask}, OutputLogits)
	if err != nil {
		t.Fatal(err)
	}
	for i := range logits {
		if again[i] != logits[i] {
			t.Fatalf("inference session logit %d = %v, training session %v", i, again[i], logits[i])
		}
	}
	if again, err := inf.Eval(ctx, b); err != nil || again != ev {
		t.Fatalf("inference session Eval: %+v, %v; training session %+v", again, err, ev)
	}
	var e *Error
	_, err = inf.Eval(ctx, nil)
	if !errors.As(err, &e) || e.Status != ErrInvalidArgument || !strings.Contains(e.Message, "needs a labelled batch") {
		t.Fatalf("Eval without a batch: %v", err)
	}
	_, err = inf.Step(ctx, b)
	if !errors.As(err, &e) || e.Status != ErrUnsupported || !strings.Contains(e.Message, "inference") {
		t.Fatalf("Step on an inference session: %v", err)
	}
	_, err = inf.Infer(ctx, b, Output(9))
	if !errors.As(err, &e) || e.Status != ErrInvalidArgument || !strings.Contains(e.Message, "bert_output = 9") {
		t.Fatalf("Infer with a bad output: %v", err)
	}
	b.Labels = b.Labels[:3]
	if _, err := s.Step(ctx, b); err == nil || !strings.Contains(err.Error(), "Labels has 3 elements") {
		t.Fatalf("short Labels: %v", err)
	}
}
