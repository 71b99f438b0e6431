// CostModelOps: each Ops call becomes the list of kernels CudaOps launches for it (same control
// flow as backend/cuda: cuda_ops.cpp, cuda_linear.cpp, cuda_attention.cpp, cublaslt_gemm.cpp and
// the launchers in kernels/), each with its FLOPs and the bytes it must move (activations at the
// size of the type each call passes them in); and the roofline prediction over those kernels. FLOPs of the non-GEMM kernels are rough operation counts: those
// kernels are memory-bound by far, so their bytes decide their time.
#include "perf/cost_model_ops.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "backend/cuda/attention_plan.h"
#include "backend/cuda/linear_plan.h"
#include "core/error.h"
#include "kernels/launch_sizes.h"

namespace bert {
namespace {

constexpr size_t kLabelStatusBytes = 16;   // softmax_xent's device label check (cuda_ops.h)
constexpr size_t kShadowedUploadBytes = size_t{4} << 20;  // int uploads remembered for row counts

// Elements from the first to one past the last element a (batched) row-major operand touches.
int64_t operand_span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int batch) {
  return (rows - 1) * ld + cols + static_cast<int64_t>(batch - 1) * stride;
}

// Row chunks of the column sums (column_sum_add, layernorm_bwd_params) over M rows.
int64_t chunks_of(int64_t M) { return kernels::row_chunks(M, kernels::kColumnSumRowsPerChunk); }

int64_t total_elems(const std::vector<ParamSegment>& segs) {
  int64_t n = 0;
  for (const ParamSegment& s : segs) n += s.size;
  return n;
}

int64_t segment_chunks(const std::vector<ParamSegment>& segs) {
  int64_t c = 0;
  for (const ParamSegment& s : segs) c += kernels::segment_chunks(s.size);
  return c;
}

// The sequence table of a packed layout: num_seqs + 1 token starts and num_seqs probs offsets.
double softmax_table_bytes(const AttentionLayout& layout) {
  return layout.uniform_length() > 0 ? 0.0 : 8.0 * (2 * layout.num_seqs() + 1);
}

// Activation kernels: rough FLOPs per element (erf/tanh polynomials).
double activation_flops(Activation act) { return act == Activation::none ? 0.0 : 20.0; }

}  // namespace

DeviceModel device_model(const std::string& name) {
  DeviceModel d;
  d.name = name;
  if (name == "h100") {  // H100 SXM5: dense tensor-core rates, HBM3, PCIe Gen5 x16
    d.tensor16_flops = 989e12;
    d.tf32_flops = 494e12;
    d.fp32_flops = 67e12;
    d.bandwidth = 3.35e12;
    d.host_link = 55e9;
    d.gpu_link = 450e9;  // NVLink 4, each direction
    // cuDNN 9's fused attention at sequence length 512 (the shortest measured), head dim 64, bf16,
    // no causal mask: 335 TFLOP/s forward, 266 backward (FlashAttention-3 paper, arXiv 2407.08608,
    // figures 5 and 6, on an H100 SXM5; FLOPs counted as here: 4 S^2 d per head forward, 2.5x that
    // backward). Shorter sequences reach less, so phase 1 (128) predictions with it are optimistic.
    d.fused_attention_fwd_flops = 335e12;
    d.fused_attention_bwd_flops = 266e12;
  } else if (name == "h200") {
    // Measured, not the datasheet: one lent H200 SXM (2026-11-29; driver 580.159.04, CUDA 13.0,
    // cuBLASLt 13.1, cuDNN 9.19). Peaks: a bf16 8192³ GEMM, 789 TFLOP/s, and a device-to-device
    // copy, 4.3 TB/s (the workplace's record of such machines); TF32, fp32 and the links are the
    // H100's datasheet rates (the same chip; not measured). What BERT-large reached, from
    // bench_op_profile of phase 1 (seq 128, micro-batch 64) and phase 2 (seq 512, 16) in bf16 with
    // the fused attention, each op's time less the profile's wait after every op (11 µs: the
    // profiled step less the unprofiled one, over its op calls): the dense layers' kernels 79% of
    // their roofline time, the fused residual LayerNorms 24%, LAMB 72%; cuDNN's attention 89 / 97
    // TFLOP/s forward / backward at seq 128 and 153 / 245 at seq 512. CUDA graphs saved 0.94 ms of
    // phase 1's 990 launches: about 1 µs each (the host queues ahead of the GPU).
    d = device_model("h100");
    d.name = name;
    d.tensor16_flops = 789e12;
    d.bandwidth = 4.3e12;
    d.fused_attention_by_length = {{128, 89e12, 97e12}, {512, 153e12, 245e12}};
    d.kind_efficiency = {{"gemm", 0.79}, {"activation", 0.79}, {"bias grad", 0.79}, {"cast (weights)", 0.79},
                         {"layernorm", 0.24}, {"optimizer", 0.72}};
    d.launch_seconds = 1e-6;
  } else if (name == "a100") {  // A100 80 GB SXM4: HBM2e, PCIe Gen4 x16
    d.tensor16_flops = 312e12;
    d.tf32_flops = 156e12;
    d.fp32_flops = 19.5e12;
    d.bandwidth = 2.0e12;
    d.host_link = 25e9;
    d.gpu_link = 300e9;  // NVLink 3, each direction
  } else {
    fail(Code::invalid_argument, "unknown device '", name, "' (known: h100, a100, h200)");
  }
  return d;
}

