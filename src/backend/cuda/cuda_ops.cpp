// CudaOps construction, the factories, memory transfers and the ops that are a single kernel
// family each (embeddings, rows, layernorm, dropout, loss, optimizer). Dense layers live in
// cuda_linear.cpp and attention in cuda_attention.cpp. Arguments arrive checked (Ops in ops.cpp).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/optimizer.h"
#include "kernels/rows.h"
#include "kernels/softmax_xent.h"

namespace bert {

bool cuda_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::unique_ptr<Ops> make_cuda_ops(int device, const CudaOptions& options) {
  return std::make_unique<CudaOps>(device, options);
}

std::unique_ptr<Ops> make_cuda_ops(int device) { return make_cuda_ops(device, CudaOptions{}); }

CudaOps::CudaOps(int device, const CudaOptions& options) : device_(device) {
  const Precision precision = options.precision;
  if (options.activations_16bit) {
    BERT_CHECK(precision == Precision::bf16 || precision == Precision::fp16, Code::invalid_argument,
               "16-bit activations need precision \"bf16\" or \"fp16\", not \"", precision_name(precision), "\"");
    activation_type_ = precision == Precision::bf16 ? DType::bf16 : DType::f16;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(Code::backend, "no CUDA device available: cudaGetDeviceCount failed: ",
         cudaGetErrorString(err));
  }
  BERT_CHECK(device >= 0 && device < count, Code::invalid_argument, "CUDA device ", device,
             " does not exist (", count, " device(s) present)");
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  memory_ = std::make_unique<DeviceMemory>(stream_);
  gemm_ = std::make_unique<LtGemm>(precision, *memory_, stream_);
  for (auto* buffer : {&partials_, &sort_, &attn_a_, &attn_b_, &table_, &sums_, &seqs_table_, &step_table_})
    *buffer = std::make_unique<ScratchBuffer>(*memory_, stream_);
  label_status_ = static_cast<int32_t*>(memory_->alloc(4 * sizeof(int32_t)));
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_label_status_), 4 * sizeof(int32_t)));
  host_label_status_[0] = 0;
  gelu_probe_ = probe_gelu_epilogue();
  // The fused path's I/O is 16-bit: fp16 in fp16 mode, bf16 otherwise.
  if (options.fused_attention)
    fused_ = make_fused_attention(*memory_, stream_,
                                  precision == Precision::fp16 ? kernels::LowPrecision::fp16
                                                                   : kernels::LowPrecision::bf16,
                                  {.pad_varlen = options.fused_attention_pad_varlen,
                                   .deterministic_only = options.fused_attention_deterministic_only});
}

CudaOps::~CudaOps() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  fused_.reset();
  for (auto* buffer : {&partials_, &sort_, &attn_a_, &attn_b_, &table_, &sums_, &seqs_table_, &step_table_}) buffer->reset();
  if (host_label_status_ != nullptr) cudaFreeHost(host_label_status_);
  gemm_.reset();
  memory_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaOps::name() const {
  return "cuda:" + std::to_string(device_) + ":" + precision_name(precision()) +
         (fused_ != nullptr ? ":fused-attention" : "") +
         (activation_type_ != DType::f32 ? ":16-bit-activations" : "");
}

// ---- memory ---------------------------------------------------------------------------

Act CudaOps::scratch_act(ScratchBuffer& scratch, int64_t elems) {
  return Act(scratch.get(static_cast<size_t>(elems) * dtype_bytes(activation_type_)), activation_type_);
}

void* CudaOps::alloc_impl(size_t bytes) { return memory_->alloc(bytes); }

void CudaOps::release_impl(void* ptr) { memory_->release(ptr); }

