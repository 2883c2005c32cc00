"""bf16 training numerics against PyTorch in float64.

`gpt eval --precision bf16 --dump-grads` gives minigrad's loss and the gradient of every parameter
for one batch of a small causal GPT (2 layers, width 32, learned positions, tied head). The
reference is the model of python/minigrad_checkpoint.py in float64 with every product that minigrad
runs in bf16 done the same way: in the Linear layers and the tied head, inputs, weights and
activations rounded to bf16 (float32 first, then to nearest even, as minigrad's float32 values are)
and, in backward, the output gradient rounded too before both of its products; in attention, where
minigrad's fused kernel has bf16 products on this CPU (`gpt eval` reports it), the kernel's
roundings (BF16Attention below); LayerNorm, softmax and the loss stay float64. Tolerance, stated: for every parameter
||g_minigrad - g_ref|| <= 1e-3 ||g_ref||, and the loss within 1e-5 relative (seen on AVX512-BF16:
1.9e-7 and 5e-8; the float64 model without the rounding is 4e-2 away in error norm over all
gradients, the bf16 reference 3.5e-7). The remaining
difference is minigrad's float32 arithmetic between the products, whose values can round to the
other bf16 neighbour now and then. As a check that the comparison sees the rounding at all, the
float64 model without it must be further from minigrad's gradients (summed over all parameters)
than the bf16 reference is.

Run by meson (suite python) as: test_bf16_torch.py PYTHON_DIR, with GPT set. Exit 77 (skipped)
when numpy or torch is missing, naming which.
"""
import os
import subprocess
import sys
import tempfile

import pycommon

pycommon.require_numpy_torch()

import numpy as np
import torch
import torch.nn.functional as F

mc = pycommon.import_reader()

GPT = os.environ["GPT"]
tap = pycommon.Tap()
report = tap.report


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def bf16(t):
    return t.to(torch.float32).to(torch.bfloat16).to(t.dtype)


class BF16Product(torch.autograd.Function):
    """a (..., K) @ w (K, N) with a, w and, in backward, the output gradient rounded to bf16."""

    @staticmethod
    def forward(ctx, a, w):
        ar, wr = bf16(a), bf16(w)
        ctx.save_for_backward(ar, wr)
        return ar @ wr

    @staticmethod
    def backward(ctx, dy):
        ar, wr = ctx.saved_tensors
        dyr = bf16(dy)
        da = dyr @ wr.T
        dw = ar.reshape(-1, ar.shape[-1]).T @ dyr.reshape(-1, dyr.shape[-1])
        return da, dw


