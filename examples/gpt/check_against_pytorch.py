#!/usr/bin/python3
"""Cross-check minigrad's GPT against PyTorch (optional; not run by CI).

For every positional scheme (and the bidirectional classifier layout of the positional-encoding
benchmark, docs/posenc-benchmark.md, with rope and alibi) this script writes a config, runs
`gpt init`, writes a token batch, runs `gpt eval --dump-grads`, then rebuilds the same network in
PyTorch *from the checkpoint alone* with python/minigrad_checkpoint.py (float64; that reader is
written from the formulas of docs/gpt.md, not from minigrad's code) and compares the loss and the
gradient of every parameter.

    /usr/bin/python3 examples/gpt/check_against_pytorch.py --gpt build/examples/gpt/gpt

Needs python3-torch (Debian 12: 1.13) and numpy. Exit status 1 if a difference exceeds the
tolerances (loss 1e-5 relative, gradients 1e-4 of the largest gradient of that tensor + 1e-6).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import minigrad_checkpoint as mc  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def check(gpt, tmp, name, cfg_text, B, T, vocab, rng):
    cfgp, ck, gr, bt = (os.path.join(tmp, f"{name}.{e}") for e in ("cfg", "safetensors", "grads.safetensors", "bin"))
    with open(cfgp, "w") as f:
        f.write(cfg_text)
    run([gpt, "init", "--config", cfgp, "--out", ck, "--seed", "11"])
    toks = rng.integers(0, vocab, size=(B, T + 1)).astype("<u2")
    toks.tofile(bt)
    out = run([gpt, "eval", "--ckpt", ck, "--tokens", bt, "--batch", str(B), "--seq", str(T), "--dump-grads", gr])
    loss_mg = float(out.split()[1])
    model = mc.GPT.from_checkpoint(ck, dtype=torch.float64)
    P = dict(model.checkpoint_parameters())
    G = {n: torch.from_numpy(np.array(t, dtype=np.float64)) for n, t in mc.read_checkpoint(gr).tensors.items()}
    for p in P.values():
        p.requires_grad_(True)
    x = torch.tensor(toks[:, :T].astype(np.int64))
    y = torch.tensor(toks[:, 1:].astype(np.int64))
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    loss_pt = loss.item()
    assert set(G) == set(P), "gradient names differ from parameter names"
    worst_abs, worst_rel, worst_name, ok = 0.0, 0.0, "", True
    for n, p in P.items():
        diff = (p.grad - G[n]).abs().max().item()
        scale = p.grad.abs().max().item()
        rel = diff / (scale + 1e-12)
        if diff > 1e-4 * scale + 1e-6:
            ok = False
        if diff > worst_abs:
            worst_abs, worst_name = diff, n
        worst_rel = max(worst_rel, rel)
    loss_ok = abs(loss_mg - loss_pt) <= 1e-5 * abs(loss_pt)
    return loss_mg, loss_pt, worst_abs, worst_rel, worst_name, ok and loss_ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpt", default="build/examples/gpt/gpt", help="path to the gpt tool")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    args = ap.parse_args()
    gpt = os.path.abspath(args.gpt)
    rng = np.random.default_rng(1234)
    vocab = 97
    base = f"[gpt]\nvocab_size = {vocab}\nblock_size = {args.seq}\nn_layer = 2\nn_head = 4\nn_embd = 64\ninit_std = 0.1\n"
    classifier = "causal = false\ngelu = erf\nemb_scale = sqrt\nhead = linear\nhead_bias = true\n"
    runs = [(pos, base + f"pos = {pos}\n") for pos in
            ("none", "learned", "sinusoidal", "learned+sinusoidal", "rope", "alibi")]
    runs += [(f"classifier-{pos}", base + classifier + f"pos = {pos}\n") for pos in ("none", "rope", "alibi")]
    print(f"B={args.batch} T={args.seq} vocab={vocab} n_layer=2 n_head=4 n_embd=64; PyTorch {torch.__version__} float64")
    print(f"{'model':28s} {'loss minigrad':>14s} {'loss pytorch':>14s} {'|dloss|':>9s} {'max|dgrad|':>10s} "
          f"{'max rel':>9s}  worst tensor")
    all_ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in runs:
            lm, lp, ga, gr, gn, ok = check(gpt, tmp, name.replace("+", "_"), text, args.batch, args.seq, vocab, rng)
            all_ok &= ok
            print(f"{name:28s} {lm:14.9f} {lp:14.9f} {abs(lm - lp):9.2e} {ga:10.2e} {gr:9.2e}  {gn}"
                  f"{'' if ok else '   <-- FAIL'}")
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