CostModelOps::CostModelOps(const CostModelOptions& options, std::unique_ptr<Ops> inner)
    : options_(options), inner_(std::move(inner)) {
  BERT_CHECK(!options_.activations_16bit || low_precision(), Code::invalid_argument,
             "cost model: 16-bit activations need precision bf16 or fp16, not '", precision_name(options_.precision), "'");
  BERT_CHECK(!options_.fused_attention || (options_.activations_16bit && !inner_), Code::invalid_argument,
             "cost model: the fused attention is modelled with 16-bit activations (bf16 or fp16) and without an "
             "inner backend (cuDNN is not emulated)");
}

int64_t CostModelOps::attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const {
  if (inner_) return inner_->attention_saved_elems(max_seqs, max_len, heads);
  return options_.fused_attention ? fused_attention_saved_elems(max_seqs, max_len, heads)
                                  : Ops::attention_saved_elems(max_seqs, max_len, heads);
}

DType CostModelOps::activation_type() const {
  if (inner_) return inner_->activation_type();
  if (!options_.activations_16bit) return DType::f32;
  return options_.precision == Precision::bf16 ? DType::bf16 : DType::f16;
}

CostModelOps::~CostModelOps() {
  for (const auto& [ptr, bytes] : reserved_) munmap(ptr, bytes);
  for (const auto& [ptr, bytes] : scratch_)
    if (ptr != nullptr) munmap(ptr, bytes);
}

std::string CostModelOps::name() const {
  return std::string("cost-model:") + precision_name(options_.precision) + (inner_ ? " over " + inner_->name() : "");
}

bool CostModelOps::low_precision() const { return is_16bit(options_.precision); }

MathUnit CostModelOps::gemm_unit() const {
  if (low_precision()) return MathUnit::tensor16;
  return options_.precision == Precision::tf32 ? MathUnit::tf32 : MathUnit::fp32;
}

KernelCost& CostModelOps::add(const char* op, const char* kind, double flops, double read, double write) {
  KernelCost k;
  k.op = op;
  k.kind = kind;
  k.flops = flops;
  k.read_bytes = read;
  k.write_bytes = write;
  kernels_.push_back(std::move(k));
  return kernels_.back();
}

// ---- memory -----------------------------------------------------------------------------

void* CostModelOps::alloc_impl(size_t bytes) {
  if (inner_) return inner_->alloc(bytes);
  const size_t reserved = std::max<size_t>(bytes, 1);
  void* p = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  BERT_CHECK(p != MAP_FAILED, Code::out_of_memory, "cost model: cannot reserve ", bytes, " bytes of address space");
  reserved_[p] = reserved;
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return p;
}

void CostModelOps::release_impl(void* ptr) {
  if (inner_) return inner_->release(ptr);
  if (ptr == nullptr) return;
  auto it = reserved_.find(ptr);
  BERT_CHECK(it != reserved_.end(), Code::invalid_argument, "cost model: release of unknown pointer ", ptr);
  munmap(it->first, it->second);
  live_bytes_ -= it->second;
  reserved_.erase(it);
}

size_t CostModelOps::peak_bytes() const { return inner_ ? inner_->peak_bytes() : peak_bytes_; }

void CostModelOps::upload_impl(void* dst, const void* host_src, size_t bytes) {
  if (inner_) inner_->upload(dst, host_src, bytes);
  if (bytes == 0) return;
  const auto* lo = static_cast<const char*>(dst);
  // Forget remembered uploads this one overwrites, then remember it when it is small.
  for (auto it = uploaded_ints_.begin(); it != uploaded_ints_.end();) {
    const char* end = it->first + it->second.size() * sizeof(int32_t);
    it = (it->first < lo + bytes && lo < end) ? uploaded_ints_.erase(it) : std::next(it);
  }
  if (bytes <= kShadowedUploadBytes && bytes % sizeof(int32_t) == 0) {
    std::vector<int32_t>& ints = uploaded_ints_[lo];
    ints.resize(bytes / sizeof(int32_t));
    std::memcpy(ints.data(), host_src, bytes);
  }
  KernelCost& k = add("upload", "host copy", 0, 0, 0);
  k.host_bytes = static_cast<double>(bytes);
  k.host_wait = true;  // CudaOps::upload waits: the host buffer may be reused on return
}

void CostModelOps::download_impl(void* host_dst, const void* src, size_t bytes) {
  if (inner_) inner_->download(host_dst, src, bytes);
  else if (bytes > 0) std::memset(host_dst, 0, bytes);
  if (bytes == 0) return;
  KernelCost& k = add("download", "host copy", 0, 0, 0);
  k.host_bytes = static_cast<double>(bytes);
  k.host_wait = true;
}

void CostModelOps::copy_impl(void* dst, const void* src, size_t bytes) {
  if (inner_) inner_->copy(dst, src, bytes);
  if (bytes == 0 || dst == src) return;
  add("copy", "copy", 0, static_cast<double>(bytes), static_cast<double>(bytes));
}

void CostModelOps::fill_zero_impl(void* dst, size_t bytes) {
  if (inner_) inner_->fill_zero(dst, bytes);
  if (bytes == 0) return;
  add("fill_zero", "memset", 0, 0, static_cast<double>(bytes));
}

void CostModelOps::synchronize_impl() {
  if (inner_) inner_->synchronize();
  KernelCost& k = add("synchronize", "host wait", 0, 0, 0);
  k.launches = 0;
  k.host_wait = true;
}

// ---- weights ------------------------------------------------------------------------------

void CostModelOps::set_weights(const float* params, int64_t n) {
  if (inner_) inner_->set_weights(params, n);
  weights_ = n > 0 ? params : nullptr;
  weight_elems_ = n;
  weights_stale_ = true;
}

