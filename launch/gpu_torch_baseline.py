#!/usr/bin/env python3
"""PyTorch baseline for `launch/gpu_selftest.sh`: the same model, batch size and optimizer
as the mirrored run, on the same GPU, timed the same way (step 0 left out).

Data: uint8 images in host memory (Fashion-MNIST shape, random contents), assembled into a
float batch per step and copied to the GPU from pinned memory, as mirrored's loader does.
Prints one line: `torch <model> <samples/s> samples/s <ms/step> ms/step`.
"""
import argparse
import time

import torch
import torch.nn as nn


def make_model(name):
    if name == "cnn":
        # conv5x5x32, pool, conv5x5x64, pool, fc128, fc10 (the design card's CNN)
        return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 math, as mirrored uses
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    torch.manual_seed(7)
    model = make_model(args.model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randint(0, 256, (60000, 1, 28, 28), dtype=torch.uint8)
    labels = torch.randint(0, 10, (60000,), dtype=torch.int64)
    staging = torch.empty((args.batch, 1, 28, 28), dtype=torch.float32).pin_memory()
    start = None
    for step in range(args.steps + 1):
        if step == 1:
            torch.cuda.synchronize()
            start = time.perf_counter()
        idx = torch.randint(0, 60000, (args.batch,))
        torch.div(images[idx].float(), 255.0, out=staging)
        x = staging.to(device, non_blocking=True)
        y = labels[idx].to(device, non_blocking=True)
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # mirrored reads its loss every step too
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(f"torch {args.model} {args.steps * args.batch / seconds:.0f} samples/s {1e3 * seconds / args.steps:.3f} ms/step")


if __name__ == "__main__":
    main()
