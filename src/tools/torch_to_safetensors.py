#!/usr/bin/env python3
"""Converts a PyTorch checkpoint (Hugging Face pytorch_model.bin, or an NVIDIA DLE checkpoint
whose state dict is under "model") to model.safetensors with the same tensor names, so that
`bert-ckpt import` can map the names and load it. Needs PyTorch; everything else is native.

usage: torch_to_safetensors.py INPUT.bin|INPUT.pt OUTPUT.safetensors
"""
import json
import struct
import sys

import torch


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    state = torch.load(sys.argv[1], map_location="cpu")
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]  # DLE checkpoints: {"model": state_dict, "optimizer": ..., ...}
    tensors = {k: v.detach().float().contiguous() for k, v in state.items()
               if torch.is_tensor(v) and v.is_floating_point()}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = tensors[name].numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(sys.argv[2], "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)
    print(f"wrote {len(tensors)} tensors to {sys.argv[2]}")


if __name__ == "__main__":
    main()
