#!/usr/bin/python3
"""PyTorch CPU baseline for `mirrored bench train`: the same models, data, global batch,
world size and threads per rank, with DistributedDataParallel over gloo.

Run with Debian's python3-torch (apt-get install python3-torch), i.e. /usr/bin/python3:
  /usr/bin/python3 tests/bench/pytorch_baseline.py --model cnn --world 2 --steps 50
Prints `samples_per_sec=X ms_per_step=Y` (global samples over the timed steps, the
warm-up steps excluded), the line tests/bench/compare_pytorch.sh reads.
"""
import argparse
import gzip
import os
import socket
import time

# One thread per rank, set before torch (and its OpenBLAS) load: OpenBLAS ignores
# torch.set_num_threads and would otherwise start one thread per core in every rank.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def make_model(args):
    if args.model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if args.model == "cnn":
        # mirrored's cnn: conv 5x5 (no padding) -> [BN] -> ReLU -> maxpool 2, twice; fc 128; fc 10.
        layers, c_in, size = [], 1, 28
        for c in (32, 64):
            layers += [nn.Conv2d(c_in, c, 5, bias=not args.batchnorm)]
            if args.batchnorm:
                layers += [nn.BatchNorm2d(c)]
            layers += [nn.ReLU(), nn.MaxPool2d(2)]
            c_in, size = c, (size - 4) // 2
        layers += [nn.Flatten(), nn.Linear(c_in * size * size, 128), nn.ReLU(), nn.Linear(128, 10)]
        return nn.Sequential(*layers)
    raise SystemExit(f"unknown model {args.model}")


def worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    images = read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz"))
    x_all = torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y_all = torch.from_numpy(labels.astype(np.int64))

    torch.manual_seed(7)
    model = make_model(args)
    if args.world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    local = args.batch // args.world
    order = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(7))
    steps_per_epoch = len(y_all) // args.batch
    total = args.warmup + args.steps
    start = None
    for step in range(total):
        if step == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        s = step % steps_per_epoch
        idx = order[s * args.batch + rank * local:s * args.batch + (rank + 1) * local]
        x, y = x_all.index_select(0, idx), y_all.index_select(0, idx)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"pytorch {torch.__version__} model {args.model}{' +bn' if args.batchnorm else ''}, world {args.world}, "
              f"global batch {args.batch}, {args.threads} thread(s)/rank, {args.steps} timed steps")
        print(f"samples_per_sec={args.batch * args.steps / elapsed:.1f} ms_per_step={elapsed / args.steps * 1e3:.3f}")
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    parser.add_argument("--batchnorm", action="store_true")
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    if args.batch % args.world:
        raise SystemExit("--batch must divide evenly over --world")
    mp.spawn(worker, args=(args, free_port()), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
