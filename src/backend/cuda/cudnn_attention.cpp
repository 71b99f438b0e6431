// FusedAttention through cudnn-frontend's SDPA graphs (forward with softmax stats, backward).
// qkv [T, 3H] (16-bit activations as they are, fp32 cast to 16 bits first) is read in place as
// strided Q/K/V views ("T3HD"); the padding mask takes per-sequence key counts derived on the
// device from key_bias. A layout whose sequences all have one length L is a [B, h, L, D] batch.
// Any other (variable-length, packed) runs ragged on Hopper-class GPUs, each sequence placed by
// offsets from AttentionLayout::seq_start; elsewhere cuDNN has no ragged backward, so it runs the
// padded graphs on a copy: the packed rows scattered (and cast) into a zero-padded [B, S_pad, 3H]
// batch, ctx and dqkv gathered back (kernels/attention_padding). Graphs are built once per
// (direction, layout kind, B, S, heads, head_dim, dtype, dropout p) and cached. A call with one
// sequence length uploads nothing (key counts and the dropout seed are made on the device), so it
// can be recorded in a CUDA graph. The backward needs the forward's output O (read back from a
// 16-bit ctx of the packed rows, kept beside the stats otherwise), its sequence lengths and,
// padded, its softmax stats: they are kept per stats buffer.
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <climits>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/cuda/attention_table.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fused_attention.h"
#include "backend/cuda/sdpa_graph.h"
#include "core/log.h"
#include "kernels/fused_attention_inputs.h"
#include "kernels/attention_padding.h"
#include "kernels/cast.h"

