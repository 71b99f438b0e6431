package bertengine

// #include <stdlib.h>
import "C"

import (
	"unsafe"

	"github.com/bertengine/bertengine/bindings/go/capi"
)

// Batch is one batch of pretraining samples with the fields of the NVIDIA DLE shards, row-major:
// InputIDs, SegmentIDs, InputMask have BatchSize*SeqLength elements; MaskedLMPositions and
// MaskedLMIDs BatchSize*MaxPredictions; NextSentenceLabels BatchSize. The engine only reads it
// during a call.
type Batch struct {
	BatchSize, SeqLength, MaxPredictions int
	InputIDs, SegmentIDs, InputMask      []int32
	MaskedLMPositions, MaskedLMIDs       []int32
	NextSentenceLabels                   []int32
}

// cBatch is a bert_batch whose arrays live in one C allocation.
type cBatch struct {
	batch capi.Bert_batch
	mem   unsafe.Pointer
}

func (c *cBatch) free() {
	if c.batch != nil {
		capi.DeleteBert_batch(c.batch)
	}
	C.free(c.mem)
}

// toC checks the slice lengths and copies the batch into C memory (nil: a NULL batch).
func (b *Batch) toC() (*cBatch, error) {
	if b == nil {
		return &cBatch{batch: capi.SwigcptrBert_batch(0)}, nil
	}
	if b.BatchSize <= 0 || b.SeqLength <= 0 || b.MaxPredictions < 0 {
		return nil, newError(ErrInvalidArgument, "batch sizes must be positive: BatchSize %d, SeqLength %d, MaxPredictions %d",
			b.BatchSize, b.SeqLength, b.MaxPredictions)
	}
	bs, bp := b.BatchSize*b.SeqLength, b.BatchSize*b.MaxPredictions
	fields := []struct {
		name string
		data []int32
		want int
	}{
		{"InputIDs", b.InputIDs, bs}, {"SegmentIDs", b.SegmentIDs, bs}, {"InputMask", b.InputMask, bs},
		{"MaskedLMPositions", b.MaskedLMPositions, bp}, {"MaskedLMIDs", b.MaskedLMIDs, bp},
		{"NextSentenceLabels", b.NextSentenceLabels, b.BatchSize},
	}
	total := 0
	for _, f := range fields {
		if len(f.data) != f.want {
			return nil, newError(ErrInvalidArgument, "batch field %s has %d elements, want %d", f.name, len(f.data), f.want)
		}
		total += f.want
	}
	mem := C.malloc(C.size_t(total+1) * 4)
	all := unsafe.Slice((*int32)(mem), total+1)
	ptrs := make([]*int, len(fields))
	off := 0
	for i, f := range fields {
		copy(all[off:], f.data)
		ptrs[i] = (*int)(unsafe.Pointer(&all[off]))
		off += f.want
	}
	cb := capi.NewBert_batch()
	capi.Bert_batch_init(cb)
	cb.SetBatch_size(b.BatchSize)
	cb.SetSeq_length(b.SeqLength)
	cb.SetMax_predictions(b.MaxPredictions)
	cb.SetInput_ids(ptrs[0])
	cb.SetSegment_ids(ptrs[1])
	cb.SetInput_mask(ptrs[2])
	cb.SetMasked_lm_positions(ptrs[3])
	cb.SetMasked_lm_ids(ptrs[4])
	cb.SetNext_sentence_labels(ptrs[5])
	return &cBatch{batch: cb, mem: mem}, nil
}
