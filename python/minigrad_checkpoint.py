#!/usr/bin/python3
"""Read minigrad GPT checkpoints in Python, without minigrad.

A checkpoint written by minigrad (`textgen train`, `gpt init`, mg_gpt_save) is a safetensors file:
the weights under GPT-2's names and, in its `__metadata__`, every number the model needs. This
module parses the file by hand (numpy only; no `safetensors` package needed), rebuilds the GPT in
PyTorch from the metadata alone and, for textgen checkpoints, tokenizes text exactly as textgen
does, so `eval` here gives the same loss as `textgen eval`. Like minigrad, it verifies the checksum a
file records and refuses NaN or infinite weights and missing config keys. The format and the model are described
in docs/checkpoint-format.md and docs/gpt.md.

Command line:

    python3 python/minigrad_checkpoint.py inspect model.safetensors
    python3 python/minigrad_checkpoint.py eval --ckpt model.safetensors --data text.txt [--split val]

As a module:

    import minigrad_checkpoint as mc
    model = mc.GPT.from_checkpoint("model.safetensors")       # a torch.nn.Module
    logits = model(torch.tensor([[1, 2, 3]]))                 # (B, T, vocab_size)
    ckpt = mc.read_checkpoint("model.safetensors")            # tensors (numpy) and metadata
    tok = mc.Tokenizer.from_metadata(ckpt.metadata, model.config.vocab_size, ckpt.path)
    result = mc.evaluate(model, tok, mc.read_corpus(["text.txt"]), split="val")

Needs numpy and PyTorch (Debian: python3-numpy, python3-torch).
"""
import argparse
import dataclasses
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

FORMAT = "minigrad-gpt"
# The positional schemes this reader rebuilds: the built-in ones and the ALiBi plugin shipped with
# minigrad. A checkpoint naming any other scheme was made with a third-party plugin.
SCHEMES = ("none", "learned", "sinusoidal", "learned+sinusoidal", "rope", "alibi")
# The keys each scheme takes in pos_opts that change the forward pass; the others (the learned
# table's initialisation, the sizes a model offers) are accepted and have no effect here.
POS_FORWARD_KEYS = {"sinusoidal": ("base",), "learned+sinusoidal": ("base",), "rope": ("base",)}
POS_OTHER_KEYS = ("dim", "max_len", "n_head", "head_dim", "causal", "init", "bound", "std")
MAX_HEADER = 100 * 1000 * 1000  # larger headers are refused as corrupt, as minigrad does
CHECKSUM_KEY = "checksum"  # "crc32:" and 8 hex digits, in every file minigrad writes
# The config keys every checkpoint states; a file without a checksum (an older minigrad's) may lack
# exactly these, which then take the values such files were made with.
CONFIG_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "pos", "pos_opts", "dropout", "causal",
               "gelu", "emb_scale", "head", "head_bias", "init_std", "ln_eps", "attn_scale")
OLDER_FILES_MAY_LACK = ("pos_opts", "ln_eps", "attn_scale")

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


class CheckpointError(Exception):
    """A file that cannot be read as asked; the message names the file and what is wrong."""


# ---- safetensors ----

@dataclasses.dataclass
class Checkpoint:
    path: str
    tensors: dict  # name -> numpy array (read-only view of the file's bytes, little-endian)
    metadata: dict  # str -> str


def content_checksum(meta, header, data):
    """The CRC-32 minigrad records under "checksum": over each metadata key and value (file order,
    the checksum itself left out), each tensor's name, dtype, shape "d0,d1,..." and offsets
    "begin,end" (header order), every string followed by a NUL byte, then the data area."""
    crc = 0
    for k, v in meta.items():
        if k != CHECKSUM_KEY:
            crc = zlib.crc32(k.encode("utf-8") + b"\0" + v.encode("utf-8") + b"\0", crc)
    for name, info in header.items():
        shape = ",".join(str(d) for d in info["shape"])
        begin, end = info["data_offsets"]
        crc = zlib.crc32(b"\0".join(x.encode("utf-8") for x in (name, info["dtype"], shape, f"{begin},{end}")) + b"\0",
                         crc)
    return zlib.crc32(data, crc)