void CostModelOps::weights_changed() {
  if (inner_) inner_->weights_changed();
  weights_stale_ = true;
}

void CostModelOps::refresh_weights() {
  if (inner_) inner_->refresh_weights();
  if (weights_ == nullptr || !weights_stale_ || !low_precision()) return;  // no mirror to refresh
  const double n = static_cast<double>(weight_elems_);
  add("refresh_weights", "cast (weights)", n, 4 * n, 2 * n);
  weights_stale_ = false;
}

namespace {

// The kernels a body queued, appended again on each replay.
class CostModelRecording final : public RecordedWork {
 public:
  CostModelRecording(std::vector<KernelCost>& kernels, std::vector<KernelCost> recorded)
      : kernels_(kernels), recorded_(std::move(recorded)) {}
  bool replay() override {
    kernels_.insert(kernels_.end(), recorded_.begin(), recorded_.end());
    return true;
  }

 private:
  std::vector<KernelCost>& kernels_;
  std::vector<KernelCost> recorded_;
};

}  // namespace

void CostModelOps::add_collective_work(const KernelCost& k) {
  BERT_CHECK(k.collective != k.join, Code::internal, "add_collective_work takes a collective or a join (", k.op, ")");
  kernels_.push_back(k);
}

std::unique_ptr<RecordedWork> CostModelOps::record(const std::function<void()>& body) {
  if (inner_) return nullptr;
  const size_t first = kernels_.size();
  body();
  std::vector<KernelCost> recorded(kernels_.begin() + static_cast<std::ptrdiff_t>(first), kernels_.end());
  kernels_.resize(first);
  for (KernelCost& k : recorded) {
    BERT_CHECK(!k.host_wait, Code::internal, "recorded work waits for the device in ", k.op);
    k.graphed = true;
  }
  return std::make_unique<CostModelRecording>(kernels_, std::move(recorded));
}

// ---- GEMMs ----------------------------------------------------------------------------------

void CostModelOps::lowp_operand(const char* op, ConstAct operand, int64_t span) {
  if (operand.type != DType::f32) return;  // a 16-bit activation: read as it is
  const float* x = operand.f32();
  const std::less<const float*> before;
  const bool mirrored = weights_ != nullptr && x != nullptr && !before(x, weights_) &&
                        !before(weights_ + weight_elems_, x) && span <= (weights_ + weight_elems_) - x;
  if (mirrored) {
    if (weights_stale_) {
      const double n = static_cast<double>(weight_elems_);
      add(op, "cast (weights)", n, 4 * n, 2 * n);
      weights_stale_ = false;
    }
    return;
  }
  for (const auto& [base, n] : staged_) {
    if (x != nullptr && !before(x, base) && !before(base + n, x) && span <= (base + n) - x) return;
  }
  const double n = static_cast<double>(span);
  add(op, "cast (activations)", n, 4 * n, 2 * n);
}

void CostModelOps::stage(const char* op, ConstAct data, int64_t n) {
  if (!low_precision() || n <= 0 || data.type != DType::f32) return;
  add(op, "cast (activations)", static_cast<double>(n), 4.0 * n, 2.0 * n);
  staged_.emplace_back(data.f32(), n);
}

void CostModelOps::gemm(const char* op, const char* kind, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const double in_elem = low_precision() ? 2.0 : 4.0;
  if (low_precision()) {  // LtGemm::lt_operands: our B first, then our A
    lowp_operand(op, g.B, g.trans_b ? operand_span(g.n, g.k, g.ldb, g.stride_b, g.batch)
                                    : operand_span(g.k, g.n, g.ldb, g.stride_b, g.batch));
    lowp_operand(op, g.A, g.trans_a ? operand_span(g.k, g.m, g.lda, g.stride_a, g.batch)
                                    : operand_span(g.m, g.k, g.lda, g.stride_a, g.batch));
  }
  // A 16-bit C reads its bias as 16 bits too (LtGemm::epilogue_bias: the mirror's copy).
  const DType c_type = g.C.type;  // and aux's
  const double c_elem = static_cast<double>(dtype_bytes(c_type));
  if (g.bias != nullptr && c_type != DType::f32) lowp_operand(op, g.bias, g.n);
  const double batch = g.batch, m = static_cast<double>(g.m), n = static_cast<double>(g.n),
               k = static_cast<double>(g.k);
  const double read = in_elem * batch * (m * k + k * n) + (g.beta != 0.0f ? c_elem * batch * m * n : 0) +
                      (g.bias != nullptr ? c_elem * n : 0);
  const double write = c_elem * batch * m * n * (g.aux.data != nullptr ? 2 : 1);
  add(op, kind, 2 * batch * m * n * k, read, write).unit = gemm_unit();
}

void CostModelOps::elementwise(const char* op, const char* kind, int64_t n, int inputs, int outputs,
                               double flops_per_elem, DType type) {
  const double e = static_cast<double>(n), size = static_cast<double>(dtype_bytes(type));
  add(op, kind, flops_per_elem * e, size * inputs * e, size * outputs * e);
}

void CostModelOps::column_sum(const char* op, int64_t M, int N, DType type) {
  const double chunks = static_cast<double>(chunks_of(M)), n = N, size = static_cast<double>(dtype_bytes(type));
  add(op, "bias grad", static_cast<double>(M) * N, size * static_cast<double>(M) * N, 8 * chunks * n);
  add(op, "bias grad", chunks * n, 8 * chunks * n + 4 * n, 4 * n);
}

