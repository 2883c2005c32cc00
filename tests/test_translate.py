#!/usr/bin/python3
"""Three PyTorch models and their line-by-line minigrad translations (tests/translate_models.c)
give the same outputs, losses and gradients.

For each model (a CNN, an LSTM language model, a Llama-style block) the PyTorch original below is
built with seeded random weights; its state_dict (nn.Linear weights transposed to minigrad's
(in, out)) and an input and target go to a safetensors file; the translate_models program loads
them, runs forward, the loss and backward, and writes its output, loss and every gradient; both
are compared, float32 against float32, elementwise within |mg - torch| <= ATOL + RTOL |torch| with
RTOL 1e-4 and ATOL 1e-5 (the gradients hold values near zero, where only an absolute bound
makes sense). The Llama block is also run with Meta's rotary convention (interleaved pairs, on
mg_rope directly) and with Hugging Face's once the q and k columns of wq and wk are reordered at
load time. Then the comparison must catch a weight changed by 1e-3 in one place, and the program
must refuse a file with a weight missing, naming it.

Run by meson (suite python) as: test_translate.py PYTHON_DIR, with TRANSLATE_MODELS set to the
program. Exit 77 (skipped) when numpy or torch is missing, naming which. The blocks between the
translate-*:begin/end markers are shown in docs/pytorch.md.
"""
import contextlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import pycommon

pycommon.require_numpy_torch()

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

mc = pycommon.import_reader()

PROG = os.environ["TRANSLATE_MODELS"]
RTOL, ATOL = 1e-4, 1e-5

tap = pycommon.Tap()
report = tap.report
worst = [0.0]  # the largest |mg - torch| / (ATOL + RTOL |torch|) of the current model


# ---- the PyTorch models ----

# translate-cnn:begin
class CNN(nn.Module):  # input (N, 1, 12, 12)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 3 * 3, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc(x)


def cnn_loss(logits, y):
    return F.cross_entropy(logits, y, label_smoothing=0.1)
# translate-cnn:end


# translate-lstm:begin
class LSTMLM(nn.Module):
    def __init__(self, vocab, emb_dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb_dim)
        self.lstm = nn.LSTM(emb_dim, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        x, _ = self.lstm(x)
        return self.head(x)


def lstm_lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
# translate-lstm:end


# translate-llama:begin
class RMSNorm(nn.Module):  # nn.RMSNorm(dim, eps) in PyTorch 2.4 and later
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, theta):  # x (B, H, T, D); Hugging Face's convention: element i pairs with i + D/2
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2).float() / D)
    angles = torch.outer(torch.arange(T).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return x * angles.cos() + rotate_half(x) * angles.sin()


class Attention(nn.Module):
    def __init__(self, dim, n_heads, rope_theta):
        super().__init__()
        self.n_heads, self.rope_theta = n_heads, rope_theta
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.n_heads, C // self.n_heads
        q = self.wq(x).view(B, T, H, D).transpose(1, 2)
        k = self.wk(x).view(B, T, H, D).transpose(1, 2)
        v = self.wv(x).view(B, T, H, D).transpose(1, 2)
        q, k = apply_rope(q, self.rope_theta), apply_rope(k, self.rope_theta)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, hidden_dim, norm_eps, rope_theta):
        super().__init__()
        self.attention = Attention(dim, n_heads, rope_theta)
        self.feed_forward = FeedForward(dim, hidden_dim)
        self.attention_norm = RMSNorm(dim, norm_eps)
        self.ffn_norm = RMSNorm(dim, norm_eps)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))
# translate-llama:end


