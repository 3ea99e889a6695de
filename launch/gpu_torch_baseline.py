#!/usr/bin/env python3
"""PyTorch baseline for `launch/gpu_selftest.sh`: the same model, batch size and optimizer
as the mirrored run, on the same GPU, timed the same way (step 0 left out).

Image models (mlp, cnn): built from the same config file mirrored trains with (--config,
default launch/configs/fmnist_<model>.ini), read key by key as mirrored reads it: model,
batch_size, optimizer, lr, momentum, weight_decay, adam.*, model.hidden, cnn.channels,
cnn.kernel_size, cnn.padding, cnn.fc, cnn.batchnorm, model.dropout (missing keys take
mirrored's defaults; keys that do not shape the step, such as epochs or lr_schedule, are
ignored), so the ratio compares the same model. uint8 images in host memory
(Fashion-MNIST shape, random contents), assembled into a float batch per step and copied to
the GPU from pinned memory, as mirrored's loader does. Prints
`torch <model> <samples/s> samples/s <ms/step> ms/step`, and the model on stderr.

gpt: the Gpt of tests/bench/gpt_step_pytorch.py (pre-LayerNorm blocks, tanh-GELU, head
tied to the token table) at the shape given, AdamW as in launch/configs/shakespeare_gpt.ini,
windows of context + 1 tokens drawn from a random byte corpus in host memory. Prints
`torch gpt <tokens/s> tokens/s <ms/step> ms/step`.

Float32 math on both sides: TF32 is off. --device cpu runs the same on the CPU (slowly),
for checking the script where no GPU is.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# mirrored's defaults (include/mirrored/config/config.h) for the keys read below.
IMAGE_DEFAULTS = {
    "model": "mlp", "batch_size": "128", "optimizer": "sgd", "lr": "0.05", "momentum": "0.9",
    "weight_decay": "0", "adam.beta1": "0.9", "adam.beta2": "0.999", "adam.eps": "1e-8",
    "model.hidden": "256,128", "cnn.channels": "32,64", "cnn.kernel_size": "5", "cnn.padding": "0",
    "cnn.fc": "128", "cnn.batchnorm": "false", "model.dropout": "0",
}


def read_config(path):
    """The keys of a mirrored config file as mirrored names them ("cnn.padding" for padding
    in [cnn]), over mirrored's defaults."""
    values = dict(IMAGE_DEFAULTS)
    section = ""
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].split(";", 1)[0].strip()
            if not line:
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip()
                continue
            if "=" not in line:
                sys.exit(f"{path}:{number}: expected 'key = value', got '{line}'")
            key, value = (part.strip() for part in line.split("=", 1))
            values[f"{section}.{key}" if section else key] = value
    return values


def ints(values, key):
    return [int(v) for v in values[key].split(",") if v.strip()]


def flag(values, key):
    text = values[key].lower()
    if text not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        sys.exit(f"config: {key} = {values[key]}: expected true or false")
    return text in ("true", "1", "yes", "on")


def make_image_model(values):
    """The model mirrored builds from these keys (nn/builders.h): for cnn, per channel count
    Conv2d(kernel, padding; no bias before batch norm) [-> BatchNorm2d] -> ReLU ->
    MaxPool2d(2), then Linear + ReLU [+ Dropout] per fc width, then Linear to 10 classes."""
    dropout = float(values["model.dropout"])
    layers, size, channels = [], 28, 1
    if values["model"] == "cnn":
        k, pad, bn = int(values["cnn.kernel_size"]), int(values["cnn.padding"]), flag(values, "cnn.batchnorm")
        for out in ints(values, "cnn.channels"):
            layers += [nn.Conv2d(channels, out, k, padding=pad, bias=not bn)]
            layers += [nn.BatchNorm2d(out)] if bn else []
            layers += [nn.ReLU(), nn.MaxPool2d(2)]
            channels, size = out, (size + 2 * pad - k + 1) // 2
        hidden = ints(values, "cnn.fc")
    elif values["model"] == "mlp":
        hidden = ints(values, "model.hidden")
    else:
        sys.exit(f"config: model = {values['model']}: this baseline builds mlp and cnn (gpt: --model gpt)")
    layers.append(nn.Flatten())
    width = channels * size * size
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout > 0 else [])
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def make_image_optimizer(values, model):
    """mirrored's update rule: weight decay on weights (>= 2-D tensors) only, decoupled for adamw."""
    decay = float(values["weight_decay"])
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": decay},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    lr, kind = float(values["lr"]), values["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=float(values["momentum"]))
    betas = (float(values["adam.beta1"]), float(values["adam.beta2"]))
    if kind in ("adam", "adamw"):
        make = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        return make(groups, lr=lr, betas=betas, eps=float(values["adam.eps"]))
    sys.exit(f"config: optimizer = {kind}: expected sgd, adam or adamw")