void CudaOps::upload_impl(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // The host buffer may be reused as soon as we return; pinned sources would still be read.
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::download_impl(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  check_labels();
}

void CudaOps::copy_impl(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaOps::fill_zero_impl(void* dst, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaOps::synchronize_impl() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  check_labels();
}

void CudaOps::check_labels() {
  if (host_label_status_[0] == 0) return;
  const int32_t count = host_label_status_[0], row = host_label_status_[1],
                label = host_label_status_[2], vocab = host_label_status_[3];
  host_label_status_[0] = 0;
  CUDA_CHECK(cudaMemsetAsync(label_status_, 0, 4 * sizeof(int32_t), stream_));
  fail(Code::invalid_argument, "softmax_xent: label ", label, " of row ", row,
       " is not below the vocabulary size ", vocab, " (", count, " such label(s))");
}

size_t CudaOps::peak_bytes() const { return memory_->peak_bytes(); }

// ---- weights ----------------------------------------------------------------------------

void CudaOps::set_weights(const float* params, int64_t n) {
  if (WeightMirror* mirror = gemm_->weights()) mirror->assign(params, n);
}

void CudaOps::weights_changed() {
  if (WeightMirror* mirror = gemm_->weights()) mirror->invalidate();
}

// ---- embeddings and rows ----------------------------------------------------------------

void CudaOps::embedding_fwd_impl(const EmbeddingFwdArgs& a) {
  kernels::embedding_fwd(a.out, a.word_ids, a.pos_ids, a.type_ids, a.word_emb, a.pos_emb, a.type_emb, a.T, a.H,
                         stream_);
}

void CudaOps::embedding_bwd_impl(const EmbeddingBwdArgs& a) {
  scatter_add_rows_impl({a.dword, a.dout, a.word_ids, a.T, a.H});
  scatter_add_rows_impl({a.dpos, a.dout, a.pos_ids, a.T, a.H});
  scatter_add_rows_impl({a.dtype, a.dout, a.type_ids, a.T, a.H});
}

void CudaOps::gather_rows_impl(const GatherRowsArgs& a) {
  kernels::gather_rows(a.out, a.in, a.rows, a.n, a.H, stream_);
}

void CudaOps::scatter_add_rows_impl(const ScatterAddRowsArgs& a) {
  if (a.n == 0) return;
  const size_t bytes = kernels::scatter_add_scratch_bytes(a.n);
  kernels::scatter_add_rows(a.dst, a.src, a.rows, a.n, a.H, sort_->get(bytes), bytes, stream_);
}

// ---- normalisation, dropout ---------------------------------------------------------------

void CudaOps::layernorm_fwd_impl(const LayernormFwdArgs& a) {
  kernels::layernorm_fwd(a.out, a.mean, a.rstd, a.in, a.gamma, a.beta, a.M, a.N, a.eps, stream_);
}

void CudaOps::layernorm_bwd_impl(const LayernormBwdArgs& a) {
  if (a.M == 0) return;
  kernels::layernorm_bwd_input(a.din, a.dout, a.in, a.mean, a.rstd, a.gamma, a.M, a.N, stream_);
  const size_t partials = static_cast<size_t>(kernels::layernorm_param_chunks(a.M)) * 2 * a.N;
  kernels::layernorm_bwd_params(a.dgamma, a.dbeta, a.dout, a.in, a.mean, a.rstd, a.M, a.N,
                                partials_->get_as<double>(partials), stream_);
}

void CudaOps::dropout_residual_fwd_impl(const DropoutResidualFwdArgs& a) {
  kernels::dropout_residual_fwd(a.out, a.in, a.residual, a.n, a.site, dropout_keep_scale(a.site), 0, stream_);
}

void CudaOps::dropout_bwd_impl(const DropoutBwdArgs& a) {
  kernels::dropout_bwd(a.din, a.dout, a.n, a.site, dropout_keep_scale(a.site), stream_);
}

void CudaOps::residual_layernorm_fwd_impl(const ResidualLayernormFwdArgs& a) {
  kernels::residual_layernorm_fwd(a.out, a.res, a.mean, a.rstd, a.in, a.residual, a.gamma, a.beta, a.M, a.N, a.eps, a.site,
                                  dropout_keep_scale(a.site), stream_);
}

void CudaOps::residual_layernorm_bwd_impl(const ResidualLayernormBwdArgs& a) {
  if (a.M == 0) return;
  const size_t partials = static_cast<size_t>(kernels::residual_layernorm_chunks(a.M)) * 2 * a.N;
  kernels::residual_layernorm_bwd(a.d_in, a.d_residual, a.dgamma, a.dbeta, a.dout, a.res, a.mean, a.rstd, a.gamma, a.M, a.N, a.site,
                                  dropout_keep_scale(a.site), partials_->get_as<double>(partials), stream_);
}

// ---- loss -------------------------------------------------------------------------------

void CudaOps::softmax_xent_impl(const SoftmaxXentArgs& a) {
  if (a.M == 0) return;
  // Labels are checked on the device; the next wait for the stream reports a bad one.
  kernels::softmax_xent(a.dlogits, a.losses, a.correct, a.logits, a.labels, a.M, a.V, a.ld, a.grad_scale,
                        label_status_, stream_);
  CUDA_CHECK(cudaMemcpyAsync(host_label_status_, label_status_, 4 * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream_));
}

// ---- optimizer --------------------------------------------------------------------------

kernels::SegmentTable CudaOps::upload_segments(const std::vector<ParamSegment>& segs,
                                               const std::vector<float>& values) {
  const size_t S = segs.size();
  const int64_t chunks = kernels::fill_segment_words(segs, host_table_);
  const size_t table_bytes = host_table_.size() * sizeof(int64_t);
  const size_t value_bytes = std::max<size_t>(S, 1) * sizeof(float);
  char* device = static_cast<char*>(table_->get(table_bytes + value_bytes));
  // Pageable host sources: the copy is staged before cudaMemcpyAsync returns, so the host
  // vectors may change afterwards; the stream orders it after kernels using the old table.
  CUDA_CHECK(cudaMemcpyAsync(device, host_table_.data(), table_bytes, cudaMemcpyHostToDevice,
                             stream_));
  if (S > 0)
    CUDA_CHECK(cudaMemcpyAsync(device + table_bytes, values.data(), S * sizeof(float),
                               cudaMemcpyHostToDevice, stream_));
  return kernels::segment_table_at(reinterpret_cast<const int64_t*>(device),
                                   reinterpret_cast<const float*>(device + table_bytes),
                                   static_cast<int>(S), chunks);
}

void CudaOps::segment_sumsq_impl(const SegmentSumsqArgs& a) {
  if (a.segs.empty()) return;
  host_values_.assign(a.segs.size(), 0.0f);
  const kernels::SegmentTable table = upload_segments(a.segs, host_values_);
  double* partials =
      partials_->get_as<double>(static_cast<size_t>(std::max<int64_t>(table.chunks, 1)));
  double* sums = sums_->get_as<double>(a.segs.size());
  kernels::segment_sumsq(sums, a.x, table, partials, stream_);
  download(a.host_out, sums, a.segs.size() * sizeof(double));
}

void CudaOps::adam_direction_impl(const AdamDirectionArgs& a) {
  if (a.segs.empty()) return;
  host_values_.resize(a.segs.size());
  for (size_t s = 0; s < a.segs.size(); ++s) host_values_[s] = a.segs[s].weight_decay;
  const kernels::SegmentTable table = upload_segments(a.segs, host_values_);
  if (a.host_sumsq == nullptr) {
    kernels::adam_direction(a.update, a.m, a.v, a.grad, a.param, table, a.args, nullptr, stream_);
    return;
  }
  double* partials = partials_->get_as<double>(static_cast<size_t>(std::max<int64_t>(2 * table.chunks, 1)));
  double* sums = sums_->get_as<double>(2 * a.segs.size());
  kernels::adam_direction(a.update, a.m, a.v, a.grad, a.param, table, a.args, partials, stream_);
  kernels::segment_partials_finish(sums, partials, table, 2, stream_);
  download(a.host_sumsq, sums, 2 * a.segs.size() * sizeof(double));
}

void CudaOps::apply_update_impl(const ApplyUpdateArgs& a) {
  if (a.segs.empty()) return;
  const kernels::SegmentTable table = upload_segments(a.segs, a.host_scale);
  kernels::apply_update(a.param, a.update, table, stream_);
}

void CudaOps::optimizer_step_impl(const OptimizerStepArgs& a) {
  const size_t S = a.segs.size();
  if (S == 0) return;
  const int64_t chunks = kernels::fill_segment_words(a.segs, host_table_);
  const size_t word_bytes = host_table_.size() * sizeof(int64_t), value_bytes = S * sizeof(float);
  char* device = static_cast<char*>(step_table_->get(word_bytes + 2 * value_bytes));
  if (a.segs != step_segs_) {
    host_values_.resize(S);
    for (size_t s = 0; s < S; ++s) host_values_[s] = a.segs[s].weight_decay;
    CUDA_CHECK(cudaMemcpyAsync(device, host_table_.data(), word_bytes, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(device + word_bytes, host_values_.data(), value_bytes, cudaMemcpyHostToDevice, stream_));
    step_segs_ = a.segs;
  }
  const auto* words = reinterpret_cast<const int64_t*>(device);
  const auto* weight_decay = reinterpret_cast<const float*>(device + word_bytes);
  auto* scales = reinterpret_cast<float*>(device + word_bytes + value_bytes);
  const kernels::SegmentTable decay_table = kernels::segment_table_at(words, weight_decay, static_cast<int>(S), chunks);
  const kernels::SegmentTable scale_table = kernels::segment_table_at(words, scales, static_cast<int>(S), chunks);
  double* partials = partials_->get_as<double>(static_cast<size_t>(std::max<int64_t>(2 * chunks, 1)));
  double* sums = sums_->get_as<double>(2 * S);
  kernels::segment_sumsq(sums, a.grad, decay_table, partials, stream_);
  kernels::derive_step_scalars(a.state, sums, static_cast<int>(S), stream_);
  const bool trust_sums = a.trust != TrustRatio::none;
  kernels::adam_direction(a.update, a.m, a.v, a.grad, a.param, decay_table, AdamStepArgs{}, trust_sums ? partials : nullptr,
                          stream_, a.state);
  if (trust_sums) kernels::segment_partials_finish(sums, partials, decay_table, 2, stream_);
  kernels::update_scales(scales, sums, weight_decay, static_cast<int>(S), a.trust, a.state, stream_);
  kernels::apply_update(a.param, a.update, scale_table, stream_, a.state);
}

void CudaOps::scale_impl(float* x, float a, int64_t n) {
  kernels::scale(x, a, n, stream_);
}

}  // namespace bert
