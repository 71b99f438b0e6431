"""An independent PyTorch BertForPreTraining, the oracle for the engine's CPU numerics.

Written from the Hugging Face definition (modeling_bert.py) with the loss of NVIDIA
DeepLearningExamples (run_pretraining.py): module and parameter names are exactly Hugging
Face's, post-LN, additive attention mask (1 - mask) * -10000, MLM decoder tied to the word
embeddings plus its own bias. It shares no code with the engine; only numpy and torch.
"""
import math

import numpy as np
import torch
from torch import nn

CONFIG_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
}


class BertConfig:
    """The bert_config.json fields; unknown keys are an error so typos cannot hide."""

    def __init__(self, **fields):
        unknown = set(fields) - set(CONFIG_DEFAULTS)
        if unknown:
            raise KeyError(f"unknown BertConfig fields: {sorted(unknown)}")
        for key, default in CONFIG_DEFAULTS.items():
            setattr(self, key, fields.get(key, default))
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")


def gelu_erf(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


ACTIVATIONS = {"gelu": gelu_erf, "gelu_new": gelu_tanh, "gelu_tanh": gelu_tanh}


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        # No padding_idx: DLE's embedding lets [PAD] rows learn like any other row.
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.shape[1]
        position_ids = torch.arange(seq_length, dtype=torch.long, device=input_ids.device)
        embeddings = (self.word_embeddings(input_ids)
                      + self.position_embeddings(position_ids)[None, :, :]
                      + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x):  # [B, S, H] -> [B, heads, S, D]
        B, S, _ = x.shape
        return x.view(B, S, self.num_attention_heads, self.attention_head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, extended_attention_mask):
        q = self.split_heads(self.query(hidden_states))
        k = self.split_heads(self.key(hidden_states))
        v = self.split_heads(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        scores = scores + extended_attention_mask  # [B, 1, 1, S] broadcast over heads and queries
        probs = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()  # [B, S, heads, D]
        return context.view(context.shape[0], context.shape[1], -1)


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, extended_attention_mask):
        return self.output(self.self(hidden_states, extended_attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACTIVATIONS[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, extended_attention_mask):
        attention_output = self.attention(hidden_states, extended_attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, extended_attention_mask):
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended_attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)

    def forward(self, input_ids, token_type_ids, attention_mask):
        dtype = self.embeddings.word_embeddings.weight.dtype
        extended = (1.0 - attention_mask[:, None, None, :].to(dtype)) * -10000.0  # [B, 1, 1, S]
        sequence_output = self.encoder(self.embeddings(input_ids, token_type_ids), extended)
        return sequence_output, self.pooler(sequence_output)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, config, word_embedding_weight):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embedding_weight  # tied: the same Parameter object
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states)) + self.bias


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config, word_embedding_weight):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embedding_weight)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


class BertForPreTraining(nn.Module):
    """forward(...) returns (total_loss, mlm_loss, nsp_loss, prediction_scores, nsp_scores)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings.weight)
        self.init_weights()

    def init_weights(self, generator=None):
        """normal(0, initializer_range) weights, zero biases, LayerNorm (1, 0), as in HF."""
        std = self.config.initializer_range
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "LayerNorm" in name:
                    p.fill_(1.0 if name.endswith(".weight") else 0.0)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std, generator=generator)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_labels,
                next_sentence_labels):
        sequence_output, pooled_output = self.bert(input_ids, token_type_ids, attention_mask)
        prediction_scores, nsp_scores = self.cls(sequence_output, pooled_output)
        mlm_loss = nn.functional.cross_entropy(
            prediction_scores.reshape(-1, self.config.vocab_size), masked_lm_labels.reshape(-1),
            ignore_index=-1)
        nsp_loss = nn.functional.cross_entropy(nsp_scores.reshape(-1, 2), next_sentence_labels.reshape(-1))
        return mlm_loss + nsp_loss, mlm_loss, nsp_loss, prediction_scores, nsp_scores


def masked_lm_labels(masked_lm_positions, masked_lm_ids, seq_length):
    """DLE's label construction: -1 everywhere, ids at the masked positions; the first 0 in a
    sample's masked_lm_positions ends its real masks. Arrays [B, P] -> labels [B, S]."""
    positions = np.asarray(masked_lm_positions)
    ids = np.asarray(masked_lm_ids)
    labels = np.full((positions.shape[0], seq_length), -1, dtype=np.int64)
    for b in range(positions.shape[0]):
        zeros = np.nonzero(positions[b] == 0)[0]
        end = zeros[0] if len(zeros) else positions.shape[1]
        labels[b, positions[b, :end]] = ids[b, :end]
    return labels


def batch_tensors(batch):
    """torch inputs for BertForPreTraining.forward from a dict of DLE batch arrays."""
    S = batch["input_ids"].shape[1]
    return dict(
        input_ids=torch.as_tensor(batch["input_ids"], dtype=torch.long),
        token_type_ids=torch.as_tensor(batch["segment_ids"], dtype=torch.long),
        attention_mask=torch.as_tensor(batch["input_mask"], dtype=torch.long),
        masked_lm_labels=torch.as_tensor(
            masked_lm_labels(batch["masked_lm_positions"], batch["masked_lm_ids"], S)),
        next_sentence_labels=torch.as_tensor(batch["next_sentence_labels"], dtype=torch.long),
    )


def slice_batch(batch, start, stop):
    return {k: v[start:stop] for k, v in batch.items()}


def random_batch(rng, batch_size, seq_length, max_predictions, vocab_size, equal_masks=None,
                 trailing_garbage=False):
    """A DLE-layout batch (dict of int32 arrays) with varying real lengths and padding.
    Real token ids avoid 0 ([PAD]); masked positions are distinct, inside the real tokens and
    never 0 ([CLS]). equal_masks=k gives every sample exactly k masks; trailing_garbage puts
    non-zero values after the first 0 of sample 0's masked_lm_positions (they must be ignored)."""
    B, S, P = batch_size, seq_length, max_predictions
    input_ids = np.zeros((B, S), np.int32)
    segment_ids = np.zeros((B, S), np.int32)
    input_mask = np.zeros((B, S), np.int32)
    positions = np.zeros((B, P), np.int32)
    ids = np.zeros((B, P), np.int32)
    for b in range(B):
        length = S if b == 0 else int(rng.integers(max(P + 2, S // 2), S + 1))
        input_ids[b, :length] = rng.integers(1, vocab_size, length)
        split = int(rng.integers(1, length))
        segment_ids[b, split:length] = 1
        input_mask[b, :length] = 1
        count = equal_masks if equal_masks else int(rng.integers(1, P + 1))
        positions[b, :count] = np.sort(rng.choice(np.arange(1, length), count, replace=False))
        ids[b, :count] = rng.integers(0, vocab_size, count)
    if trailing_garbage and P >= 3:
        positions[0, 1:] = 0
        positions[0, 2] = 3
        ids[0, 1:] = rng.integers(1, vocab_size, P - 1)
    labels = rng.integers(0, 2, B).astype(np.int32)
    return {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask,
            "masked_lm_positions": positions, "masked_lm_ids": ids,
            "next_sentence_labels": labels}