def read_checkpoint(path, allow_nonfinite=False):
    """Reads a safetensors file: 8-byte little-endian header length N, N bytes of JSON, then the
    data area, which the tensors' data_offsets index (bytes, relative to its start, end exclusive).
    A file that records a checksum must match it; float tensors must hold finite values only
    unless allow_nonfinite."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e.strerror}") from None
    if len(blob) < 8:
        raise CheckpointError(f"{path}: {len(blob)} bytes: too short for a safetensors file (8-byte header length)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER:
        raise CheckpointError(f"{path}: header length {n} exceeds {MAX_HEADER}: not a safetensors file")
    if 8 + n > len(blob):
        raise CheckpointError(f"{path}: header length {n} runs past the end of the file ({len(blob)} bytes)")

    def no_duplicates(pairs):
        seen = {}
        for k, v in pairs:
            if k in seen:
                raise CheckpointError(f"{path}: header: key '{k}' appears twice")
            seen[k] = v
        return seen

    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: header: invalid UTF-8 at file offset {8 + e.start}") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: header: invalid JSON at file offset {8 + e.pos}: {e.msg}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path}: __metadata__ is not an object of strings")
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, info in header.items():
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise CheckpointError(f"{where}: needs dtype, shape and data_offsets")
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _DTYPES:
            raise CheckpointError(f"{where}: dtype {dtype} is not supported by this reader")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise CheckpointError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(data)):
            raise CheckpointError(f"{where}: data_offsets {offs!r} outside the data area of {len(data)} bytes")
        dt = np.dtype(_DTYPES[dtype])
        count = math.prod(shape)
        if offs[1] - offs[0] != count * dt.itemsize:
            raise CheckpointError(f"{where}: {offs[1] - offs[0]} bytes for shape {shape} of {dtype} "
                                  f"({count * dt.itemsize} expected)")
        tensors[name] = np.frombuffer(data[offs[0]:offs[1]], dtype=dt).reshape(shape)
    if CHECKSUM_KEY in meta:
        want = meta[CHECKSUM_KEY]
        if len(want) != 14 or not want.startswith("crc32:") or any(ch not in "0123456789abcdef" for ch in want[6:]):
            raise CheckpointError(f"{path}: metadata '{CHECKSUM_KEY}' = '{want[:40]}' is not 'crc32:' and 8 lowercase "
                                  "hex digits")
        got = content_checksum(meta, header, data)
        if int(want[6:], 16) != got:
            raise CheckpointError(f"{path}: checksum mismatch: the file records {want} but its content gives "
                                  f"crc32:{got:08x}: the file is damaged or was edited without removing "
                                  f"'{CHECKSUM_KEY}'")
    if not allow_nonfinite:
        for name, t in tensors.items():
            if t.dtype.kind == "f" and t.size and not np.isfinite(t).all():
                i = int(np.flatnonzero(~np.isfinite(t.reshape(-1)))[0])
                v = float(t.reshape(-1)[i])
                what = "NaN" if math.isnan(v) else ("+inf" if v > 0 else "-inf")
                raise CheckpointError(f"{path}: tensor '{name}' holds {what} at element {i} of {t.size}: a "
                                      "non-finite weight is refused")
    return Checkpoint(path, tensors, meta)


# ---- the model configuration ----

def _parse_bool(v, key, origin):
    low = v.lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise CheckpointError(f"{origin}: __metadata__ '{key}': expected true or false, got '{v}'")


def _parse_number(v, key, origin, kind=float):
    try:
        x = kind(v)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise CheckpointError(f"{origin}: __metadata__ '{key}': expected {what}, got '{v}'") from None
    if kind is float and not math.isfinite(x):
        raise CheckpointError(f"{origin}: __metadata__ '{key}': expected a finite number, got '{v}'")
    return x


def _parse_opts(text, origin):
    """ "k=v,k=v" (spaces around keys and values ignored) -> dict."""
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise CheckpointError(f"{origin}: __metadata__ 'pos_opts': '{item}' is not key=value")
        out[k.strip()] = v.strip()
    return out


def _f32(x):
    return float(np.float32(x))


@dataclasses.dataclass
class GPTConfig:
    """The model's configuration, every field from the checkpoint metadata (every key is required,
    except that a file without a checksum may lack pos_opts, ln_eps and attn_scale, which take the
    values such files were written with; see docs/checkpoint-format.md)."""
    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    pos: str = "learned"
    pos_opts: dict = dataclasses.field(default_factory=dict)
    dropout: float = 0.0
    causal: bool = True
    gelu: str = "tanh"  # tanh | erf
    emb_scale: float = 1.0
    tied_head: bool = True
    head_bias: bool = False
    init_std: float = 0.02
    ln_eps: float = float(np.float32(1e-5))  # minigrad keeps it as a float32
    attn_scale: float = 0.0  # 0: 1/sqrt(head dim), as float32

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    @classmethod
    def from_metadata(cls, meta, origin="checkpoint"):
        fmt = meta.get("format")
        if fmt is None:
            raise CheckpointError(f"{origin}: __metadata__ has no 'format' (expected '{FORMAT}'): "
                                  "not a minigrad GPT checkpoint")
        if fmt != FORMAT:
            raise CheckpointError(f"{origin}: __metadata__ format is '{fmt}', expected '{FORMAT}'")
        old = CHECKSUM_KEY not in meta
        for key in CONFIG_KEYS:
            if key not in meta and not (old and key in OLDER_FILES_MAY_LACK):
                raise CheckpointError(f"{origin}: __metadata__ lacks the key '{key}' (a {FORMAT} checkpoint states it)")
        ints = {k: _parse_number(meta[k], k, origin, int)
                for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")}
        c = cls(**ints, pos=meta["pos"])
        if c.vocab_size < 1 or c.block_size < 1 or c.n_layer < 0 or c.n_head < 1 or c.n_embd < 1:
            raise CheckpointError(f"{origin}: __metadata__ sizes out of range: {ints}")
        if c.n_embd % c.n_head:
            raise CheckpointError(f"{origin}: n_embd {c.n_embd} is not a multiple of n_head {c.n_head}")
        c.pos_opts = _parse_opts(meta.get("pos_opts", ""), origin)
        for key in ("dropout", "init_std", "ln_eps", "attn_scale"):
            if key in meta:
                setattr(c, key, _f32(_parse_number(meta[key], key, origin)))
        if "emb_scale" in meta:
            v = meta["emb_scale"]
            c.emb_scale = (_f32(math.sqrt(_f32(c.n_embd))) if v == "sqrt"
                           else _f32(_parse_number(v, "emb_scale", origin)))
        if "causal" in meta:
            c.causal = _parse_bool(meta["causal"], "causal", origin)
        if "head_bias" in meta:
            c.head_bias = _parse_bool(meta["head_bias"], "head_bias", origin)
        if "gelu" in meta:
            if meta["gelu"] not in ("tanh", "erf"):
                raise CheckpointError(f"{origin}: __metadata__ 'gelu': '{meta['gelu']}' is not one of: tanh, erf")
            c.gelu = meta["gelu"]
        if "head" in meta:
            if meta["head"] not in ("tied", "linear"):
                raise CheckpointError(f"{origin}: __metadata__ 'head': '{meta['head']}' is not one of: tied, linear")
            c.tied_head = meta["head"] == "tied"
        if c.ln_eps < 0 or c.attn_scale < 0:
            raise CheckpointError(f"{origin}: __metadata__ ln_eps and attn_scale must not be negative")
        if c.attn_scale == 0.0:  # absent or 0: what mg_attention uses, 1/sqrtf(head dim)
            c.attn_scale = float(np.float32(1.0) / np.sqrt(np.float32(c.head_dim)))
        if c.pos not in SCHEMES:
            raise CheckpointError(
                f"{origin}: positional scheme '{c.pos}' comes from a plugin this reader does not know; it "
                f"rebuilds {', '.join(SCHEMES[:-1])} and {SCHEMES[-1]}")
        known = POS_FORWARD_KEYS.get(c.pos, ()) + POS_OTHER_KEYS
        for k in c.pos_opts:
            if k not in known:
                raise CheckpointError(f"{origin}: __metadata__ 'pos_opts': key '{k}' is unknown to pos '{c.pos}'")
        if c.pos == "rope" and c.head_dim % 2:
            raise CheckpointError(f"{origin}: pos rope needs an even head dimension, got {c.head_dim}")
        if c.pos in ("sinusoidal", "learned+sinusoidal") and c.n_embd % 2:
            raise CheckpointError(f"{origin}: pos {c.pos} needs an even n_embd, got {c.n_embd}")
        return c

    def describe(self):
        return {
            "vocab_size": self.vocab_size, "block_size": self.block_size, "n_layer": self.n_layer,
            "n_head": self.n_head, "n_embd": self.n_embd, "head_dim": self.head_dim, "pos": self.pos,
            "pos_opts": ",".join(f"{k}={v}" for k, v in self.pos_opts.items()), "causal": self.causal,
            "gelu": self.gelu, "emb_scale": self.emb_scale, "head": "tied" if self.tied_head else "linear",
            "head_bias": self.head_bias, "ln_eps": self.ln_eps, "attn_scale": self.attn_scale,
            "dropout": self.dropout, "init_std": self.init_std,
        }


# ---- the model ----

def sinusoidal_table(rows, dim, base, pos0=0):
    """PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(...), in float64."""
    p = torch.arange(pos0, pos0 + rows, dtype=torch.float64)[:, None]
    i = torch.arange(0, dim, 2, dtype=torch.float64)
    ang = p / torch.pow(torch.tensor(base, dtype=torch.float64), i / dim)
    pe = torch.empty(rows, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe


def rope_rotate(x, base, pos0=0):
    """x (B,H,T,D): each pair (2i, 2i+1) rotated by angle p * base^(-2i/D), p = pos0 + t."""
    T, D = x.shape[-2], x.shape[-1]
    p = torch.arange(pos0, pos0 + T, dtype=torch.float64)[:, None]
    i = torch.arange(0, D, 2, dtype=torch.float64)
    ang = p * torch.pow(torch.tensor(base, dtype=torch.float64), -i / D)
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    u0, u1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((u0 * c - u1 * s, u0 * s + u1 * c), dim=-1).flatten(-2)


def alibi_slopes(n_head):
    """m_h = 2^(-8 (h+1) / H), rounded to float32 as the plugin does."""
    return [_f32(2.0 ** (-8.0 * (h + 1) / n_head)) for h in range(n_head)]


def expected_shapes(c, tensors):
    """name -> shape of every tensor the configuration implies (the learned table's rows and the
    MLP width are read from the file, as pos_opts may change the one and the other is a layer
    choice)."""
    C, V = c.n_embd, c.vocab_size
    hidden = tensors["h.0.mlp.c_fc.weight"].shape[1] if c.n_layer and "h.0.mlp.c_fc.weight" in tensors else 4 * C
    shapes = {"wte.weight": (V, C)}
    if c.pos in ("learned", "learned+sinusoidal"):
        rows = tensors["wpe.weight"].shape[0] if "wpe.weight" in tensors else c.block_size
        shapes["wpe.weight"] = (rows, C)
    for i in range(c.n_layer):
        for name, shape in (("ln_1.weight", (C,)), ("ln_1.bias", (C,)),
                            ("attn.c_attn.weight", (C, 3 * C)), ("attn.c_attn.bias", (3 * C,)),
                            ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                            ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
                            ("mlp.c_fc.weight", (C, hidden)), ("mlp.c_fc.bias", (hidden,)),
                            ("mlp.c_proj.weight", (hidden, C)), ("mlp.c_proj.bias", (C,))):
            shapes[f"h.{i}.{name}"] = shape
    shapes["ln_f.weight"] = (C,)
    shapes["ln_f.bias"] = (C,)
    if not c.tied_head:
        shapes["lm_head.weight"] = (C, V)
        if c.head_bias:
            shapes["lm_head.bias"] = (V,)
    return shapes


class GPT(torch.nn.Module):
    """The GPT of docs/gpt.md, computed from the checkpoint's tensors under their own names
    (Linear weights stay (in, out): y = x @ W + b). Inference only: dropout is not applied.

    `tensors` maps the GPT-2 names to arrays; they become parameters (float32 by default, or the
    dtype given), reachable by those names through `checkpoint_parameters()`."""

    def __init__(self, config, tensors, dtype=torch.float32, origin="checkpoint"):
        super().__init__()
        self.config = c = config
        want = expected_shapes(c, tensors)
        for name, shape in want.items():
            if name not in tensors:
                raise CheckpointError(f"{origin}: missing tensor '{name}'")
            if tuple(tensors[name].shape) != shape:
                raise CheckpointError(f"{origin}: {name}: shape in file {tuple(tensors[name].shape)} vs model {shape}")
            if tensors[name].dtype != np.float32:
                raise CheckpointError(f"{origin}: {name}: dtype {tensors[name].dtype}, expected float32 (F32)")
        for name in tensors:
            if name not in want:
                raise CheckpointError(f"{origin}: unexpected tensor '{name}' in file")
        self._names = {}
        for name in want:
            attr = name.replace(".", "__")
            self.register_parameter(attr, torch.nn.Parameter(
                torch.from_numpy(np.array(tensors[name], dtype=np.float32)).to(dtype), requires_grad=False))
            self._names[name] = attr
        self.pos_base = float(c.pos_opts.get("base", "10000"))
        if c.pos == "rope":
            self.pos_base = _f32(self.pos_base)  # the rope layer keeps its base as a float
        self.slopes = alibi_slopes(c.n_head) if c.pos == "alibi" else None

    @classmethod
    def from_checkpoint(cls, path, dtype=torch.float32):
        ck = read_checkpoint(path)
        return cls(GPTConfig.from_metadata(ck.metadata, path), ck.tensors, dtype, path)

    def checkpoint_parameters(self):
        """(GPT-2 name, parameter) pairs in the order of the file's layout."""
        return [(name, getattr(self, attr)) for name, attr in self._names.items()]

    def p(self, name):
        return getattr(self, self._names[name])

    def forward(self, ids):
        """ids (B,T) integer token ids -> logits (B,T,vocab_size), positions from 0."""
        c = self.config
        B, T = ids.shape
        C, H, D = c.n_embd, c.n_head, c.head_dim
        wte = self.p("wte.weight")
        if int(ids.min()) < 0 or int(ids.max()) >= c.vocab_size:
            raise ValueError(f"token ids must lie in [0, {c.vocab_size})")
        x = wte[ids]
        if c.emb_scale != 1.0:
            x = x * c.emb_scale
        if c.pos in ("learned", "learned+sinusoidal"):
            table = self.p("wpe.weight")
            if T > table.shape[0]:
                raise ValueError(f"{T} positions but the learned table has {table.shape[0]} rows")
            x = x + table[:T]
        if c.pos in ("sinusoidal", "learned+sinusoidal"):
            x = x + sinusoidal_table(T, C, self.pos_base).to(x.dtype)
        bias = None
        if c.pos == "alibi":
            dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().to(x.dtype)
            bias = -torch.tensor(self.slopes, dtype=x.dtype)[:, None, None] * dist
        mask = torch.ones(T, T, dtype=torch.bool).triu(1) if c.causal else None
        for i in range(c.n_layer):
            g = lambda n: self.p(f"h.{i}.{n}")
            a = F.layer_norm(x, (C,), g("ln_1.weight"), g("ln_1.bias"), c.ln_eps)
            qkv = a @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
            q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, H, D).transpose(1, 2) for j in range(3))
            if c.pos == "rope":
                q, k = rope_rotate(q, self.pos_base), rope_rotate(k, self.pos_base)
            s = (q @ k.transpose(-1, -2)) * c.attn_scale
            if bias is not None:
                s = s + bias
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
            x = x + o @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
            m = F.layer_norm(x, (C,), g("ln_2.weight"), g("ln_2.bias"), c.ln_eps)
            f = F.gelu(m @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias"), approximate="tanh" if c.gelu == "tanh" else "none")
            x = x + f @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
        x = F.layer_norm(x, (C,), self.p("ln_f.weight"), self.p("ln_f.bias"), c.ln_eps)
        if c.tied_head:
            return x @ wte.T
        logits = x @ self.p("lm_head.weight")
        return logits + self.p("lm_head.bias") if c.head_bias else logits


# ---- textgen's tokenizers and corpus ----

class Tokenizer:
    """textgen's tokenizers, rebuilt from the metadata keys `tokenizer` ("char" when absent, or
    "byte") and `chars` (char: the characters of the ids in id order, ascending code points)."""

    def __init__(self, kind, chars=None):
        self.kind = kind
        if kind == "char":
            self.chars = chars
            self.cps = np.array([ord(ch) for ch in chars], dtype=np.uint32)
            self.size = len(chars)
        else:
            self.chars, self.cps, self.size = None, None, 256

    @classmethod
    def from_metadata(cls, meta, vocab_size, origin="checkpoint"):
        kind = meta.get("tokenizer", "char")
        if kind not in ("char", "byte"):
            raise CheckpointError(f"{origin}: metadata 'tokenizer': unknown tokenizer '{kind}' (known: char, byte)")
        if kind == "byte":
            if vocab_size != 256:
                raise CheckpointError(f"{origin}: metadata 'vocab_size' is {vocab_size} but a byte tokenizer has 256 ids")
            return cls("byte")
        chars = meta.get("chars")
        if chars is None:
            raise CheckpointError(f"{origin}: metadata 'chars' is missing: the checkpoint does not say which "
                                  "characters its ids stand for")
        for i in range(1, len(chars)):
            if ord(chars[i]) <= ord(chars[i - 1]):
                raise CheckpointError(f"{origin}: metadata 'chars': the characters must be distinct and in "
                                      f"ascending order, but character {i} (U+{ord(chars[i]):04X}) follows "
                                      f"U+{ord(chars[i - 1]):04X}")
        if len(chars) != vocab_size:
            raise CheckpointError(f"{origin}: metadata 'chars' holds {len(chars)} characters but 'vocab_size' "
                                  f"is {vocab_size}")
        return cls("char", chars)

    def encode(self, data, name="text"):
        """bytes -> int64 ids. char: strict UTF-8, one id per code point; a character outside the
        vocabulary is an error naming `name` and its byte offset. byte: the bytes themselves."""
        if self.kind == "byte":
            return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{name}: byte offset {e.start}: invalid UTF-8 (the checkpoint's vocabulary "
                                  "is of characters)") from None
        cps = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        ids = np.searchsorted(self.cps, cps)
        found = (ids < self.size) & (self.cps[np.minimum(ids, self.size - 1)] == cps)
        if not found.all():
            k = int(np.argmin(found))
            off = len(text[:k].encode("utf-8"))
            raise CheckpointError(f"{name}: byte offset {off}: the character U+{int(cps[k]):04X} is not in the "
                                  f"vocabulary ({self.size} characters)")
        return ids.astype(np.int64)

    def decode(self, ids):
        if self.kind == "byte":
            return bytes(int(i) for i in ids).decode("utf-8", errors="replace")
        return "".join(self.chars[int(i)] for i in ids)

    def count_chars(self, targets):
        """Characters among the targets: every id (char), or the bytes that start a UTF-8 sequence (byte)."""
        targets = np.asarray(targets)
        return int(targets.size if self.kind == "char" else np.count_nonzero((targets & 0xC0) != 0x80))


def read_corpus(paths):
    """The files' bytes, concatenated with a newline between two files when the first lacks one
    (as textgen reads them). An empty or unreadable file is an error naming it."""
    if not paths:
        raise CheckpointError("no text file given")
    out = bytearray()
    for i, p in enumerate(paths):
        if i > 0 and out[-1:] != b"\n":
            out += b"\n"
        try:
            with open(p, "rb") as f:
                b = f.read()
        except OSError as e:
            raise CheckpointError(f"{p}: cannot open: {e.strerror}") from None
        if not b:
            raise CheckpointError(f"{p}: the file is empty: there is no text in it")
        out += b
    return bytes(out)


@dataclasses.dataclass
class EvalResult:
    tokens: int  # targets scored
    chars: int  # characters among them
    nats: float  # summed cross-entropy

    @property
    def nats_per_char(self):
        return self.nats / self.chars

    @property
    def bits_per_char(self):
        return self.nats_per_char / math.log(2.0)

    @property
    def nats_per_token(self):
        return self.nats / self.tokens


def split_ids(ids, split, name="text"):
    """textgen's split: the first floor(0.9 n) ids train, the rest val; "all" is everything."""
    n = len(ids)
    n_train = n // 10 * 9 + n % 10 * 9 // 10
    if n_train < 2:
        raise CheckpointError(f"{name}: too short to evaluate")
    part = {"val": ids[n_train:], "train": ids[:n_train], "all": ids}.get(split)
    if part is None:
        raise CheckpointError(f"split must be val, train or all, got '{split}'")
    if len(part) < 2:
        raise CheckpointError(f"{name}: the {split} split has {len(part)} tokens: nothing to predict")
    return part


@torch.no_grad()
def evaluate(model, tokenizer, data, split="val", batch=16, name="text"):
    """The loss of `textgen eval`: the split is cut into consecutive windows of block_size tokens
    (the last one shorter) that predict every token after the first exactly once, each scored
    from position 0; `batch` windows per forward pass."""
    ids = split_ids(tokenizer.encode(data, name), split, name)
    T = model.config.block_size
    targets = len(ids) - 1
    starts = list(range(0, targets, T))
    res = EvalResult(0, 0, 0.0)

    def score(group, length):
        x = torch.from_numpy(np.stack([ids[s:s + length] for s in group]))
        y = np.stack([ids[s + 1:s + length + 1] for s in group])
        logits = model(x)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1), reduction="sum")
        res.nats += float(ce.to(torch.float64))
        res.tokens += y.size
        res.chars += tokenizer.count_chars(y)

    last = targets - (len(starts) - 1) * T
    full = starts if last == T else starts[:-1]
    for i in range(0, len(full), batch):
        score(full[i:i + batch], T)
    if last != T:
        score(starts[-1:], last)
    return res


