#!/usr/bin/env bash
# Slurm: BERT pretraining on N nodes × 8 GPUs, one task per GPU. The engine reads its rank,
# world size and local rank (which picks the GPU) from SLURM_PROCID / SLURM_NTASKS /
# SLURM_LOCALID, and bootstraps NCCL through NCCL_COMM_ID on the first node (no MPI needed).
# Submit (both DLE phases in one job; phase 2 starts from phase 1's final checkpoint):
#   sbatch --nodes=16 samples/dist/sbatch_bert.sh samples/configs/dle_bert_large_phase1.json samples/configs/dle_bert_large_phase2.json
#SBATCH --job-name=bert-pretrain
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=12
#SBATCH --time=24:00:00
#SBATCH --signal=TERM@120
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: sbatch --nodes=N sbatch_bert.sh CONFIG.json [PHASE2.json]" >&2; exit 2; }
# NCCL's own bootstrap: rank 0 listens on the first node at this port, the others connect.
first_node="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
export NCCL_COMM_ID="${first_node}:29511"
# Every task sees all 8 GPUs of its node and takes the one of its SLURM_LOCALID
# ("device": "cuda" in the config). SIGTERM 120 s before the end: bert-train checkpoints and
# exits; resubmitting with --resume continues from the newest checkpoint (in whichever phase).
srun --kill-on-bad-exit=1 bert-train "$@" --resume