// ---- embeddings, rows -------------------------------------------------------------------------

int64_t CostModelOps::distinct_rows(const int32_t* rows, int64_t n) const {
  const auto* p = reinterpret_cast<const char*>(rows);
  auto it = uploaded_ints_.upper_bound(p);
  if (it == uploaded_ints_.begin()) return n;
  --it;
  const int64_t first = (p - it->first) / static_cast<int64_t>(sizeof(int32_t));
  if ((p - it->first) % static_cast<int64_t>(sizeof(int32_t)) != 0 ||
      first + n > static_cast<int64_t>(it->second.size()))
    return n;
  const std::unordered_set<int32_t> distinct(it->second.begin() + first, it->second.begin() + first + n);
  return static_cast<int64_t>(distinct.size());
}

void CostModelOps::embedding_fwd_impl(const EmbeddingFwdArgs& a) {
  if (inner_) inner_->embedding_fwd(a);
  if (a.T == 0) return;
  const double h = a.H, t = static_cast<double>(a.T);
  const double rows = static_cast<double>(distinct_rows(a.word_ids, a.T) + distinct_rows(a.pos_ids, a.T) +
                                          distinct_rows(a.type_ids, a.T));
  add("embedding_fwd", "embedding", 2 * t * h, 12 * t + 4 * rows * h, static_cast<double>(dtype_bytes(a.out.type)) * t * h);
}

void CostModelOps::embedding_bwd_impl(const EmbeddingBwdArgs& a) {
  if (inner_) inner_->embedding_bwd(a);
  // CudaOps::embedding_bwd is three scatter_add_rows.
  for (const int32_t* ids : {a.word_ids, a.pos_ids, a.type_ids}) scatter_kernels("embedding_bwd", ids, a.T, a.H, a.dout.type, DType::f32);
}

void CostModelOps::gather_rows_impl(const GatherRowsArgs& a) {
  if (inner_) inner_->gather_rows(a);
  if (a.n == 0) return;
  const double h = a.H, e = static_cast<double>(a.n), size = static_cast<double>(dtype_bytes(a.out.type));
  add("gather_rows", "gather/scatter", 0, 4 * e + size * static_cast<double>(distinct_rows(a.rows, a.n)) * h, size * e * h);
}

void CostModelOps::scatter_add_rows_impl(const ScatterAddRowsArgs& a) {
  if (inner_) inner_->scatter_add_rows(a);
  scatter_kernels("scatter_add_rows", a.rows, a.n, a.H, a.src.type, a.dst.type);
}

void CostModelOps::scatter_kernels(const char* op, const int32_t* rows, int64_t n, int H, DType src, DType dst) {
  if (n == 0) return;
  const double h = H, e = static_cast<double>(n), distinct = static_cast<double>(distinct_rows(rows, n));
  const double src_size = static_cast<double>(dtype_bytes(src)), dst_size = static_cast<double>(dtype_bytes(dst));
  add(op, "gather/scatter", 0, 0, 4 * e);  // iota
  // CUB's onesweep radix sort of (int32 row, int32 index) pairs over 32 key bits: one
  // histogram pass over the keys, then four 8-bit passes reading and writing keys and values.
  add(op, "sort", 0, 4 * e, 0);
  add(op, "sort", 0, 4 * 8 * e, 4 * 8 * e).launches = 4;
  add(op, "gather/scatter", e * h, 8 * e + src_size * e * h + dst_size * distinct * h, dst_size * distinct * h);
}

// ---- dense layers ---------------------------------------------------------------------------

void CostModelOps::linear_fwd_impl(const LinearFwdArgs& a) {
  if (inner_) inner_->linear_fwd(a);
  if (a.M == 0) return;
  GemmArgs g = linear_fwd_gemm(a.in, a.W, a.b, a.M, a.K, a.N);
  g.C = a.out;  // (unfused, CudaOps writes pre_act of the same type)
  if (linear_fuses_gelu(a.act, a.b, a.N, options_.fuse_gelu_tanh)) {
    g.aux = a.pre_act;  // GELU_AUX_BIAS: out and pre_act from the epilogue
    gemm("linear_fwd", "gemm", g);
    return;
  }
  gemm("linear_fwd", "gemm", g);
  if (a.act != Activation::none) elementwise("linear_fwd", "activation", a.M * a.N, 1, 1, activation_flops(a.act), a.out.type);
}

void CostModelOps::activation_fwd_impl(const ActivationFwdArgs& a) {
  if (inner_) inner_->activation_fwd(a);
  if (a.n > 0) elementwise("activation_fwd", "activation", a.n, 1, 1, activation_flops(a.act), a.out.type);
}

void CostModelOps::linear_bwd_impl(const LinearBwdArgs& a) {
  if (inner_) inner_->linear_bwd(a);
  if (a.M == 0) return;
  ConstAct dpre = a.dout;
  if (a.act != Activation::none) {
    elementwise("linear_bwd", "activation", a.M * a.N, 2, 1, activation_flops(a.act), a.dout.type);
    dpre = a.dpre_scratch;
  }
  if (a.db != nullptr) column_sum("linear_bwd", a.M, a.N, dpre.type);
  if (a.dW != nullptr) gemm("linear_bwd", "gemm", linear_weight_grad_gemm(dpre, a.in, a.dW, a.M, a.K, a.N));
  if (a.din.data != nullptr) gemm("linear_bwd", "gemm", linear_input_grad_gemm(dpre, a.W, a.din, a.M, a.K, a.N, a.accumulate_din));
}

// ---- normalisation, dropout -------------------------------------------------------------------

