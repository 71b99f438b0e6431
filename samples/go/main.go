// trainsvc: a small training service over the bertengine Go binding. It trains a model from a
// JSON config in the background, logs progress, serves it as JSON on GET /progress, and on
// POST /stop (or SIGINT/SIGTERM) cancels the running step (the engine aborts it), writes a
// checkpoint and exits.
//
//	go run . -config ../configs/<file>.json -addr 127.0.0.1:8080 -checkpoint final.h5
//	curl localhost:8080/progress
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	bertengine "github.com/bertengine/bertengine/bindings/go"
)

const tinyConfig = `{"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
 "train": {"micro_batch": 16, "steps": 80, "lr": 0.02, "threads": 1},
 "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}}`

type progress struct {
	mu    sync.Mutex
	Steps int64                 `json:"steps_total"`
	Last  bertengine.StepResult `json:"last"`
	Done  bool                  `json:"done"`
	Error string                `json:"error,omitempty"`
}

func main() {
	configPath := flag.String("config", "", "JSON config file (default: a tiny model on synthetic data)")
	steps := flag.Int64("steps", 80, "optimizer steps to run")
	every := flag.Int64("log-every", 10, "log a progress line every N steps")
	addr := flag.String("addr", "", "serve progress on this address (empty: no HTTP)")
	ckpt := flag.String("checkpoint", "trainsvc_final.h5", "checkpoint written at the end")
	flag.Parse()

	config := tinyConfig
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			log.Fatal(err)
		}
		config = string(b)
	}
	log.Printf("bertengine %s", bertengine.Version())
	s, err := bertengine.NewSession(config)
	if err != nil {
		log.Fatalf("config: %v", err)
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := &progress{Steps: *steps}
	if *addr != "" {
		http.HandleFunc("/progress", func(w http.ResponseWriter, _ *http.Request) {
			p.mu.Lock()
			defer p.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(p)
		})
		http.HandleFunc("/stop", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			stop()
		})
		go func() { log.Print(http.ListenAndServe(*addr, nil)) }()
	}

	for i := int64(0); i < *steps; i++ {
		r, err := s.Step(ctx, nil)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				log.Printf("stopped: %v", err)
				break
			}
			p.mu.Lock()
			p.Error = err.Error()
			p.mu.Unlock()
			log.Fatalf("step: %v", err)
		}
		p.mu.Lock()
		p.Last = r
		p.mu.Unlock()
		if r.Step%*every == 0 || i == *steps-1 {
			log.Printf("step %d loss %.4f (mlm %.4f nsp %.4f) lr %.5f %.0f seq/s",
				r.Step, r.Loss, r.MLMLoss, r.NSPLoss, r.LearningRate, r.SequencesPerSecond)
		}
	}
	if err := s.Checkpoint(*ckpt); err != nil {
		log.Fatalf("checkpoint: %v", err)
	}
	ev, err := s.Eval(context.Background(), nil)
	if err != nil {
		log.Fatalf("eval: %v", err)
	}
	p.mu.Lock()
	p.Done = true
	p.mu.Unlock()
	log.Printf("wrote %s; eval mlm accuracy %.3f loss %.3f", *ckpt, ev.MLMAccuracy, ev.MLMLoss)
}
