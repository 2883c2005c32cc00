#!/usr/bin/python3
"""Cross-check minigrad's GPT against PyTorch (optional; not run by CI).

For every positional scheme (and the bidirectional classifier layout of POSENC-TASKS.md with
rope and alibi) this script writes a config, runs `gpt init`, writes a token batch, runs
`gpt eval --dump-grads`, then rebuilds the same network in PyTorch *from the checkpoint alone*
(float64, written from the formulas in DESIGN.md, not from minigrad's code) and compares the loss
and the gradient of every parameter.

    /usr/bin/python3 examples/gpt/check_against_pytorch.py --gpt build/examples/gpt/gpt

Needs python3-torch (Debian 12: 1.13) and numpy. Exit status 1 if a difference exceeds the
tolerances (loss 1e-5 relative, gradients 1e-4 of the largest gradient of that tensor + 1e-6).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        b, e = info["data_offsets"]
        arr = np.frombuffer(blob[base + b:base + e], dtype="<f4").reshape(info["shape"])
        tensors[name] = torch.tensor(arr.astype(np.float64))
    return tensors, meta


def sinusoidal(T, C):
    pe = torch.zeros(T, C, dtype=torch.float64)
    p = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(0, C, 2, dtype=torch.float64)
    div = torch.pow(10000.0, i / C)
    pe[:, 0::2] = torch.sin(p / div)
    pe[:, 1::2] = torch.cos(p / div)
    return pe


def rope(x):  # x (B,H,T,D), interleaved pairs (2i, 2i+1), angle p * 10000^(-2i/D)
    B, H, T, D = x.shape
    p = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(0, D, 2, dtype=torch.float64)
    ang = p * torch.pow(10000.0, -i / D)
    c, s = torch.cos(ang), torch.sin(ang)
    u0, u1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = u0 * c - u1 * s
    out[..., 1::2] = u0 * s + u1 * c
    return out


def alibi_bias(H, T):
    m = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], dtype=torch.float64)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return -m[:, None, None] * (i - j).abs().to(torch.float64)[None]


def forward(P, cfg, x):
    B, T = x.shape
    C, H, L = int(cfg["n_embd"]), int(cfg["n_head"]), int(cfg["n_layer"])
    D = C // H
    pos = cfg["pos"]
    causal = cfg.get("causal", "true") == "true"
    gelu = "tanh" if cfg.get("gelu", "tanh") == "tanh" else "none"
    h = P["wte.weight"][x] * float(cfg.get("emb_scale", "1"))
    if pos in ("learned", "learned+sinusoidal"):
        h = h + P["wpe.weight"][:T]
    if pos in ("sinusoidal", "learned+sinusoidal"):
        h = h + sinusoidal(T, C)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        g = lambda n: P[f"h.{l}.{n}"]
        a = F.layer_norm(h, (C,), g("ln_1.weight"), g("ln_1.bias"), 1e-5)
        qkv = a @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, D).transpose(1, 2) for i in range(3))
        if pos == "rope":
            q, k = rope(q), rope(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        if pos == "alibi":
            s = s + alibi_bias(H, T)
        if causal:
            s = s.masked_fill(mask, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)
        h = h + o @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        m = F.layer_norm(h, (C,), g("ln_2.weight"), g("ln_2.bias"), 1e-5)
        f = F.gelu(m @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias"), approximate=gelu)
        h = h + f @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    h = F.layer_norm(h, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
    if cfg.get("head", "tied") == "tied":
        return h @ P["wte.weight"].T
    logits = h @ P["lm_head.weight"]
    if "lm_head.bias" in P:
        logits = logits + P["lm_head.bias"]
    return logits


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
    P, meta = read_safetensors(ck)
    G, _ = read_safetensors(gr)
    for p in P.values():
        p.requires_grad_(True)
    x = torch.tensor(toks[:, :T].astype(np.int64))
    y = torch.tensor(toks[:, 1:].astype(np.int64))
    logits = forward(P, meta, x)
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
