// ParamTable construction: Hugging Face names and shapes, flat-buffer offsets, init and decay.
#include "model/param_table.h"

#include <map>

#include "core/error.h"

namespace bert {
namespace {

constexpr int64_t kAlign = 16;  // floats: every tensor starts on a 64-byte boundary

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

int64_t ParamEntry::elems() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ParamTable::ParamTable(const BertConfig& c, const TaskConfig& task) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  int64_t cursor = 0;
  auto reserve = [&](int64_t elems) {
    int64_t at = cursor;
    cursor = align_up(cursor + elems);
    return at;
  };
  auto add = [&](const std::string& name, std::vector<int64_t> shape, int64_t offset, ParamInit init,
                 int64_t stored) {
    BERT_CHECK(shape.size() <= kMaxParamDims, Code::internal, "parameter ", name, " has ", shape.size(),
               " dimensions; the C ABI carries at most ", kMaxParamDims);
    ParamEntry e;
    e.name = name;
    e.shape = std::move(shape);
    e.offset = offset;
    e.stored_elems = stored;
    e.init = init;
    e.weight_decay = init == ParamInit::normal;  // weights decay; biases and LayerNorm do not
    entries.push_back(e);
    return offset;
  };
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, ParamInit init) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return add(name, std::move(shape), reserve(n), init, n);
  };

  const int64_t Vp = c.padded_vocab_size();
  word_emb = add("bert.embeddings.word_embeddings.weight", {c.vocab_size, H}, reserve(Vp * H),
                 ParamInit::normal, Vp * H);
  pos_emb = tensor("bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, H}, ParamInit::normal);
  type_emb = tensor("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}, ParamInit::normal);
  emb_ln_g = tensor("bert.embeddings.LayerNorm.weight", {H}, ParamInit::ones);
  emb_ln_b = tensor("bert.embeddings.LayerNorm.bias", {H}, ParamInit::zeros);

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    LayerParams L;
    L.qkv_w = reserve(3 * H * H);
    L.qkv_b = reserve(3 * H);
    const char* qkv[3] = {"query", "key", "value"};
    for (int j = 0; j < 3; ++j) {
      add(p + "attention.self." + qkv[j] + ".weight", {H, H}, L.qkv_w + j * H * H, ParamInit::normal, H * H);
      add(p + "attention.self." + qkv[j] + ".bias", {H}, L.qkv_b + j * H, ParamInit::zeros, H);
    }
    L.attn_out_w = tensor(p + "attention.output.dense.weight", {H, H}, ParamInit::normal);
    L.attn_out_b = tensor(p + "attention.output.dense.bias", {H}, ParamInit::zeros);
    L.attn_ln_g = tensor(p + "attention.output.LayerNorm.weight", {H}, ParamInit::ones);
    L.attn_ln_b = tensor(p + "attention.output.LayerNorm.bias", {H}, ParamInit::zeros);
    L.inter_w = tensor(p + "intermediate.dense.weight", {I, H}, ParamInit::normal);
    L.inter_b = tensor(p + "intermediate.dense.bias", {I}, ParamInit::zeros);
    L.out_w = tensor(p + "output.dense.weight", {H, I}, ParamInit::normal);
    L.out_b = tensor(p + "output.dense.bias", {H}, ParamInit::zeros);
    L.out_ln_g = tensor(p + "output.LayerNorm.weight", {H}, ParamInit::ones);
    L.out_ln_b = tensor(p + "output.LayerNorm.bias", {H}, ParamInit::zeros);
    layers.push_back(L);
  }

  if (task.has_pooler()) {
    pooler_w = tensor("bert.pooler.dense.weight", {H, H}, ParamInit::normal);
    pooler_b = tensor("bert.pooler.dense.bias", {H}, ParamInit::zeros);
  }
  first_head_entry = entries.size();
  const int64_t L = task.num_labels;
  switch (task.type) {
    case TaskType::pretraining:
      mlm_bias = add("cls.predictions.bias", {c.vocab_size}, reserve(Vp), ParamInit::zeros, Vp);
      mlm_dense_w = tensor("cls.predictions.transform.dense.weight", {H, H}, ParamInit::normal);
      mlm_dense_b = tensor("cls.predictions.transform.dense.bias", {H}, ParamInit::zeros);
      mlm_ln_g = tensor("cls.predictions.transform.LayerNorm.weight", {H}, ParamInit::ones);
      mlm_ln_b = tensor("cls.predictions.transform.LayerNorm.bias", {H}, ParamInit::zeros);
      nsp_w = tensor("cls.seq_relationship.weight", {2, H}, ParamInit::normal);
      nsp_b = tensor("cls.seq_relationship.bias", {2}, ParamInit::zeros);
      break;
    case TaskType::sequence_classification:
    case TaskType::token_classification:
      head_w = tensor("classifier.weight", {L, H}, ParamInit::normal);
      head_b = tensor("classifier.bias", {L}, ParamInit::zeros);
      break;
    case TaskType::question_answering:
      head_w = tensor("qa_outputs.weight", {L, H}, ParamInit::normal);
      head_b = tensor("qa_outputs.bias", {L}, ParamInit::zeros);
      break;
  }
  total_elems = cursor;
}

int ParamTable::find(const std::string& name) const {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<ParamSegment> ParamTable::segments(float weight_decay) const {
  std::vector<ParamSegment> segs;
  for (const ParamEntry& e : entries) {
    segs.push_back({e.offset, e.stored_elems, e.weight_decay ? weight_decay : 0.0f});
  }
  return segs;
}

}  // namespace bert