def apply_rope_meta(x, theta):  # Meta's Llama code: pairs (2i, 2i + 1) rotated as complex numbers
    T, D = x.shape[-2], x.shape[-1]
    freqs = 1.0 / theta ** (torch.arange(0, D, 2).float() / D)
    rot = torch.polar(torch.ones(T, D // 2), torch.outer(torch.arange(T).float(), freqs))
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * rot).flatten(-2)


@contextlib.contextmanager
def rope_convention(fn):
    """Runs the Attention above with another rotary function (its forward looks apply_rope up by name)."""
    global apply_rope
    saved, apply_rope = apply_rope, fn
    try:
        yield
    finally:
        apply_rope = saved


def halves_to_pairs(dim, n_heads):
    """Column order that turns Hugging Face's rotary layout of q (or k) into Meta's: in each head,
    new column 2i is old column i and new column 2i + 1 is old column i + D/2."""
    D = dim // n_heads
    return [h * D + (j // 2 if j % 2 == 0 else D // 2 + j // 2) for h in range(n_heads) for j in range(D)]


# ---- files ----

def write_safetensors(path, tensors):
    """name -> tensor, as F32 (safetensors: 8-byte header length, JSON header, data area)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().numpy(), dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def linear_weights(model, prefix):
    """The state_dict names of the nn.Linear weights, which minigrad stores transposed."""
    return {f"{prefix}{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def minigrad_state(model, prefix):
    transposed = linear_weights(model, prefix)
    return {prefix + k: (v.t() if prefix + k in transposed else v) for k, v in model.state_dict().items()}


# ---- the three cases ----

def make_case(kind):
    """(model, prefix of its names in the C program, input, target, loss function)."""
    torch.manual_seed({"cnn": 1, "lstm": 2, "llama": 3, "llama_meta": 4}[kind])
    if kind == "cnn":
        model = CNN()
        x = torch.randn(3, 1, 12, 12)
        return model, "", x, torch.randint(0, 10, (3,)), cnn_loss
    if kind == "lstm":
        model = LSTMLM(11, 8, 12)  # translate_main.c's LSTM_VOCAB, LSTM_EMB, LSTM_HIDDEN
        ids = torch.randint(0, 11, (2, 7))
        targets = torch.randint(0, 11, (2, 7))
        targets[1, -2:] = -100  # padding: PyTorch's default ignore_index
        return model, "", ids, targets, lstm_lm_loss
    model = TransformerBlock(dim=16, n_heads=2, hidden_dim=40, norm_eps=1e-5, rope_theta=10000.0)  # llama, llama_meta
    with torch.no_grad():  # norm weights other than ones, so that their use is checked
        model.attention_norm.weight.uniform_(0.5, 1.5)
        model.ffn_norm.weight.uniform_(0.5, 1.5)
    return model, "blk.", torch.randn(2, 5, 16), torch.randn(2, 5, 16), F.mse_loss


def run_torch(model, x, target, loss_fn):
    x = x.clone()
    if x.is_floating_point():
        x.requires_grad_(True)
    out = model(x)
    loss = loss_fn(out, target)
    model.zero_grad()
    loss.backward()
    return out.detach(), loss.detach(), x


def run_c(kind, path_in, path_out):
    return subprocess.run([PROG, kind, path_in, path_out], capture_output=True, text=True)


def compare(name, got, want):
    """None when every element is within ATOL + RTOL |want|, else what differs most."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} vs PyTorch's {want.shape}"
    err = np.abs(got - want) - (ATOL + RTOL * np.abs(want))
    if got.size:
        worst[0] = max(worst[0], float((np.abs(got - want) / (ATOL + RTOL * np.abs(want))).max()))
    if got.size and (err > 0).any():
        i = int(np.argmax(err))
        return (f"{name}: element {i}: minigrad {got.reshape(-1)[i]:.8g} vs PyTorch {want.reshape(-1)[i]:.8g} "
                f"({int((err > 0).sum())} of {got.size} off)")
    return None


def check(kind, model, prefix, x, target, loss_fn, tmp, weights=None, rope=None, columns=None):
    """Runs both sides (the PyTorch model with rotary function rope when given); returns the list
    of mismatches (empty when they agree). columns: {name: order} reorders those (in, out) weights'
    columns, in the file and in the gradients compared."""
    with rope_convention(rope or apply_rope):
        out, loss, xg = run_torch(model, x, target, loss_fn)
    path_in, path_out = os.path.join(tmp, f"{kind}-in.safetensors"), os.path.join(tmp, f"{kind}-out.safetensors")
    state = weights if weights is not None else minigrad_state(model, prefix)
    columns = columns or {}
    state = {k: (v[:, columns[k]] if k in columns else v) for k, v in state.items()}
    write_safetensors(path_in, {**state, "input": x.float(), "target": target.float()})
    r = run_c(kind, path_in, path_out)
    if r.returncode != 0:
        return [f"translate_models {kind}: exit {r.returncode}: {r.stderr.strip()}"]
    got = mc.read_checkpoint(path_out).tensors
    want = {"output": out, "loss": loss}
    if x.is_floating_point():
        want["grad.input"] = xg.grad
    transposed = linear_weights(model, prefix)
    for k, p in model.named_parameters():
        g = p.grad.t() if prefix + k in transposed else p.grad
        want[f"grad.{prefix}{k}"] = g[:, columns[prefix + k]] if prefix + k in columns else g
    bad = [f"{k}: missing from the program's output" for k in want if k not in got]
    bad += [f"{k}: in the program's output but not PyTorch's" for k in got if k not in want]
    bad += [m for k in want if k in got for m in [compare(k, got[k], want[k].numpy())] if m]
    return bad


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="mg_translate_") as tmp:
        for kind in ("cnn", "lstm", "llama"):
            model, prefix, x, target, loss_fn = make_case(kind)
            worst[0] = 0.0
            bad = check(kind, model, prefix, x, target, loss_fn, tmp)
            print(f"# {kind}: the largest difference is {worst[0]:.3f} of the bound")
            for m in bad:
                print(f"# {m}")
            report(not bad, f"{kind}: output, loss and {sum(1 for _ in model.parameters())} parameter gradients "
                            f"match PyTorch {torch.__version__}")

        # Meta's rotary convention (interleaved pairs) runs on mg_rope directly ...
        model, prefix, x, target, loss_fn = make_case("llama_meta")
        worst[0] = 0.0
        bad = check("llama_meta", model, prefix, x, target, loss_fn, tmp, rope=apply_rope_meta)
        print(f"# llama_meta: the largest difference is {worst[0]:.3f} of the bound")
        for m in bad:
            print(f"# {m}")
        report(not bad, "llama with Meta's rotary pairs: mg_rope as it is matches PyTorch")
        # ... and so does Hugging Face's once the q and k columns of wq and wk are reordered.
        model, prefix, x, target, loss_fn = make_case("llama")
        order = halves_to_pairs(16, 2)
        worst[0] = 0.0
        bad = check("llama_meta", model, prefix, x, target, loss_fn, tmp,
                    columns={"blk.attention.wq.weight": order, "blk.attention.wk.weight": order})
        print(f"# llama, weights reordered: the largest difference is {worst[0]:.3f} of the bound")
        for m in bad:
            print(f"# {m}")
        report(not bad, "llama with Hugging Face's rotary halves: wq and wk columns reordered, then mg_rope as it is")

        # The comparison is not blind: one weight changed by 1e-3 in the file the program reads.
        model, prefix, x, target, loss_fn = make_case("llama")
        state = minigrad_state(model, prefix)
        w = state["blk.feed_forward.w2.weight"].clone()
        w[3, 5] += 1e-3
        bad = check("llama", model, prefix, x, target, loss_fn, tmp, {**state, "blk.feed_forward.w2.weight": w})
        report(any(m.startswith("output") for m in bad), "a weight changed by 1e-3 is caught in the output")

        # A weight missing from the file is refused, naming it.
        state = minigrad_state(model, prefix)
        del state["blk.attention.wk.weight"]
        path = os.path.join(tmp, "missing.safetensors")
        write_safetensors(path, {**state, "input": x, "target": target})
        r = run_c("llama", path, os.path.join(tmp, "missing-out.safetensors"))
        report(r.returncode == 1 and "blk.attention.wk.weight" in r.stderr,
               f"a missing weight is refused by name ({r.stderr.strip()[:120]})")
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