# ---- command line ----

def _open_model(path, dtype):
    ck = read_checkpoint(path)
    cfg = GPTConfig.from_metadata(ck.metadata, path)
    return ck, GPT(cfg, ck.tensors, dtype, path)


def cmd_inspect(args):
    ck = read_checkpoint(args.ckpt)
    print(f"checkpoint {args.ckpt}")
    cfg = None
    if ck.metadata.get("format") == FORMAT:
        cfg = GPTConfig.from_metadata(ck.metadata, args.ckpt)
        for k, v in cfg.describe().items():
            if isinstance(v, bool):
                v = str(v).lower()
            elif isinstance(v, float):
                v = str(np.float32(v))  # the shortest text that reads back as the same float32
            print(f"{k} {v if v != '' else '(none)'}")
    else:
        print(f"format {ck.metadata.get('format', '(none)')}")
    shown = {"format"} | (set(cfg.describe()) | {"head", "pos_opts"} if cfg else set())
    for k, v in ck.metadata.items():
        if k not in shown:
            text = v if len(v) <= 60 else v[:57] + "..."
            print(f"meta {k} = {json.dumps(text, ensure_ascii=False)}")
    total = 0
    for name, t in ck.tensors.items():
        print(f"tensor {name} {t.dtype} ({', '.join(str(d) for d in t.shape)})")
        total += t.size
    print(f"parameters {total}")
    if cfg:
        GPT(cfg, ck.tensors, origin=args.ckpt)  # every tensor present with its shape
    return 0


