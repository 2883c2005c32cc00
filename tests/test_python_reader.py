#!/usr/bin/python3
"""The Python checkpoint reader (python/minigrad_checkpoint.py) against minigrad itself.

textgen: tiny models of every positional scheme and both tokenizers are trained for a few steps on
a generated text with 1-, 2- and 3-byte UTF-8 characters; `textgen eval` and the reader's eval
must give the same loss (1e-4 relative) on the val, train and all splits, over one file and over
two. gpt tool: checkpoints of the bidirectional classifier layout with other ln_eps and attn_scale
values; `gpt eval` and the reader's forward must give the same mean cross-entropy. Then a file
without ln_eps and attn_scale (as older versions wrote) loads with the defaults in both, a
plugin's scheme is refused by name, and damaged files are refused naming the file. The checksum
minigrad records is the one the reader computes; a changed byte, a NaN weight and a missing config
key are refused by both.

Run by meson (suite python) as: test_python_reader.py PYTHON_DIR, with TEXTGEN, GPT and
MINIGRAD_PLUGIN_PATH set. Exit 77 (skipped) when numpy or torch is missing, naming which.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import pycommon

pycommon.require_numpy_torch()

import numpy as np
import torch
import torch.nn.functional as F

mc = pycommon.import_reader()

TEXTGEN = os.environ["TEXTGEN"]
GPT = os.environ["GPT"]
TOL = 1e-4

tap = pycommon.Tap()
report = tap.report


def close(a, b):
    return abs(a - b) <= TOL * max(abs(a), abs(b))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def textgen_loss(ckpt, files, split):
    out = run([TEXTGEN, "eval", "--ckpt", ckpt, "--split", split, "--threads", "1", *files])
    vals = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return float(vals["val_loss"]), int(vals["tokens"]), int(vals["characters"])


def reader_loss(ckpt, files, split):
    ck = mc.read_checkpoint(ckpt)
    model = mc.GPT(mc.GPTConfig.from_metadata(ck.metadata, ckpt), ck.tensors, origin=ckpt)
    tok = mc.Tokenizer.from_metadata(ck.metadata, model.config.vocab_size, ckpt)
    r = mc.evaluate(model, tok, mc.read_corpus(files), split)
    return r.nats_per_char, r.tokens, r.chars


def rewrite_meta(src, dst, changes, older=False):
    """Copies a safetensors file with metadata keys changed (value None: removed), its checksum
    recomputed, or removed with older=True (a file as older versions of minigrad wrote it)."""
    with open(src, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header["__metadata__"]
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    meta.pop(mc.CHECKSUM_KEY, None)
    if not older:
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        meta[mc.CHECKSUM_KEY] = f"crc32:{mc.content_checksum(meta, tensors, blob[8 + n:]):08x}"
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])


def make_text(path, n_words, seed, trailing_newline):
    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "über", "naïve", "dog", "ran", "—", "fast", "€", "ok."]
    lines = []
    for _ in range(n_words // 12):
        lines.append(" ".join(words[i] for i in rng.integers(0, len(words), 12)))
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def textgen_checks(tmp):
    a, b = os.path.join(tmp, "a.txt"), os.path.join(tmp, "b.txt")
    make_text(a, 2400, 1, False)  # no final newline: textgen puts one between the two files
    make_text(b, 600, 2, True)
    runs = [("learned", "char", ""), ("sinusoidal", "byte", "base=500"), ("learned+sinusoidal", "char", ""),
            ("rope", "byte", "base=2000"), ("none", "char", ""), ("alibi", "char", "")]
    first = None
    for pos, tokenizer, opts in runs:
        out = os.path.join(tmp, pos.replace("+", "_"))
        cmd = [TEXTGEN, "train", "--data", a, "--out", out, "--tokenizer", tokenizer, "--pos", pos,
               "--steps", "12", "--batch", "4", "--block-size", "16", "--n-embd", "32", "--n-layer", "2",
               "--n-head", "4", "--warmup", "2", "--eval-every", "12", "--eval-windows", "2",
               "--sample-tokens", "0", "--threads", "1", "--seed", "3"]
        if opts:
            cmd += ["--pos-opts", opts]
        run(cmd)
        ckpt = os.path.join(out, "model.safetensors")
        first = first or ckpt
        cases = [([a], "val")] if pos != "learned" else [([a], "val"), ([a], "train"), ([a, b], "all"), ([b], "val")]
        for files, split in cases:
            lt, nt, ct = textgen_loss(ckpt, files, split)
            lr, nr, cr = reader_loss(ckpt, files, split)
            what = f"textgen {pos} ({tokenizer}) on {'+'.join(os.path.basename(f) for f in files)} {split}"
            report(close(lt, lr) and nt == nr and ct == cr,
                   f"{what}: textgen {lt:.6f} nats/char, reader {lr:.6f} ({nt}/{nr} tokens, {ct}/{cr} chars)")
            if tokenizer == "byte":
                report(cr < nr, f"{what}: multi-byte characters counted once ({cr} characters of {nr} bytes)")

    # the command line
    out = run([sys.executable, os.path.join(os.path.dirname(mc.__file__), "minigrad_checkpoint.py"), "eval",
               "--ckpt", first, "--data", a])
    line = [l for l in out.splitlines() if l.startswith("loss ")]
    lt = textgen_loss(first, [a], "val")[0]
    report(len(line) == 1 and line[0].endswith("nats/char") and close(float(line[0].split()[1]), lt),
           f"eval command prints the loss in nats/char: {line}")
    out = run([sys.executable, os.path.join(os.path.dirname(mc.__file__), "minigrad_checkpoint.py"), "inspect", first])
    report("ln_eps 1e-05" in out and "attn_scale 0.35355338" in out and "tensor wpe.weight float32 (16, 32)" in out,
           "inspect prints the config, ln_eps and attn_scale among it, and the tensors")

    # an older file without ln_eps and attn_scale: the same numbers in minigrad and in the reader
    old = os.path.join(tmp, "old.safetensors")
    rewrite_meta(first, old, {"ln_eps": None, "attn_scale": None}, older=True)
    lt_old, lr_old = textgen_loss(old, [a], "val")[0], reader_loss(old, [a], "val")[0]
    cfg = mc.GPTConfig.from_metadata(mc.read_checkpoint(old).metadata, old)
    default_scale = float(np.float32(1) / np.sqrt(np.float32(8)))  # head dim 32 / 4
    report(lt_old == lt and close(lr_old, lt) and cfg.ln_eps == np.float32(1e-5) and cfg.attn_scale == default_scale,
           f"a file without ln_eps and attn_scale: defaults (textgen {lt_old:.6f}, reader {lr_old:.6f})")

    # the checksum: minigrad's and the reader's agree (every read above verified it); without
    # older=True the two keys are required; a changed byte, a NaN weight, a missing key are refused
    ck = mc.read_checkpoint(first)
    report(ck.metadata.get("checksum", "").startswith("crc32:"), f"textgen writes a checksum: {ck.metadata.get('checksum')}")
    strict = os.path.join(tmp, "strict.safetensors")
    rewrite_meta(first, strict, {"ln_eps": None})
    for path, want in ((strict, "lacks the key 'ln_eps'"),):
        try:
            mc.GPT.from_checkpoint(path)
            report(False, f"{want}: refused")
        except mc.CheckpointError as e:
            report(want in str(e) and "strict.safetensors" in str(e), f"refused: {e}")
    for key in ("causal", "gelu", "emb_scale"):
        for older in (False, True):
            rewrite_meta(first, strict, {key: None}, older=older)
            try:
                mc.GPT.from_checkpoint(strict)
                report(False, f"a file without '{key}' is refused (older={older})")
            except mc.CheckpointError as e:
                report(f"lacks the key '{key}'" in str(e), f"a file without '{key}' is refused (older={older}): {e}")
    with open(first, "rb") as f:
        blob = bytearray(f.read())
    flipped = os.path.join(tmp, "flipped.safetensors")
    blob[-5] ^= 0x10
    with open(flipped, "wb") as f:
        f.write(blob)
    try:
        mc.read_checkpoint(flipped)
        report(False, "a flipped weight byte is refused")
    except mc.CheckpointError as e:
        report("flipped.safetensors: checksum mismatch" in str(e), f"a flipped weight byte is refused: {e}")
    blob[-5] ^= 0x10
    (n,) = struct.unpack("<Q", blob[:8])
    blob[8 + n:8 + n + 4] = struct.pack("<f", float("nan"))  # the first value of the first tensor
    nan = os.path.join(tmp, "nan.safetensors")
    with open(nan, "wb") as f:
        f.write(blob)
    rewrite_meta(nan, nan, {})  # a valid checksum over the NaN
    try:
        mc.read_checkpoint(nan)
        report(False, "a NaN weight is refused")
    except mc.CheckpointError as e:
        report("holds NaN at element 0" in str(e), f"a NaN weight is refused: {e}")
    r = subprocess.run([TEXTGEN, "eval", "--ckpt", nan, "--threads", "1", a], capture_output=True, text=True)
    report(r.returncode == 1 and "holds NaN at element 0" in r.stderr, f"textgen eval refuses it too: {r.stderr.strip()}")
    report(mc.read_checkpoint(nan, allow_nonfinite=True).metadata is not None, "allow_nonfinite reads it")

    # refusals
    plugin = os.path.join(tmp, "plugin.safetensors")
    rewrite_meta(first, plugin, {"pos": "xpos"})
    try:
        mc.GPT.from_checkpoint(plugin)
        report(False, "a plugin's scheme is refused")
    except mc.CheckpointError as e:
        report("'xpos' comes from a plugin" in str(e) and "plugin.safetensors" in str(e), f"plugin refused: {e}")
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(mc.__file__), "minigrad_checkpoint.py"),
                        "eval", "--ckpt", plugin, "--data", a], capture_output=True, text=True)
    report(r.returncode == 1 and "xpos" in r.stderr, f"eval command exits 1 naming the scheme: {r.stderr.strip()}")
    with open(first, "rb") as f:
        blob = f.read()
    cut = os.path.join(tmp, "cut.safetensors")
    for what, data in (("truncated", blob[:-100]), ("short", blob[:5]), ("huge header", struct.pack("<Q", 1 << 40))):
        with open(cut, "wb") as f:
            f.write(data)
        try:
            mc.GPT.from_checkpoint(cut)
            report(False, f"{what} file refused")
        except mc.CheckpointError as e:
            report("cut.safetensors" in str(e), f"{what} file refused: {e}")
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w", encoding="utf-8") as f:
        f.write("the cat sat on the mat " * 20 + "Ω")
    model = mc.GPT.from_checkpoint(first)
    try:
        mc.evaluate(model, mc.Tokenizer.from_metadata(mc.read_checkpoint(first).metadata, model.config.vocab_size,
                                                      first), mc.read_corpus([bad]), name=bad)
        report(False, "a character outside the vocabulary is refused")
    except mc.CheckpointError as e:
        report("U+03A9" in str(e) and "byte offset 460" in str(e), f"unknown character refused: {e}")


def gpt_tool_checks(tmp):
    rng = np.random.default_rng(5)
    B, T, V = 3, 12, 41
    classifier = "causal = false\ngelu = erf\nemb_scale = sqrt\nhead = linear\nhead_bias = true\n"
    layouts = {
        "classifier-rope": classifier + "pos = rope\npos_opts = base=300\n",
        "classifier-alibi": classifier + "pos = alibi\n",
        "classifier-learned_sin": classifier + "pos = learned+sinusoidal\n",
        "causal-sinusoidal": "pos = sinusoidal\nemb_scale = 2.5\nhead = linear\n",
    }
    for name, extra in layouts.items():
        cfg = os.path.join(tmp, f"{name}.cfg")
        with open(cfg, "w") as f:
            f.write(f"[gpt]\nvocab_size = {V}\nblock_size = {T}\nn_layer = 2\nn_head = 2\nn_embd = 16\n"
                    "init_std = 0.2\nln_eps = 0.05\nattn_scale = 0.2\n" + extra)
        ckpt = os.path.join(tmp, f"{name}.safetensors")
        run([GPT, "init", "--config", cfg, "--out", ckpt, "--seed", "9"])
        toks = rng.integers(0, V, size=(B, T + 1)).astype("<u2")
        bt = os.path.join(tmp, f"{name}.bin")
        toks.tofile(bt)
        out = run([GPT, "eval", "--ckpt", ckpt, "--tokens", bt, "--batch", str(B), "--seq", str(T), "--threads", "1"])
        loss_mg = float(out.split()[1])
        x, y = torch.from_numpy(toks[:, :T].astype(np.int64)), torch.from_numpy(toks[:, 1:].astype(np.int64))

        def loss_of(path):
            model = mc.GPT.from_checkpoint(path)
            return F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).item(), model.config

        loss_py, c = loss_of(ckpt)
        report(close(loss_mg, loss_py) and c.ln_eps == np.float32(0.05) and c.attn_scale == np.float32(0.2),
               f"gpt tool {name}: minigrad {loss_mg:.7f}, reader {loss_py:.7f}")
        # without the recorded numbers the reader computes something else: it does use them
        for key in ("ln_eps", "attn_scale"):
            dropped = os.path.join(tmp, f"{name}-no-{key}.safetensors")
            rewrite_meta(ckpt, dropped, {key: None}, older=True)
            loss_d, cd = loss_of(dropped)
            default = float(np.float32(1e-5)) if key == "ln_eps" else float(np.float32(1) / np.sqrt(np.float32(8)))
            report(not close(loss_d, loss_mg) and getattr(cd, key) == default,
                   f"gpt tool {name} without {key}: the default applies and changes the loss ({loss_d:.7f})")


def main():
    with tempfile.TemporaryDirectory(prefix="mg_python_reader_") as tmp:
        textgen_checks(tmp)
        gpt_tool_checks(tmp)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
