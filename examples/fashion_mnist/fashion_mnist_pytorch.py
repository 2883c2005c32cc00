#!/usr/bin/python3
"""The fashion_mnist example's model in PyTorch, for a side-by-side comparison: the same CNN
(conv 1->32 3x3 pad 1, relu, maxpool 2; conv 32->64 3x3 pad 1, relu, maxpool 2; linear 3136->128,
relu, linear 128->10), the same data (the Debian package dataset-fashion-mnist's gzip files, pixels
scaled to [0, 1], no augmentation), Adam lr 1e-3, batch 128. Prints training images/s and the test
accuracy after each epoch.

    python3 fashion_mnist_pytorch.py [--epochs N] [--threads N] [--limit N] [--steps N] [--bf16]

--steps N trains N steps only (after two untimed ones) and prints the median step time and
images/s (what bench/fashion_mnist runs); without the dataset it then uses random images.
On Intel CPUs, set OPENBLAS_CORETYPE=SKYLAKEX in the environment for PyTorch's fastest path.
--bf16 runs the forward passes (training and test) under torch.autocast("cpu", torch.bfloat16):
bf16 mixed precision, as the fashion_mnist example's --precision bf16.
"""
import contextlib
import argparse
import gzip
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path, ndim, limit):
    if not os.path.exists(path):
        sys.exit(f"fashion_mnist_pytorch: {path} not found: install the Debian package dataset-fashion-mnist "
                 f"(sudo apt-get install dataset-fashion-mnist) or pass --data DIR")
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != 0x800 | ndim:
        sys.exit(f"fashion_mnist_pytorch: {path}: not an IDX file of unsigned bytes with {ndim} dims")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=4 + 4 * ndim).reshape(dims)
    return arr[:limit] if limit > 0 else arr


def load(d, which, limit):
    x = read_idx(f"{d}/{which}-images-idx3-ubyte.gz", 3, limit)
    y = read_idx(f"{d}/{which}-labels-idx1-ubyte.gz", 1, limit)
    return (x.float() / 255.0).unsqueeze(1), y.long()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def evaluate(model, x, y, amp):
    model.eval()
    correct = 0
    with torch.no_grad(), amp():
        for i in range(0, len(x), 500):
            correct += (model(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum().item()
    model.train()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DIR)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--limit", type=int, default=0, help="first N training and test images only")
    ap.add_argument("--steps", type=int, default=0, help="train N steps only and print images/s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (mixed precision) on the CPU")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.steps and not os.path.exists(f"{a.data}/train-images-idx3-ubyte.gz"):
        xtr = torch.rand(4096, 1, 28, 28)  # speed only: the values do not matter
        ytr = torch.randint(0, 10, (4096,))
    else:
        xtr, ytr = load(a.data, "train", a.limit)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = len(xtr)

    def amp():
        return torch.autocast("cpu", dtype=torch.bfloat16) if a.bf16 else contextlib.nullcontext()

    def step(idx):
        opt.zero_grad()
        with amp():
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
        return loss.item()

    if a.steps:
        perm = torch.randperm(n)
        for w in range(2):  # warm-up: Adam makes its moments in the first step
            step(perm[w * a.batch:(w + 1) * a.batch])
        times = []
        for s in range(a.steps):
            i0 = (s * a.batch) % max(n - a.batch, 1)
            t0 = time.perf_counter()
            step(perm[i0:i0 + a.batch])
            times.append(time.perf_counter() - t0)
        med = sorted(times)[len(times) // 2]
        print(f"pytorch {torch.__version__}{' bf16 autocast' if a.bf16 else ''}: {a.steps} steps of batch {a.batch} on {torch.get_num_threads()} threads: "
              f"median {1000 * med:.2f} ms/step, {a.batch / med:.0f} images/s")
        return
    xte, yte = load(a.data, "t10k", a.limit)
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads, {n} training images")
    seen, t_train = 0, 0.0
    for e in range(a.epochs):
        perm = torch.randperm(n)
        t0 = time.perf_counter()
        for i in range(0, n, a.batch):
            loss = step(perm[i:i + a.batch])
            seen += len(perm[i:i + a.batch])
        t_train += time.perf_counter() - t0
        print(f"epoch {e + 1}: loss {loss:.4f}, test accuracy {100 * evaluate(model, xte, yte, amp):.2f}%, "
              f"training {seen / t_train:.0f} images/s", flush=True)
    print(f"training time {t_train:.1f}s")


if __name__ == "__main__":
    main()
