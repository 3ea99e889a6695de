#!/usr/bin/python3
"""PyTorch baseline for the GPT step benchmark (TransformerBench.DISABLED_NanoGptCpuStep in
tests/unit/test_transformer_bench.cpp): nanoGPT's model at its CPU recipe (4 layers,
4 heads, width 128, context 64, batch 12, vocabulary 65, no dropout, biases on), one
thread, timing forward + loss + zero_grad + backward.

Run with Debian's python3-torch:
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tests/bench/gpt_step_pytorch.py

load_gpt2_safetensors(path) builds this Gpt from a `mirrored export` file (GPT-2's names and
Conv1D [in, out] layouts, transformers' GPT2LMHeadModel state dict), reading the safetensors
format with the standard library and torch alone (Debian 12 packages no safetensors module).
"""
import argparse
import json
import math
import os
import struct
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0 (Debian 12): nanoGPT's explicit path
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, width, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied head


def read_safetensors(path):
    """{name: float32 tensor} and the metadata of a safetensors file (F32 tensors)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {entry['dtype']}, expected F32")
        begin, end = entry["data_offsets"]
        values = torch.frombuffer(bytearray(data[start + begin:start + end]), dtype=torch.float32)
        tensors[name] = values.reshape(entry["shape"])
    return tensors, metadata


def load_gpt2_safetensors(path):
    """This file's Gpt with the parameters of a GPT-2 layout safetensors file."""
    tensors, meta = read_safetensors(path)
    layers, heads = int(meta["n_layer"]), int(meta["n_head"])
    model = Gpt(int(meta["vocab_size"]), int(meta["n_positions"]), int(meta["n_embd"]), heads, layers)
    state = {"wte.weight": tensors["transformer.wte.weight"], "wpe.weight": tensors["transformer.wpe.weight"],
             "ln_f.weight": tensors["transformer.ln_f.weight"], "ln_f.bias": tensors["transformer.ln_f.bias"]}
    # GPT-2's Conv1D weights are [in, out]; nn.Linear's are [out, in].
    names = {"ln_1": ("ln1", False), "ln_2": ("ln2", False), "attn.c_attn": ("qkv", True),
             "attn.c_proj": ("proj", True), "mlp.c_fc": ("fc", True), "mlp.c_proj": ("fc_proj", True)}
    for i in range(layers):
        for theirs, (ours, conv1d) in names.items():
            weight = tensors[f"transformer.h.{i}.{theirs}.weight"]
            state[f"blocks.{i}.{ours}.weight"] = weight.t().contiguous() if conv1d else weight
            state[f"blocks.{i}.{ours}.bias"] = tensors[f"transformer.h.{i}.{theirs}.bias"]
    for i, block in enumerate(model.blocks):
        state[f"blocks.{i}.mask"] = block.mask
    model.load_state_dict(state, strict=True)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--vocab", type=int, default=65)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.context, a.width, a.heads, a.layers)
    idx = torch.randint(a.vocab, (a.batch, a.context))
    targets = torch.randint(a.vocab, (a.batch, a.context))
    times = []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, a.vocab), targets.view(-1))
        model.zero_grad(set_to_none=False)
        loss.backward()
        if i >= a.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    median = times[len(times) // 2]
    mean = sum(times) / len(times)
    tokens = a.batch * a.context
    print(f"pytorch {torch.__version__} gpt step (fwd+bwd) L={a.layers} H={a.heads} C={a.width} "
          f"T={a.context} B={a.batch} threads={torch.get_num_threads()}: mean {mean:.2f} ms, "
          f"median {median:.2f} ms, {tokens / (median / 1e3):.0f} tokens/s (median)")


if __name__ == "__main__":
    main()