void CostModelOps::layernorm_fwd_impl(const LayernormFwdArgs& a) {
  if (inner_) inner_->layernorm_fwd(a);
  if (a.M == 0) return;
  const double m = static_cast<double>(a.M), n = a.N, size = static_cast<double>(dtype_bytes(a.out.type));
  add("layernorm_fwd", "layernorm", 8 * m * n, size * m * n + 8 * n, size * m * n + 8 * m);
}

void CostModelOps::layernorm_bwd_impl(const LayernormBwdArgs& a) {
  if (inner_) inner_->layernorm_bwd(a);
  if (a.M == 0) return;
  const double m = static_cast<double>(a.M), n = a.N, chunks = static_cast<double>(chunks_of(a.M));
  const double size = static_cast<double>(dtype_bytes(a.din.type));
  add("layernorm_bwd", "layernorm", 10 * m * n, 2 * size * m * n + 8 * m + 4 * n, size * m * n);
  add("layernorm_bwd", "layernorm", 4 * m * n, 2 * size * m * n + 8 * m, 16 * chunks * n);
  add("layernorm_bwd", "layernorm", 2 * chunks * n, 16 * chunks * n + 8 * n, 8 * n);
}

void CostModelOps::dropout_residual_fwd_impl(const DropoutResidualFwdArgs& a) {
  if (inner_) inner_->dropout_residual_fwd(a);
  if (a.n > 0) elementwise("dropout_residual_fwd", "dropout/residual", a.n, a.residual.data != nullptr ? 2 : 1, 1, 4, a.out.type);
}

void CostModelOps::dropout_bwd_impl(const DropoutBwdArgs& a) {
  if (inner_) inner_->dropout_bwd(a);
  if (a.n > 0) elementwise("dropout_bwd", "dropout/residual", a.n, 1, 1, 4, a.din.type);
}

void CostModelOps::residual_layernorm_fwd_impl(const ResidualLayernormFwdArgs& a) {
  if (inner_) inner_->residual_layernorm_fwd(a);
  if (a.M == 0) return;
  const double m = static_cast<double>(a.M), n = a.N, size = static_cast<double>(dtype_bytes(a.out.type));
  // Reads in, residual, gamma, beta; writes res, out, mean, rstd.
  add("residual_layernorm_fwd", "layernorm", 12 * m * n, 2 * size * m * n + 8 * n, 2 * size * m * n + 8 * m);
}

void CostModelOps::residual_layernorm_bwd_impl(const ResidualLayernormBwdArgs& a) {
  if (inner_) inner_->residual_layernorm_bwd(a);
  if (a.M == 0) return;
  const double m = static_cast<double>(a.M), n = a.N;
  const double chunks = static_cast<double>(kernels::row_chunks(a.M, kernels::kResidualLayerNormRowsPerChunk));
  const double size = static_cast<double>(dtype_bytes(a.d_in.type));
  // Reads dout, res, mean, rstd, gamma; writes d_in, d_residual and the [chunks, 2N] double partials,
  // which the second kernel sums into dgamma, dbeta.
  add("residual_layernorm_bwd", "layernorm", 18 * m * n, 2 * size * m * n + 8 * m + 4 * n,
      2 * size * m * n + 16 * chunks * n);
  add("residual_layernorm_bwd", "layernorm", 2 * chunks * n, 16 * chunks * n + 8 * n, 8 * n);
}

// ---- attention (the reference path: head-batched GEMMs around one softmax launch per call) -----

void CostModelOps::softmax_table(const char* op, const AttentionLayout& layout, int heads) {
  if (layout.uniform_length() > 0) return;
  std::vector<int64_t> words(layout.seq_start.begin(), layout.seq_start.end());
  for (int b = 0; b < layout.num_seqs(); ++b) words.push_back(layout.probs_offset(b, heads));
  if (words == softmax_table_) return;
  add(op, "host copy", 0, 0, 0).host_bytes = softmax_table_bytes(layout);
  softmax_table_ = std::move(words);
}

void CostModelOps::attention_fwd_impl(const AttentionFwdArgs& a) {
  if (inner_) inner_->attention_fwd(a);
  if (options_.fused_attention) return fused_attention_fwd(a.probs.data, a.layout, a.heads, a.head_dim, a.site.p != 0.0f);
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const bool dropout = a.site.p != 0.0f;
  const int64_t elems = a.layout.probs_elems(a.heads);
  const double all = static_cast<double>(elems), T = static_cast<double>(a.layout.total_tokens());
  const double size = static_cast<double>(dtype_bytes(a.probs.type));  // P, its dropped copy and ctx
  const Act p = dropout ? scratch(0, elems, a.probs.type) : a.probs;
  const char* op = "attention_fwd";
  const char* kind = "gemm (attention)";
  softmax_table(op, a.layout, a.heads);
  stage(op, a.qkv, a.layout.total_tokens() * shape.ld_qkv);
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) { gemm(op, kind, attention_scores_gemm(shape, x, a.qkv, a.probs)); });
  const double table = softmax_table_bytes(a.layout);
  if (all > 0) add(op, "softmax", 6 * all, size * all + 4 * T + table, size * all * (dropout ? 2 : 1));  // one launch
  stage(op, p, elems);  // P (or its dropped copy) staged once
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) { gemm(op, kind, attention_context_gemm(shape, x, p, a.qkv, a.ctx)); });
  staged_.clear();
}