def cmd_eval(args):
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    ck, model = _open_model(args.ckpt, dtype)
    tok = Tokenizer.from_metadata(ck.metadata, model.config.vocab_size, args.ckpt)
    files = ([args.data] if args.data else []) + args.files
    if not files:
        saved = ck.metadata.get("textgen.data", "")
        files = [f for f in saved.split("\n") if f]
        if not files:
            raise CheckpointError(f"{args.ckpt}: no --data given and the checkpoint names no corpus file")
    label = os.path.basename(files[0]) + (f" + {len(files) - 1} more" if len(files) > 1 else "")
    res = evaluate(model, tok, read_corpus(files), args.split, args.batch, label)
    print(f"data {label}\nsplit {args.split}\ntokens {res.tokens}\ncharacters {res.chars}")
    if tok.kind == "byte":
        print(f"nats_per_byte {res.nats_per_token:.8f}")
    print(f"loss {res.nats_per_char:.8f} nats/char\nloss_bits {res.bits_per_char:.8f} bits/char")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="minigrad_checkpoint.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("inspect", help="print a checkpoint's configuration, metadata and tensors")
    pi.add_argument("ckpt")
    pe = sub.add_parser("eval", help="the loss of a textgen checkpoint on a text, as textgen eval computes it")
    pe.add_argument("--ckpt", required=True, help="checkpoint written by textgen train")
    pe.add_argument("--data", help="text to score (more files may follow; default: the run's own corpus)")
    pe.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    pe.add_argument("--split", default="val", choices=("val", "train", "all"),
                    help="val (the last 10%%), train (the first 90%%) or all")
    pe.add_argument("--batch", type=int, default=16, help="windows per forward pass")
    pe.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    pe.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.cmd == "eval" and args.batch < 1:
        ap.error("--batch must be at least 1")
    try:
        return cmd_inspect(args) if args.cmd == "inspect" else cmd_eval(args)
    except CheckpointError as e:
        print(f"minigrad_checkpoint: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the output went to a pipe that closed early (| head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
