#!/usr/bin/env python3
"""Step-time model of BERT-large phase-1 pretraining (seq 128, 20 masked positions) on W GPUs:
compute per GPU, gradient bytes, ring all-reduce time at a stated bus bandwidth, overlap, and
the scaling efficiency that results. Every input is an assumption printed with the table; the
numbers in SCALING.md are this script's output (python3 scaling_model.py)."""

H, L, FF, V, S, P = 1024, 24, 4096, 30528, 128, 20           # BERT-large, phase 1
# BertForPreTraining parameters: embeddings (+LN), L encoder layers, pooler, MLM transform +
# decoder bias (decoder weight tied to the word embedding), NSP head.
PARAMS = ((V * H + 512 * H + 2 * H + 2 * H) + L * (4 * H * H + 4 * H + 2 * H * FF + H + FF + 4 * H)
          + (H * H + H) + (H * H + H + 2 * H + V) + (2 * H + 2))
# Training FLOPs per sequence: 3 x forward (forward + 2 x backward) of the dense layers, the
# attention scores/context, and the MLM head at the masked positions only.
layer_dense = 2 * S * (4 * H * H + 2 * H * FF)
layer_attn = 2 * 2 * S * S * H
mlm_head = 2 * P * (H * H + H * V)
FLOP_PER_SEQ = 3 * (L * (layer_dense + layer_attn) + mlm_head)

SEQ_PER_S = 1500          # assumed H100 bf16 throughput per GPU (about 36% of 989 TFLOP/s dense peak)
LATENCY_S = 20 * 3e-6     # per all-reduce: NCCL tree/hierarchical, ~2*log2(1024) hops x 3 us
W = 1024
GLOBAL = 65536            # DLE phase-1 global batch (LAMB)
NETWORKS = [("8x400 Gb/s InfiniBand NDR per node", 350e9),
            ("8x100 Gb/s Ethernet per node", 85e9),
            ("1x200 Gb/s per node", 22e9)]


def allreduce_s(nbytes, busbw, world=W):
    return 2 * (world - 1) / world * nbytes / busbw + LATENCY_S


def main():
    print(f"FLOP per sequence (training): {FLOP_PER_SEQ / 1e9:.1f} GFLOP; at {SEQ_PER_S} seq/s per GPU: "
          f"{FLOP_PER_SEQ * SEQ_PER_S / 1e12:.0f} TFLOP/s per GPU")
    local = GLOBAL // W
    t_compute = local / SEQ_PER_S
    t_backward = t_compute * 2 / 3
    last_bucket = (V * H + 512 * H + 2 * H) / PARAMS  # tied word embedding + position/type: reduced last
    print(f"W = {W} GPUs, global batch {GLOBAL} -> {local} sequences per GPU per step; "
          f"compute {t_compute * 1e3:.1f} ms (backward {t_backward * 1e3:.1f} ms)")
    print(f"gradient: {PARAMS / 1e6:.0f} M values = {PARAMS * 4 / 1e9:.2f} GB fp32, {PARAMS * 2 / 1e9:.2f} GB bf16")
    print()
    print(f"{'network (bus bandwidth)':44} {'grad':5} {'all-reduce':>10} {'eff one-shot':>12} {'eff overlapped':>14} "
          f"{'seq/GPU for 90% one-shot':>25}")
    for name, busbw in NETWORKS:
        for dtype, width in (("fp32", 4), ("bf16", 2)):
            t_ar = allreduce_s(PARAMS * width, busbw)
            eff_one_shot = t_compute / (t_compute + t_ar)
            # Bucketed and overlapped with backward: only what does not fit under the backward
            # pass, plus the last bucket (the embeddings), is exposed.
            exposed = max(0.0, t_ar * (1 - last_bucket) - t_backward) + t_ar * last_bucket
            eff_overlap = t_compute / (t_compute + exposed)
            need = 9 * t_ar * SEQ_PER_S  # compute >= 9 x all-reduce
            print(f"{name + f' ({busbw / 1e9:.0f} GB/s)':44} {dtype:5} {t_ar * 1e3:8.1f}ms {eff_one_shot:11.1%} "
                  f"{eff_overlap:13.1%} {need:18.0f} (x{W} = {need * W:,.0f})")


if __name__ == "__main__":
    main()