def make_gpt(args, device):
    # One definition of the PyTorch GPT for every comparison in this repository.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bench"))
    threads = (os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"))
    from gpt_step_pytorch import Gpt  # sets the thread variables for its own CPU benchmark
    for name, value in zip(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"), threads):
        if value is None:
            os.environ.pop(name, None)

    class DeviceGpt(Gpt):
        # The benchmark's forward builds its positions on the CPU; here they follow the input.
        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()

    return DeviceGpt(args.vocab, args.context, args.width, args.heads, args.layers).to(device)


def image_steps(args, device):
    values = read_config(args.config)
    if values["model"] != args.model:
        sys.exit(f"{args.config}: model = {values['model']}, but --model {args.model}")
    if args.batch is None:
        args.batch = int(values["batch_size"])
    model = make_image_model(values).to(device)
    opt = make_image_optimizer(values, model)
    print(f"torch {args.model} from {args.config}: {model}; {type(opt).__name__}", file=sys.stderr)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randint(0, 256, (60000, 1, 28, 28), dtype=torch.uint8)
    labels = torch.randint(0, 10, (60000,), dtype=torch.int64)
    staging = torch.empty((args.batch, 1, 28, 28), dtype=torch.float32)
    if device.type == "cuda":
        staging = staging.pin_memory()

    def step():
        idx = torch.randint(0, 60000, (args.batch,))
        torch.div(images[idx].float(), 255.0, out=staging)
        x = staging.to(device, non_blocking=True)
        y = labels[idx].to(device, non_blocking=True)
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # mirrored reads its loss every step too

    return step, args.batch


def gpt_steps(args, device):
    model = make_gpt(args, device)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # weight decay on matrices only
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    corpus = torch.randint(0, args.vocab, (1 << 22,), dtype=torch.uint8)
    window = args.context + 1
    offsets = torch.arange(window)
    staging = torch.empty((args.batch, window), dtype=torch.int64)
    if device.type == "cuda":
        staging = staging.pin_memory()

    def step():
        starts = torch.randint(0, corpus.numel() - window, (args.batch, 1))
        staging.copy_(corpus[starts + offsets])
        tokens = staging.to(device, non_blocking=True)
        x, y = tokens[:, :-1], tokens[:, 1:]
        opt.zero_grad(set_to_none=False)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        loss.item()

    return step, args.batch * args.context


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "gpt"])
    parser.add_argument("--config", default=None,
                        help="mlp, cnn: the mirrored config file (default launch/configs/fmnist_<model>.ini)")
    parser.add_argument("--batch", type=int, default=None,
                        help="samples (gpt: windows) per step; default the config's batch_size, gpt 8")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    gpt = parser.add_argument_group("gpt")
    gpt.add_argument("--layers", type=int, default=12)
    gpt.add_argument("--heads", type=int, default=12)
    gpt.add_argument("--width", type=int, default=768)
    gpt.add_argument("--context", type=int, default=1024)
    gpt.add_argument("--vocab", type=int, default=256, help="byte tokens, as mirrored's token files")
    args = parser.parse_args()
    if args.model == "gpt" and args.batch is None:
        args.batch = 8
    if args.model != "gpt" and args.config is None:
        args.config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", f"fmnist_{args.model}.ini")
    if (args.batch is not None and args.batch < 1) or args.steps < 1:
        parser.error("--batch and --steps must be at least 1")
    if args.model == "gpt" and args.width % args.heads != 0:
        parser.error(f"--width {args.width} is not divisible by --heads {args.heads}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device (use --device cpu)")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 math, as mirrored uses
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    torch.manual_seed(7)
    step, units = gpt_steps(args, device) if args.model == "gpt" else image_steps(args, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    start = None
    for i in range(args.steps + 1):
        if i == 1:
            sync()
            start = time.perf_counter()
        step()
    sync()
    seconds = time.perf_counter() - start
    unit = "tokens/s" if args.model == "gpt" else "samples/s"
    print(f"torch {args.model} {args.steps * units / seconds:.0f} {unit} {1e3 * seconds / args.steps:.3f} ms/step")


if __name__ == "__main__":
    main()