#define CUDNN_CHECK(call)                                                                   \
  do {                                                                                      \
    const cudnnStatus_t bert_cudnn_st_ = (call);                                            \
    if (bert_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                             \
      ::bert::fail(::bert::Code::backend, #call, " failed: ",                               \
                   cudnnGetErrorString(bert_cudnn_st_), " at ", __FILE__, ":", __LINE__);   \
  } while (0)

namespace bert {

bool fused_attention_built() { return true; }

namespace {

namespace fe = cudnn_frontend;

// A variable-length batch's bound S (ragged graphs' dims, padded copies' length) is its longest
// sequence rounded up to this multiple, so batches of similar shape share one graph (at most 8
// for sequences of up to 512 tokens, per batch size). 64 is the sequence tile of cuDNN's
// flash-attention kernels, so the padding adds at most one partly used tile per sequence.
constexpr int64_t kLenQuantum = 64;

using Shape = SdpaShape;

bool is_ragged(const AttentionLayout& layout) {
  const int64_t first = layout.seq_start[1] - layout.seq_start[0];
  for (int b = 0; b < layout.num_seqs(); ++b)
    if (layout.seq_start[b + 1] - layout.seq_start[b] != first) return true;
  return false;
}

// pad_varlen: variable-length layouts take the padded graphs (else the ragged ones).
Shape shape_of(const AttentionLayout& layout, int heads, int head_dim, bool pad_varlen) {
  Shape s;
  s.B = layout.num_seqs();
  s.T = layout.total_tokens();
  s.h = heads;
  s.D = head_dim;
  const int64_t first = layout.seq_start[1] - layout.seq_start[0];
  const bool varlen = is_ragged(layout);
  s.ragged = varlen && !pad_varlen;
  s.padded = varlen && pad_varlen;
  s.S = varlen ? (layout.max_len() + kLenQuantum - 1) / kLenQuantum * kLenQuantum : first;
  return s;
}

class CudnnAttention final : public FusedAttention {
 public:
  CudnnAttention(DeviceMemory& memory, cudaStream_t stream, kernels::LowPrecision io,
                 const FusedAttentionOptions& options)
      : memory_(memory),
        stream_(stream),
        io_(io),
        qkv16_(memory, stream),
        grad16_(memory, stream),
        dqkv16_(memory, stream),
        table_(memory, stream),
        workspace_(memory, stream) {
    CUDNN_CHECK(cudnnCreate(&handle_));
    CUDNN_CHECK(cudnnSetStream(handle_, stream_));
    // Ragged (THD) backward with ragged statistics: Hopper-class only (sm_8x and sm_12x are
    // refused by cudnn-frontend's support checks); elsewhere variable lengths run padded.
    int device = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    pad_varlen_ = options.pad_varlen || major < 9 || major == 12;
    deterministic_only_ = options.deterministic_only;
  }
  ~CudnnAttention() override {
    graphs_.clear();  // execution plans before the handle they were built on
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }

  void forward(Act ctx, float* stats, ConstAct qkv, const float* key_bias,
               const AttentionLayout& layout, int heads, int head_dim,
               const DropoutSite& site) override;
  void backward(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, const float* stats,
                const AttentionLayout& layout, int heads, int head_dim,
                const DropoutSite& site) override;

 private:
  // What a forward call keeps for the backward, in one buffer: its 16-bit output O [rows, H]
  // unless cuDNN wrote O into ctx itself (a 16-bit ctx of the packed rows: the backward reads it
  // there), the per-sequence key counts [B] and, when padded, the softmax stats [B, h, S] (the
  // caller's stats buffer, sized for heads · T, holds them otherwise).
  struct Saved {
    std::unique_ptr<ScratchBuffer> buffer;
    int64_t T = 0, B = 0, H = 0, S = 0;  // the forward's shape (T 0: none yet)
    bool padded = false;
    const void* o_in_ctx = nullptr;  // the ctx cuDNN wrote O into (null: O is kept here)
    size_t seq_len_at = 0, stats_at = 0, bytes = 0;  // byte offsets of the counts, stats; size
  };
  // The call's device-side tables (see upload_table); the per-sequence ones are null when all
  // sequences have one length.
  struct Table {
    int32_t* seq_start = nullptr;
    int32_t* off_qkv = nullptr;
    int32_t* off_o = nullptr;
    int32_t* off_stats = nullptr;
    int64_t* seed = nullptr;
    int64_t* offset = nullptr;
  };
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int, float>;

  void check_shape(const Shape& s, const char* op) const;
  Table upload_table(const AttentionLayout& layout, const Shape& s, const DropoutSite& site);
  fe::graph::Graph& graph(bool backward, const Shape& s, float p);
  std::shared_ptr<fe::graph::Graph> build(bool backward, const Shape& s, float p,
                                          bool deterministic);
  void execute(fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack);
  // The table's ragged offsets (when ragged) and dropout seed/offset (when p > 0) into `pack`.
  static void add_table(std::unordered_map<int64_t, void*>& pack, const Table& t, const Shape& s, float p);
  // cuDNN's 16-bit view of an input [T, width]: a 16-bit tensor of the packed rows itself, else
  // its padded or cast copy in `copy`.
  char* lowp_input(ConstAct x, ScratchBuffer& copy, const Shape& s, const Table& t, int64_t width);
  // Whether cuDNN writes a result [rows, width] straight into `out`: a 16-bit tensor of the
  // packed rows (else write_output fills it from a 16-bit copy).
  bool writes_in_place(ConstAct out, const Shape& s) const { return !s.padded && out.type != DType::f32; }
  // A 16-bit result [rows, width] into `out`: unpadded or cast (fp32).
  void write_output(Act out, const void* lowp, const Shape& s, const Table& t, int64_t width);
  // Error(internal) unless `type` is fp32 or the I/O type.
  void check_io_type(DType type) const;

  DeviceMemory& memory_;
  cudaStream_t stream_;
  kernels::LowPrecision io_;
  cudnnHandle_t handle_ = nullptr;
  ScratchBuffer qkv16_, grad16_, dqkv16_, table_, workspace_;
  std::vector<int32_t> host_table_;
  std::map<Key, std::shared_ptr<fe::graph::Graph>> graphs_;
  std::map<const float*, Saved> saved_;
  std::string build_error_;  // why the last graph build failed
  bool pad_varlen_ = false;   // variable-length batches through the padded graphs
  bool deterministic_only_ = false;  // no fallback to the non-deterministic backward
};

void CudnnAttention::check_shape(const Shape& s, const char* op) const {
  // cuDNN's SDPA backward takes head dims up to 128 on Ampere (256 on Hopper), multiples of 8.
  BERT_CHECK(s.D % 8 == 0 && s.D <= 128, Code::unsupported, op,
             ": fused attention (train.fused_attention) needs a head dimension that is a multiple "
             "of 8 and at most 128; this model has ", s.D);
  BERT_CHECK(s.T * 3 * s.h * s.D < INT32_MAX, Code::unsupported, op, ": ", s.T,
             " tokens of width ", 3 * s.h * s.D, " exceed the fused attention's 32-bit offsets");
}

CudnnAttention::Table CudnnAttention::upload_table(const AttentionLayout& layout, const Shape& s,
                                                   const DropoutSite& site) {
  // Each part 16-byte aligned (attention_table.h).
  const AttentionTableLayout parts = attention_table_layout(s.B);
  const size_t n = static_cast<size_t>(s.B + 1);
  auto* device = static_cast<int32_t*>(table_.get(parts.words * sizeof(int32_t)));
  Table t;
  t.seed = reinterpret_cast<int64_t*>(device + parts.seed);
  t.offset = reinterpret_cast<int64_t*>(device + parts.offset);
  // cuDNN's own Philox stream for this site: the (seed, step, tensor id) triple folded into its
  // seed, offset 0, on the device (a recorded call reads each replay's step). The backward folds
  // the same seed, so it regenerates the same mask.
  if (site.p > 0.0f) kernels::attention_dropout_seed(t.seed, t.offset, site, stream_);
  // One length (the batch as [B, h, S, D]): the sequence starts follow from it, no table.
  if (!s.ragged && !s.padded) return t;
  host_table_.assign(parts.seed, 0);
  const int64_t H = s.h * s.D;
  for (size_t b = 0; b < n; ++b) {
    const int64_t start = layout.seq_start[b];
    host_table_[parts.seq_start + b] = static_cast<int32_t>(start);
    host_table_[parts.off_qkv + b] = static_cast<int32_t>(start * 3 * H);
    host_table_[parts.off_o + b] = static_cast<int32_t>(start * H);
    host_table_[parts.off_stats + b] = static_cast<int32_t>(start * s.h);
  }
  // Pageable source: staged before cudaMemcpyAsync returns; ordered before the graph on stream_.
  // (Variable-length batches are not recorded: CUDA graphs take one length per recording.)
  CUDA_CHECK(cudaMemcpyAsync(device, host_table_.data(), host_table_.size() * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_));
  t.seq_start = device + parts.seq_start;
  t.off_qkv = device + parts.off_qkv;
  t.off_o = device + parts.off_o;
  t.off_stats = device + parts.off_stats;
  return t;
}

std::shared_ptr<fe::graph::Graph> CudnnAttention::build(bool backward, const Shape& s, float p,
                                                        bool deterministic) {
  std::shared_ptr<fe::graph::Graph> g = describe_sdpa_graph(backward, s, p, deterministic, io_);
  // Each step runs only when the previous one succeeded.
  fe::error_t st = g->validate();
  if (st.is_good()) st = g->build_operation_graph(handle_);
  if (st.is_good()) st = g->create_execution_plans({fe::HeurMode_t::A});
  if (st.is_good()) st = g->check_support(handle_);
  if (st.is_good()) st = g->build_plans(handle_);
  if (!st.is_good()) {
    build_error_ = st.get_message();
    return nullptr;
  }
  return g;
}

fe::graph::Graph& CudnnAttention::graph(bool backward, const Shape& s, float p) {
  const Key key(backward, s.ragged, s.B, s.S, s.h, s.D, static_cast<int>(io_), p);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return *it->second;
  check_not_capturing(stream_, "building cuDNN's fused attention ", backward ? "backward" : "forward", " graph for ",
                      s.B, " sequences of ", s.S, " tokens");
  // The backward prefers cuDNN's deterministic algorithm (the engine's default everywhere);
  // where that is not offered it falls back to the atomics-based one.
  std::shared_ptr<fe::graph::Graph> g = build(backward, s, p, true);
  BERT_CHECK(g != nullptr || !backward || !deterministic_only_, Code::unsupported,
             "cuDNN offers no deterministic fused attention backward for ", s.B, " sequences of ",
             s.ragged || s.padded ? "up to " : "", s.S, " tokens, ", s.h, " heads of ", s.D, " (cuDNN ",
             cudnnGetVersion(), "): ", build_error_, " (CudaOptions::fused_attention_deterministic_only)");
  if (g == nullptr && backward) {
    g = build(backward, s, p, false);
    if (g != nullptr)
      log_message(log_warning, "cuDNN offers no deterministic fused attention backward for this "
                               "shape; using the non-deterministic one");
  }
  BERT_CHECK(g != nullptr, Code::unsupported, "cuDNN has no fused attention ",
             backward ? "backward" : "forward", " for ", s.B, " sequences of ",
             s.ragged || s.padded ? "up to " : "", s.S, " tokens, ", s.h, " heads of ", s.D,
             " (train.fused_attention; cuDNN ", cudnnGetVersion(), "): ", build_error_);
  return *graphs_.emplace(key, std::move(g)).first->second;
}

void CudnnAttention::add_table(std::unordered_map<int64_t, void*>& pack, const Table& t, const Shape& s,
                               float p) {
  if (s.ragged) {
    for (int64_t uid : {kOffQ, kOffK, kOffV}) pack[uid] = t.off_qkv;
    pack[kOffO] = t.off_o;
    pack[kOffStats] = t.off_stats;
  }
  if (p > 0.0f) {
    pack[kSeed] = t.seed;
    pack[kOffset] = t.offset;
  }
}

void CudnnAttention::execute(fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack) {
  int64_t bytes = 0;
  fe::error_t st = g.get_workspace_size(bytes);
  BERT_CHECK(st.is_good(), Code::backend, "cuDNN attention workspace query failed: ",
             st.get_message());
  void* workspace = bytes > 0 ? workspace_.get(static_cast<size_t>(bytes)) : nullptr;
  st = g.execute(handle_, pack, workspace);
  BERT_CHECK(st.is_good(), Code::backend, "cuDNN fused attention failed: ", st.get_message());
}

void CudnnAttention::forward(Act ctx, float* stats, ConstAct qkv, const float* key_bias,
                             const AttentionLayout& layout, int heads, int head_dim,
                             const DropoutSite& site) {
  const Shape s = shape_of(layout, heads, head_dim, pad_varlen_);
  check_shape(s, "attention_fwd");
  BERT_CHECK(key_bias != nullptr, Code::invalid_argument,
             "attention_fwd: the fused attention needs key_bias (its padding mask)");
  if (s.T == 0) return;
  const int64_t H = s.h * s.D, rows = s.rows();
  Saved& saved = saved_[stats];
  if (saved.buffer == nullptr) saved.buffer = std::make_unique<ScratchBuffer>(memory_, stream_);
  saved.T = 0;  // valid for a backward only once this forward has run
  check_io_type(ctx.type);
  saved.o_in_ctx = writes_in_place(ctx, s) ? ctx.data : nullptr;
  // [O [rows, H] 16-bit unless in ctx | seq_len [B] | padded: stats [B, h, S] fp32], each
  // 256-byte aligned.
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  saved.seq_len_at = saved.o_in_ctx ? 0 : aligned(static_cast<size_t>(rows * H) * 2);
  saved.stats_at = aligned(saved.seq_len_at + s.B * sizeof(int32_t));
  saved.bytes = s.padded ? saved.stats_at + static_cast<size_t>(s.B * s.h * s.S) * sizeof(float)
                         : saved.seq_len_at + s.B * sizeof(int32_t);
  char* keep = static_cast<char*>(saved.buffer->get(saved.bytes));
  void* o16 = saved.o_in_ctx ? ctx.data : keep;
  auto* seq_len = reinterpret_cast<int32_t*>(keep + saved.seq_len_at);
  float* stats_out = s.padded ? reinterpret_cast<float*>(keep + saved.stats_at) : stats;
  const Table t = upload_table(layout, s, site);
  char* qkv16 = lowp_input(qkv, qkv16_, s, t, 3 * H);
  kernels::attention_seq_lengths(seq_len, t.seq_start, s.S, key_bias, static_cast<int>(s.B), stream_);
  // Padded query rows are not written by cuDNN: they read as 0.
  CUDA_CHECK(cudaMemsetAsync(o16, 0, static_cast<size_t>(rows * H) * 2, stream_));
  std::unordered_map<int64_t, void*> pack = {
      {kQ, qkv16}, {kK, qkv16 + H * 2}, {kV, qkv16 + 2 * H * 2}, {kO, o16}, {kStats, stats_out},
      {kSeqLenQ, seq_len}, {kSeqLenKV, seq_len}};
  add_table(pack, t, s, site.p);
  execute(graph(false, s, site.p), pack);
  if (!saved.o_in_ctx) write_output(ctx, o16, s, t, H);  // O stays kept for the backward
  saved.T = s.T;
  saved.B = s.B;
  saved.H = H;
  saved.S = s.S;
  saved.padded = s.padded;
}

void CudnnAttention::backward(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv,
                              const float* stats, const AttentionLayout& layout, int heads,
                              int head_dim, const DropoutSite& site) {
  const Shape s = shape_of(layout, heads, head_dim, pad_varlen_);
  check_shape(s, "attention_bwd");
  if (s.T == 0) return;
  const int64_t H = s.h * s.D, rows = s.rows();
  auto it = saved_.find(stats);
  BERT_CHECK(it != saved_.end() && it->second.T == s.T && it->second.B == s.B &&
                 it->second.H == H && it->second.S == s.S && it->second.padded == s.padded,
             Code::invalid_argument,
             "attention_bwd: the fused attention has no forward output for this probs buffer and "
             "layout (", s.B, " sequences, ", s.T, " tokens); run attention_fwd with it first");
  const Saved& saved = it->second;
  BERT_CHECK(saved.o_in_ctx == nullptr || saved.o_in_ctx == ctx.data, Code::invalid_argument,
             "attention_bwd: ctx (", ctx.data, ") is not the output of the forward that wrote this probs buffer (",
             saved.o_in_ctx, "), which the fused attention reads back");
  char* keep = static_cast<char*>(saved.buffer->get(saved.bytes));
  const void* o16 = saved.o_in_ctx ? saved.o_in_ctx : keep;
  auto* seq_len = reinterpret_cast<int32_t*>(keep + saved.seq_len_at);
  float* stats_in = s.padded ? reinterpret_cast<float*>(keep + saved.stats_at)
                             : const_cast<float*>(stats);
  const Table t = upload_table(layout, s, site);
  char* qkv16 = lowp_input(qkv, qkv16_, s, t, 3 * H);
  char* do16 = lowp_input(dctx, grad16_, s, t, H);
  // A 16-bit dqkv of the packed rows takes cuDNN's output directly; else a copy is unpadded or cast.
  const bool direct = writes_in_place(dqkv, s);
  auto* dqkv16 = direct ? static_cast<char*>(dqkv.data)
                        : static_cast<char*>(dqkv16_.get(static_cast<size_t>(rows * 3 * H) * 2));
  CUDA_CHECK(cudaMemsetAsync(dqkv16, 0, static_cast<size_t>(rows * 3 * H) * 2, stream_));
  std::unordered_map<int64_t, void*> pack = {
      {kQ, qkv16},          {kK, qkv16 + H * 2},   {kV, qkv16 + 2 * H * 2},
      {kO, const_cast<void*>(o16)}, {kDO, do16},   {kStats, stats_in},
      {kDQ, dqkv16},        {kDK, dqkv16 + H * 2}, {kDV, dqkv16 + 2 * H * 2},
      {kSeqLenQ, seq_len},  {kSeqLenKV, seq_len}};
  add_table(pack, t, s, site.p);
  execute(graph(true, s, site.p), pack);
  if (!direct) write_output(dqkv, dqkv16, s, t, 3 * H);
}

char* CudnnAttention::lowp_input(ConstAct x, ScratchBuffer& copy, const Shape& s, const Table& t, int64_t width) {
  check_io_type(x.type);
  if (!s.padded && x.type != DType::f32) return static_cast<char*>(const_cast<void*>(x.data));  // read in place
  auto* lowp = static_cast<char*>(copy.get(static_cast<size_t>(s.rows() * width) * 2));
  if (s.padded) {
    kernels::pad_rows_to_lowp(lowp, x, t.seq_start, static_cast<int>(s.B), s.S, static_cast<int>(width), io_, stream_);
  } else {
    kernels::cast_to_lowp(lowp, x.f32(), s.T * width, 1.0f, io_, stream_);
  }
  return lowp;
}

void CudnnAttention::write_output(Act out, const void* lowp, const Shape& s, const Table& t, int64_t width) {
  check_io_type(out.type);
  if (s.padded) {
    kernels::unpad_rows_from_lowp(out, lowp, t.seq_start, static_cast<int>(s.B), s.S, static_cast<int>(width), io_,
                                  stream_);
  } else {
    kernels::cast_from_lowp(out.f32(), lowp, s.T * width, 1.0f, io_, stream_);
  }
}

void CudnnAttention::check_io_type(DType type) const {
  const DType io = kernels::storage_type(io_);
  BERT_CHECK(type == DType::f32 || type == io, Code::internal, "fused attention: a ", dtype_name(type),
             " activation tensor with ", dtype_name(io), " I/O");
}

}  // namespace

std::unique_ptr<FusedAttention> make_fused_attention(DeviceMemory& memory, cudaStream_t stream,
                                                     kernels::LowPrecision io, const FusedAttentionOptions& options) {
  return std::make_unique<CudnnAttention>(memory, stream, io, options);
}

}  // namespace bert