void CostModelOps::attention_bwd_impl(const AttentionBwdArgs& a) {
  if (inner_) inner_->attention_bwd(a);
  if (options_.fused_attention) return fused_attention_bwd(a.layout, a.heads, a.head_dim, a.site.p != 0.0f);
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const bool dropout = a.site.p != 0.0f;
  const int64_t elems = a.layout.probs_elems(a.heads);
  const double all = static_cast<double>(elems);
  const double size = static_cast<double>(dtype_bytes(a.probs.type));  // P, dropped P, dS and dqkv
  const ConstAct p = dropout ? ConstAct(scratch(0, elems, a.probs.type)) : a.probs;
  const Act dgrad = scratch(1, elems, a.probs.type);
  const char* op = "attention_bwd";
  const char* kind = "gemm (attention)";
  softmax_table(op, a.layout, a.heads);
  if (dropout && all > 0) add(op, "dropout/residual", 4 * all, size * all, size * all);
  stage(op, a.qkv, a.layout.total_tokens() * shape.ld_qkv);
  stage(op, a.dctx, a.layout.total_tokens() * shape.H);
  stage(op, p, elems);
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) {
    gemm(op, kind, attention_value_grad_gemm(shape, x, p, a.dctx, a.dqkv));
    gemm(op, kind, attention_probs_grad_gemm(shape, x, a.dctx, a.qkv, dgrad));
  });
  const double table = softmax_table_bytes(a.layout);
  if (all > 0) add(op, "softmax", 6 * all, 2 * size * all + table, size * all);  // one launch
  stage(op, dgrad, elems);  // dS feeds two GEMMs: staged once
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) {
    gemm(op, kind, attention_query_grad_gemm(shape, x, dgrad, a.qkv, a.dqkv));
    gemm(op, kind, attention_key_grad_gemm(shape, x, dgrad, a.qkv, a.dqkv));
  });
  staged_.clear();
}

Act CostModelOps::scratch(int which, int64_t elems, DType type) {
  const size_t bytes = std::max<size_t>(static_cast<size_t>(elems) * dtype_bytes(type), 1);
  auto& [base, reserved] = scratch_[which];
  if (bytes > reserved) {
    if (base != nullptr) munmap(base, reserved);
    base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    BERT_CHECK(base != MAP_FAILED, Code::out_of_memory, "cost model: cannot reserve ", bytes, " bytes of address space");
    reserved = bytes;
  }
  return Act(base, type);
}

// ---- loss ---------------------------------------------------------------------------------------

void CostModelOps::softmax_xent_impl(const SoftmaxXentArgs& a) {
  if (inner_) inner_->softmax_xent(a);
  if (a.M == 0) return;
  // Rows with a negative label read no logits (known when the host uploaded the labels).
  int64_t read_rows = a.M;
  const auto* p = reinterpret_cast<const char*>(a.labels);
  auto it = uploaded_ints_.upper_bound(p);
  if (it != uploaded_ints_.begin()) {
    --it;
    const int64_t first = (p - it->first) / static_cast<int64_t>(sizeof(int32_t));
    if (first + a.M <= static_cast<int64_t>(it->second.size()))
      read_rows = std::count_if(it->second.begin() + first, it->second.begin() + first + a.M,
                                [](int32_t l) { return l >= 0; });
  }
  const double m = static_cast<double>(a.M), r = static_cast<double>(read_rows);
  const double in_size = static_cast<double>(dtype_bytes(a.logits.type)), out_size = static_cast<double>(dtype_bytes(a.dlogits.type));
  add("softmax_xent", "loss", 8 * r * a.V, 4 * m + in_size * r * a.V,
      out_size * m * a.ld + 4 * m + (a.correct != nullptr ? 4 * m : 0));
  KernelCost& status = add("softmax_xent", "host copy", 0, 0, 0);  // async: no wait
  status.host_bytes = kLabelStatusBytes;
}

// ---- optimizer -----------------------------------------------------------------------------------

void CostModelOps::segment_table(const char* op, const std::vector<ParamSegment>& segs) {
  const double words = 3.0 * static_cast<double>(segs.size()) + 1;
  add(op, "host copy", 0, 0, 0).host_bytes = 8 * words;
  if (!segs.empty()) add(op, "host copy", 0, 0, 0).host_bytes = 4.0 * segs.size();
}

void CostModelOps::sumsq_kernels(const char* op, const std::vector<ParamSegment>& segs) {
  const double n = static_cast<double>(total_elems(segs)), chunks = static_cast<double>(segment_chunks(segs)),
               S = static_cast<double>(segs.size());
  if (chunks > 0) add(op, "optimizer", 2 * n, 4 * n, 8 * chunks);
  add(op, "optimizer", chunks, 8 * chunks + 8 * (S + 1), 8 * S);
}

void CostModelOps::direction_kernels(const char* op, const std::vector<ParamSegment>& segs, bool with_sums) {
  const double n = static_cast<double>(total_elems(segs));
  if (!with_sums) {
    add(op, "optimizer", 15 * n, 16 * n, 12 * n);
    return;
  }
  // The sums of squares of param and update ride along: two block sums per chunk into 2 · chunks
  // partials, then one launch sums each segment's partials.
  const double chunks = static_cast<double>(segment_chunks(segs)), S = static_cast<double>(segs.size());
  add(op, "optimizer", 19 * n, 16 * n, 12 * n + 16 * chunks);
  add(op, "optimizer", 2 * chunks, 16 * chunks + 8 * (S + 1), 16 * S);
}