class BF16Attention(torch.autograd.Function):
    """Causal attention as minigrad's fused kernel computes it with bf16 products, for sequences of
    at most one key tile (64), where its running max is the row max: forward
    O = bf16(exp(S - max)) bf16(V) / l with S = bf16(Q) bf16(K)^T scale and l the sum of the
    unrounded exponentials; backward from P = exp(S - lse): dV = bf16(P)^T bf16(dO),
    dP = bf16(dO) bf16(V)^T, dS = P (dP - rowsum(dO O)) scale, dQ = bf16(dS) bf16(K),
    dK = bf16(dS)^T bf16(Q)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, mask):
        qr, kr, vr = bf16(q), bf16(k), bf16(v)
        s = (qr @ kr.transpose(-1, -2) * scale).masked_fill(mask, float("-inf"))
        mx = s.amax(dim=-1, keepdim=True)
        pu = torch.exp(s - mx)
        l = pu.sum(dim=-1, keepdim=True)
        o = (bf16(pu) @ vr) / l
        ctx.save_for_backward(qr, kr, vr, s, mx + torch.log(l), o)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx, do):
        qr, kr, vr, s, lse, o = ctx.saved_tensors
        p = torch.exp(s - lse)
        dor = bf16(do)
        dv = bf16(p).transpose(-1, -2) @ dor
        dp = dor @ vr.transpose(-1, -2)
        ds = p * (dp - (do * o).sum(dim=-1, keepdim=True)) * ctx.scale
        dq = bf16(ds) @ kr
        dk = bf16(ds).transpose(-1, -2) @ qr
        return dq, dk, dv, None, None


def forward(model, ids, rounded, bf16_attention=False):
    """mc.GPT.forward for a causal model with learned positions and a tied head, with the
    products through BF16Product when rounded."""
    c = model.config
    mm = BF16Product.apply if rounded else (lambda a, w: a @ w)
    B, T = ids.shape
    C, H, D = c.n_embd, c.n_head, c.head_dim
    wte = model.p("wte.weight")
    x = wte[ids] * c.emb_scale + model.p("wpe.weight")[:T]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(c.n_layer):
        g = lambda n: model.p(f"h.{i}.{n}")
        a = F.layer_norm(x, (C,), g("ln_1.weight"), g("ln_1.bias"), c.ln_eps)
        qkv = mm(a, g("attn.c_attn.weight")) + g("attn.c_attn.bias")
        q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, H, D).transpose(1, 2) for j in range(3))
        if rounded and bf16_attention:
            o = BF16Attention.apply(q, k, v, c.attn_scale, mask)
        else:
            s = ((q @ k.transpose(-1, -2)) * c.attn_scale).masked_fill(mask, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
        o = o.transpose(1, 2).reshape(B, T, C)
        x = x + mm(o, g("attn.c_proj.weight")) + g("attn.c_proj.bias")
        m = F.layer_norm(x, (C,), g("ln_2.weight"), g("ln_2.bias"), c.ln_eps)
        f = F.gelu(mm(m, g("mlp.c_fc.weight")) + g("mlp.c_fc.bias"), approximate="tanh")
        x = x + mm(f, g("mlp.c_proj.weight")) + g("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), model.p("ln_f.weight"), model.p("ln_f.bias"), c.ln_eps)
    return mm(x, wte.T)


def main():
    B, T, V = 4, 12, 41
    with tempfile.TemporaryDirectory(prefix="bf16_torch_") as tmp:
        cfg = os.path.join(tmp, "m.cfg")
        with open(cfg, "w") as f:
            f.write(f"[gpt]\nvocab_size = {V}\nblock_size = {T}\nn_layer = 2\nn_head = 2\nn_embd = 32\n"
                    "init_std = 0.2\npos = learned\ngelu = tanh\n")
        ckpt, grads, toks_path = (os.path.join(tmp, n) for n in ("m.safetensors", "g.safetensors", "t.bin"))
        run([GPT, "init", "--config", cfg, "--out", ckpt, "--seed", "3"])
        toks = np.random.default_rng(11).integers(0, V, size=(B, T + 1)).astype("<u2")
        toks.tofile(toks_path)
        out = run([GPT, "eval", "--ckpt", ckpt, "--tokens", toks_path, "--batch", str(B), "--seq", str(T),
                   "--threads", "1", "--precision", "bf16", "--dump-grads", grads])
        loss_mg = float(out.split()[1])
        bf16_attention = "attention products in bf16" in out
        g_mg = mc.read_checkpoint(grads).tensors
        x = torch.from_numpy(toks[:, :T].astype(np.int64))
        y = torch.from_numpy(toks[:, 1:].astype(np.int64))
        c = mc.GPT.from_checkpoint(ckpt).config
        if c.pos != "learned" or not c.causal or not c.tied_head:
            raise SystemExit(f"{ckpt}: expected a causal model with learned positions and a tied head")

        results = {}
        for rounded in (True, False):
            model = mc.GPT.from_checkpoint(ckpt, dtype=torch.float64)
            for _, p in model.checkpoint_parameters():
                p.requires_grad_(True)
            loss = F.cross_entropy(forward(model, x, rounded, bf16_attention).reshape(-1, V), y.reshape(-1))
            loss.backward()
            results[rounded] = (loss.item(), {n: p.grad.numpy() for n, p in model.checkpoint_parameters()})

        loss_ref, g_ref = results[True]
        report(abs(loss_mg - loss_ref) <= 1e-5 * abs(loss_ref),
               f"loss: minigrad bf16 {loss_mg:.7f}, float64 with bf16 products {loss_ref:.7f}")
        worst, worst_name, sq_bf, sq_plain = 0.0, "", 0.0, 0.0
        for name, ref in g_ref.items():
            got = np.asarray(g_mg[name], dtype=np.float64)
            rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
            if rel > worst:
                worst, worst_name = rel, name
            sq_bf += float(np.sum((got - ref) ** 2))
            sq_plain += float(np.sum((got - results[False][1][name]) ** 2))
        report(worst <= 1e-3, f"gradients: every parameter within 1e-3 relative (largest {worst:.2e}, {worst_name})")
        report(sq_bf < sq_plain,
               f"the bf16 reference is closer than plain float64 (error norms {np.sqrt(sq_bf):.3e} "
               f"vs {np.sqrt(sq_plain):.3e})")
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
