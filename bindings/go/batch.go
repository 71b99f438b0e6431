package bertengine

// #include <stdlib.h>
// #include <bert.h>
import "C"

import (
	"unsafe"

	"github.com/bertengine/bertengine/bindings/go/capi"
)

// Batch is one batch of samples with the fields of the NVIDIA DLE shards and the labels of the
// fine-tuning heads, row-major: InputIDs, SegmentIDs, InputMask have BatchSize*SeqLength
// elements; MaskedLMPositions and MaskedLMIDs BatchSize*MaxPredictions; NextSentenceLabels
// BatchSize (nil: none, for fine-tuning and inference). Fine-tuning labels (nil when unused, see
// bert_batch in bert.h): Labels BatchSize (sequence classification) or BatchSize*SeqLength (token
// classification, negative = ignored); LabelValues BatchSize (regression); StartPositions,
// EndPositions BatchSize (question answering). The engine only reads it during a call.
type Batch struct {
	BatchSize, SeqLength, MaxPredictions int
	InputIDs, SegmentIDs, InputMask      []int32
	MaskedLMPositions, MaskedLMIDs       []int32
	NextSentenceLabels                   []int32
	Labels                               []int32
	LabelValues                          []float32
	StartPositions, EndPositions         []int32
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
	optional := func(data []int32) int { // nil optional fields pass NULL
		if data == nil {
			return -1
		}
		return b.BatchSize
	}
	labels := optional(b.Labels)
	if len(b.Labels) == bs {
		labels = bs
	}
	fields := []struct {
		name string
		data []int32
		want int // -1: absent (NULL)
	}{
		{"InputIDs", b.InputIDs, bs}, {"SegmentIDs", b.SegmentIDs, bs}, {"InputMask", b.InputMask, bs},
		{"MaskedLMPositions", b.MaskedLMPositions, bp}, {"MaskedLMIDs", b.MaskedLMIDs, bp},
		{"NextSentenceLabels", b.NextSentenceLabels, optional(b.NextSentenceLabels)},
		{"Labels", b.Labels, labels},
		{"StartPositions", b.StartPositions, optional(b.StartPositions)},
		{"EndPositions", b.EndPositions, optional(b.EndPositions)},
	}
	total := 0
	for _, f := range fields {
		if f.want >= 0 && len(f.data) != f.want {
			return nil, newError(ErrInvalidArgument, "batch field %s has %d elements, want %d", f.name, len(f.data), f.want)
		}
		if f.want > 0 {
			total += f.want
		}
	}
	if b.LabelValues != nil && len(b.LabelValues) != b.BatchSize {
		return nil, newError(ErrInvalidArgument, "batch field LabelValues has %d elements, want %d", len(b.LabelValues), b.BatchSize)
	}
	total += len(b.LabelValues) // float32 values share the allocation (same size as int32)
	mem := C.malloc(C.size_t(total+1) * 4)
	all := unsafe.Slice((*int32)(mem), total+1)
	ptrs := make([]*int, len(fields))
	off := 0
	for i, f := range fields {
		if f.want < 0 {
			continue
		}
		copy(all[off:], f.data)
		ptrs[i] = (*int)(unsafe.Pointer(&all[off]))
		off += f.want
	}
	var values *float32
	if b.LabelValues != nil {
		values = (*float32)(unsafe.Pointer(&all[off]))
		copy(unsafe.Slice(values, len(b.LabelValues)), b.LabelValues)
	}
	cb := capi.NewBert_batch()
	capi.Bert_batch_init_sized(cb, int64(C.sizeof_bert_batch))
	cb.SetBatch_size(b.BatchSize)
	cb.SetSeq_length(b.SeqLength)
	cb.SetMax_predictions(b.MaxPredictions)
	cb.SetInput_ids(ptrs[0])
	cb.SetSegment_ids(ptrs[1])
	cb.SetInput_mask(ptrs[2])
	cb.SetMasked_lm_positions(ptrs[3])
	cb.SetMasked_lm_ids(ptrs[4])
	cb.SetNext_sentence_labels(ptrs[5])
	cb.SetLabels(ptrs[6])
	cb.SetStart_positions(ptrs[7])
	cb.SetEnd_positions(ptrs[8])
	cb.SetLabel_values(values)
	return &cBatch{batch: cb, mem: mem}, nil
}