void CostModelOps::segment_sumsq_impl(const SegmentSumsqArgs& a) {
  if (inner_) inner_->segment_sumsq(a);
  else std::fill(a.host_out, a.host_out + a.segs.size(), 0.0);
  if (a.segs.empty()) return;
  segment_table("segment_sumsq", a.segs);
  sumsq_kernels("segment_sumsq", a.segs);
  KernelCost& k = add("segment_sumsq", "host copy", 0, 0, 0);
  k.host_bytes = 8.0 * a.segs.size();
  k.host_wait = true;
}

void CostModelOps::adam_direction_impl(const AdamDirectionArgs& a) {
  if (inner_) inner_->adam_direction(a);
  else if (a.host_sumsq) std::fill(a.host_sumsq, a.host_sumsq + 2 * a.segs.size(), 0.0);
  if (a.segs.empty()) return;
  segment_table("adam_direction", a.segs);
  direction_kernels("adam_direction", a.segs, a.host_sumsq != nullptr);
  if (!a.host_sumsq) return;
  KernelCost& k = add("adam_direction", "host copy", 0, 0, 0);  // the host waits for the 2S sums
  k.host_bytes = 16.0 * a.segs.size();
  k.host_wait = true;
}

void CostModelOps::apply_update_impl(const ApplyUpdateArgs& a) {
  if (inner_) inner_->apply_update(a);
  if (a.segs.empty()) return;
  segment_table("apply_update", a.segs);
  const double n = static_cast<double>(total_elems(a.segs));
  add("apply_update", "optimizer", 2 * n, 8 * n, 4 * n);
}

// CudaOps::optimizer_step: its table is uploaded once (left out), no host copy or wait; the two
// scalar kernels (one thread deriving the step's scalars; one per segment's update scale) besides
// the passes of segment_sumsq, adam_direction and apply_update.
void CostModelOps::optimizer_step_impl(const OptimizerStepArgs& a) {
  if (inner_) inner_->optimizer_step(a);
  if (a.segs.empty()) return;
  const double n = static_cast<double>(total_elems(a.segs)), S = static_cast<double>(a.segs.size());
  sumsq_kernels("optimizer_step", a.segs);
  add("optimizer_step", "optimizer", 2 * S, 8 * S + sizeof(OptimizerStepState), sizeof(OptimizerStepState));
  direction_kernels("optimizer_step", a.segs, a.trust != TrustRatio::none);
  add("optimizer_step", "optimizer", 6 * S, 20 * S + sizeof(OptimizerStepState), 4 * S);
  add("optimizer_step", "optimizer", 2 * n, 8 * n + 4 * S, 4 * n);
}

void CostModelOps::scale_impl(float* x, float a, int64_t n) {
  if (inner_) inner_->scale(x, a, n);
  if (n > 0) elementwise("scale", "optimizer", n, 1, 1, 1, DType::f32);
}

// ---- the fused attention (backend/cuda/cudnn_attention.cpp on Hopper) ----------------------------
// FLOPs as FlashAttention counts them: Q K^T and P V, 4 L^2 d per head forward; the backward
// recomputes P and forms dV, dP, dQ and dK: 2.5x the forward. Bytes: cuDNN reads Q, K, V once
// (and dO, the statistics), keeps P on chip and writes O and the statistics (the backward: dQ, dK,
// dV, with dQ accumulated in fp32); its dropout mask is generated in the kernel. A padded batch's
// sequences count at full length (cuDNN skips the padding its seq_len table marks, which the model
// does not see).

namespace {
constexpr double kLowpBytes = 2.0;  // the fused attention's 16-bit inputs and outputs

double fused_attention_flops(const AttentionLayout& layout, int heads, int head_dim) {
  return 4.0 * head_dim * static_cast<double>(layout.probs_elems(heads));  // heads · Σ L² scores
}

// Σ L² / Σ L: the sequence length the FLOPs are spent at (KernelCost::attention_length).
double attention_length(const AttentionLayout& layout, int heads) {
  return static_cast<double>(layout.probs_elems(heads)) / heads / static_cast<double>(layout.total_tokens());
}

}  // namespace

// CudnnAttention::upload_table: the dropout seed folded on the device (reading the step, writing
// seed and offset); a variable-length batch's four int32 tables of B + 1 entries from the host.
void CostModelOps::fused_attention_table(const char* op, const AttentionLayout& layout, bool dropout) {
  if (dropout) add(op, "fused attention", 0, 8, 16);
  if (layout.uniform_length() == 0) add(op, "host copy", 0, 0, 0).host_bytes = 16.0 * (layout.num_seqs() + 1);
}

void CostModelOps::fused_attention_fwd(const void* saved, const AttentionLayout& layout, int heads, int head_dim,
                                       bool dropout) {
  const double T = static_cast<double>(layout.total_tokens()), B = layout.num_seqs();
  const double H = static_cast<double>(heads) * head_dim;
  if (T == 0) return;
  const char* op = "attention_fwd";
  fused_attention_table(op, layout, dropout);
  // The kept sequence lengths (a scratch buffer per probs buffer, grown as CudnnAttention's is;
  // O is written into the 16-bit ctx, which the backward reads it from).
  const size_t kept = static_cast<size_t>(B) * sizeof(int32_t);
  auto& [ptr, bytes] = fused_saved_[saved];
  if (bytes < kept) {
    if (ptr != nullptr) release(ptr);
    ptr = alloc(kept);
    bytes = kept;
  }
  // seq_len from the key mask (and a variable-length batch's sequence starts)
  add(op, "fused attention", 0, (layout.uniform_length() > 0 ? 0 : 4 * (B + 1)) + 4 * T, 4 * B);
  add(op, "memset", 0, 0, T * H * kLowpBytes);                   // O's padding rows read as zero
  KernelCost& k = add(op, "fused attention", fused_attention_flops(layout, heads, head_dim),
                      3 * T * H * kLowpBytes, T * H * kLowpBytes + 4.0 * T * heads);
  k.unit = MathUnit::fused_attention_fwd;
  k.attention_length = attention_length(layout, heads);
}

void CostModelOps::fused_attention_bwd(const AttentionLayout& layout, int heads, int head_dim, bool dropout) {
  const double T = static_cast<double>(layout.total_tokens()), H = static_cast<double>(heads) * head_dim;
  if (T == 0) return;
  const char* op = "attention_bwd";
  fused_attention_table(op, layout, dropout);
  add(op, "memset", 0, 0, 3 * T * H * kLowpBytes);  // dqkv
  // cuDNN's backward: rowsum(dO * O), the main kernel (dQ accumulated in fp32), dQ's conversion.
  add(op, "fused attention", 2 * T * H, 2 * T * H * kLowpBytes, 4.0 * T * heads);
  KernelCost& k = add(op, "fused attention", 2.5 * fused_attention_flops(layout, heads, head_dim),
                      4 * T * H * kLowpBytes + 8.0 * T * heads, 2 * T * H * kLowpBytes + 4.0 * T * H);
  k.unit = MathUnit::fused_attention_bwd;
  k.attention_length = attention_length(layout, heads);
  add(op, "fused attention", 0, 4.0 * T * H, T * H * kLowpBytes);
}

// ---- prediction ----------------------------------------------------------------------------------

namespace {

// The fused attention's rate for a kernel of k's attention length (DeviceModel::fused_attention_by_length).
double fused_attention_rate(const KernelCost& k, const DeviceModel& d) {
  const bool fwd = k.unit == MathUnit::fused_attention_fwd;
  const auto& at = d.fused_attention_by_length;
  if (at.empty()) return fwd ? d.fused_attention_fwd_flops : d.fused_attention_bwd_flops;
  auto rate = [fwd](const DeviceModel::AttentionRates& r) { return fwd ? r.fwd_flops : r.bwd_flops; };
  if (k.attention_length <= at.front().length) return rate(at.front());
  for (size_t i = 1; i < at.size(); ++i) {
    if (k.attention_length > at[i].length) continue;
    const double f = std::log(k.attention_length / at[i - 1].length) / std::log(at[i].length / at[i - 1].length);
    return rate(at[i - 1]) * std::pow(rate(at[i]) / rate(at[i - 1]), f);
  }
  return rate(at.back());
}

}  // namespace

double kernel_seconds(const KernelCost& k, const DeviceModel& d) {
  double peak = d.fp32_flops;
  switch (k.unit) {
    case MathUnit::tensor16: peak = d.tensor16_flops; break;
    case MathUnit::tf32: peak = d.tf32_flops; break;
    case MathUnit::fp32: break;
    case MathUnit::fused_attention_fwd:
    case MathUnit::fused_attention_bwd: peak = fused_attention_rate(k, d); break;
  }
  BERT_CHECK(peak > 0, Code::invalid_argument, "no ", k.kind, " rate is known for device '", d.name,
             "' (", k.op, ")");
  double t = std::max(k.flops / peak, (k.read_bytes + k.write_bytes) / d.bandwidth);
  if (const auto e = d.kind_efficiency.find(k.kind); e != d.kind_efficiency.end()) t /= e->second;
  t += k.host_bytes / d.host_link;
  if (k.link_bytes > 0) {
    BERT_CHECK(d.gpu_link > 0, Code::invalid_argument, "no link bandwidth between GPUs is known for device '", d.name,
               "' (", k.op, ")");
    t = std::max(t, k.link_bytes / d.gpu_link);
  }
  if (!k.graphed) t += k.launches * d.launch_seconds;
  if (k.host_wait) t += d.host_wait_seconds;
  return t;
}

StepPrediction predict_step(const std::vector<KernelCost>& kernels, const DeviceModel& device) {
  StepPrediction p;
  std::map<std::string, CostRow> ops, kinds;
  double backend = 0, communicator = 0, kernels_alone = 0;  // each stream's clock; the kernels' own time
  for (const KernelCost& k : kernels) {
    if (k.join) {
      backend = std::max(backend, communicator);
      continue;
    }
    const double t = kernel_seconds(k, device);
    if (k.collective) {
      communicator = std::max(communicator, backend) + t;
      p.collective_seconds += t;
    } else {
      backend += t;
      kernels_alone += t;
    }
    for (auto [rows, name] : {std::pair{&ops, &k.op}, std::pair{&kinds, &k.kind}}) {
      CostRow& row = (*rows)[*name];
      row.name = *name;
      row.launches += k.launches;
      row.flops += k.flops;
      row.bytes += k.read_bytes + k.write_bytes;
      row.seconds += t;
    }
    p.launches += k.launches;
    if (k.kind.rfind("gemm", 0) == 0) p.gemm_flops += k.flops;
  }
  auto sorted = [](const std::map<std::string, CostRow>& rows) {
    std::vector<CostRow> v;
    for (const auto& [name, row] : rows) v.push_back(row);
    std::stable_sort(v.begin(), v.end(), [](const CostRow& a, const CostRow& b) { return a.seconds > b.seconds; });
    return v;
  };
  p.seconds = std::max(backend, communicator);
  p.exposed_collective_seconds = p.seconds - kernels_alone;
  p.by_op = sorted(ops);
  p.by_kind = sorted(kinds);
  return p;
}

}  // namespace bert
