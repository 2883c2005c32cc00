#!/usr/bin/python3
"""PyTorch reference for bench_train: the same GPT-2 models, trained and sampled the same way.

The model is written the way a PyTorch 1.13 user writes GPT-2 (nanoGPT's "slow attention"
path: 1.13 has no scaled_dot_product_attention, so the causal attention materialises the
(B, H, T, T) score matrix): pre-LayerNorm blocks (eps 1e-5), one fused qkv Linear, causal
softmax attention scaled by 1/sqrt(head_dim), GELU with the tanh approximation, MLP width 4C,
learned positions, final LayerNorm, LM head tied to the token embedding, mean cross-entropy.
A training step is forward, backward, clip_grad_norm_(1.0), AdamW.step(): what bench_train's
minigrad step does.

Generation is greedy at batch 1. Without a cache (the generation baseline) every new token re-runs
the whole context through the model and keeps the last position's logits (nanoGPT's generate);
with --cache (for information) each block keeps its keys and values and a new token costs one
position.

Two ways to run it (Debian 12: apt-get install python3-torch; run with /usr/bin/python3):

  /usr/bin/python3 bench/pytorch_reference.py [--quick] [--configs textgen,music] [--threads 1,2]
        [--json FILE] [--peak-gflops 1T,2T]
      measures every configuration x thread count on its own and prints a table and JSON lines
      (impl = "pytorch"; mfu only when --peak-gflops gives the machine's FMA peak per thread count).

  ... --worker train|gen --config NAME --threads N
      one long-lived measurement process driven by bench_train through stdin/stdout, so that
      bench_train can interleave it with minigrad's. Commands, one per line, each answered by one
      JSON object on one line: "train K" (K steps; their seconds), "gen N cache|nocache" (N new
      tokens; seconds), "mem" (peak RSS), "quit".

Thread counts: the process sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (PyTorch's matrix
products go through Debian's OpenBLAS, which reads its thread count when it is loaded) before
importing torch, then torch.set_num_threads(N). A worker therefore serves one thread count.
OpenBLAS 0.3.21 does not recognise CPUs newer than itself (AMD Zen 5) and falls back to its
AVX2 kernels; on AVX-512 CPUs the worker sets OPENBLAS_CORETYPE=SkylakeX, the faster kernels
and so the stronger baseline (--openblas-core auto keeps the environment's choice).
With more than one thread the worker also sets OMP_WAIT_POLICY=passive: Debian's torch runs its
own operators on libgomp threads and its matrix products on OpenBLAS's pthreads, and with
libgomp's default spin-waiting the idle OpenMP threads take the cores OpenBLAS needs: on 2 cores
the textgen step then took 530-610 ms against 290-320 ms with passive waiting (430 ms on one
thread). The stronger configuration is the baseline (--omp-wait-policy env keeps the
environment's).
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

CONFIGS = {
    # name: vocab, block (T), n_embd (C), n_layer (L), n_head (H), batch (B)
    "textgen": dict(V=256, T=128, C=256, L=3, H=4, B=32),
    "music": dict(V=390, T=2048, C=512, L=6, H=8, B=2),
    "tiny": dict(V=37, T=24, C=32, L=2, H=2, B=3),  # bench_train's own test only
    "tiny-long": dict(V=37, T=1024, C=272, L=1, H=2, B=1),  # likewise
}
PROMPT_LEN = 16
GEN_TOKENS = {"textgen": 112, "music": 512, "tiny": 8, "tiny-long": 8}  # as bench/train/config.c
GEN_SAMPLE_SECONDS, GEN_MAX_REPS = 0.25, 64  # as bench/train/bench_train.c


def gen_tokens(name):
    """New tokens per generation run, as bench_train's defaults: at most what fits the learned
    position table after the prompt (beyond it both implementations would re-run a cropped window
    for every token)."""
    return min(GEN_TOKENS[name], CONFIGS[name]["T"] - PROMPT_LEN)


def model_flops_per_token(cfg):
    """Training FLOPs per token, the formula bench/README.md states: 6 * (12 L C^2 + V C) for
    the matrix products (forward 2 per weight, backward 4; the tied head counted once) plus
    6 L T C for causal attention (QK^T and PV, forward and backward, over the unmasked half)."""
    V, T, C, L = cfg["V"], cfg["T"], cfg["C"], cfg["L"]
    return 6.0 * (12.0 * L * C * C + V * C) + 6.0 * L * T * C


def gen_flops(cfg, prompt, new):
    """Forward FLOPs that greedy generation with a KV cache needs: each position's matrix
    products (2 per weight), the head on each generated token, attention over its prefix."""
    V, C, L = cfg["V"], cfg["C"], cfg["L"]
    total = 0.0
    for pos in range(prompt + new - 1):
        ctx = pos + 1
        total += 2.0 * 12.0 * L * C * C + 4.0 * L * ctx * C
    return total + 2.0 * V * C * new


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    except OSError:
        pass
    return False


def rss_mb():
    """Current resident set size (VmRSS) in MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


# ---- the worker: one configuration, one thread count ----------------------------------------


def build_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional
    V, T, C, L, H = cfg["V"], cfg["T"], cfg["C"], cfg["L"], cfg["H"]

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x, cache=None):
            B, t, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, t, H, C // H).transpose(1, 2)
            k = k.view(B, t, H, C // H).transpose(1, 2)
            v = v.view(B, t, H, C // H).transpose(1, 2)
            past = 0
            if cache is not None:
                if cache:
                    past = cache[0].shape[2]
                    k = torch.cat((cache[0], k), dim=2)
                    v = torch.cat((cache[1], v), dim=2)
                cache[:] = [k, v]
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if t > 1:
                att = att.masked_fill(self.mask[:, :, past:past + t, :past + t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, t, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.attn = SelfAttention()
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.mlp = MLP()

        def forward(self, x, cache=None):
            x = x + self.attn(self.ln_1(x), cache)
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
                elif p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith(".bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets=None, caches=None, pos0=0):
            t = idx.shape[1]
            pos = torch.arange(pos0, pos0 + t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for i, block in enumerate(self.h):
                x = block(x, None if caches is None else caches[i])
            x = self.ln_f(x)
            if targets is None:
                return self.lm_head(x[:, -1, :])  # generation: the last position only
            logits = self.lm_head(x)
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    return GPT()


# glibc's settings that keep freed memory in the process instead of returning it to the kernel:
# PyTorch frees and reallocates its large temporaries (music's attention probabilities are 256 MB
# a layer) every step, and on VMs where a page fault is expensive, faulting them back in took most
# of the step (music, 1 thread, on the 2-core development VM: 61.7 s a step by default, 10.9 s
# with these). Its peak RSS then counts the memory it keeps, an upper bound of what it needs.
RETAIN_MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 50),
                 "MALLOC_TOP_PAD_": str(1 << 30)}


def worker(args):
    cfg = CONFIGS[args.config]
    # glibc reads its settings when the process starts: start again with them
    if args.malloc == "retain" and any(os.environ.get(k) != v for k, v in RETAIN_MALLOC.items()):
        os.environ.update(RETAIN_MALLOC)
        os.execv(sys.executable, [sys.executable] + sys.argv)
    # Before torch (and with it OpenBLAS and libgomp) is loaded: they read these once.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads or args.threads)
    core = args.openblas_core
    if core == "default":
        core = "SkylakeX" if cpu_has_avx512() else "auto"
    if core != "auto":
        os.environ["OPENBLAS_CORETYPE"] = core
    if args.threads > 1 and args.omp_wait_policy != "env":
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy
    import torch

    torch.set_num_threads(args.threads)
    base_rss = rss_mb()
    torch.manual_seed(args.seed)
    model = build_model(torch, cfg)
    n_params = sum(p.numel() for p in model.parameters())
    out = sys.stdout

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    if args.worker == "train":
        model.train()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=3e-4, betas=(0.9, 0.999), eps=1e-8)
        gen = torch.Generator().manual_seed(args.seed + 1)
        batches = [(torch.randint(0, cfg["V"], (cfg["B"], cfg["T"]), generator=gen),
                    torch.randint(0, cfg["V"], (cfg["B"], cfg["T"]), generator=gen)) for _ in range(4)]
        step = 0
    else:
        model.eval()
        gen = torch.Generator().manual_seed(args.seed + 2)
        prompt = torch.randint(0, cfg["V"], (1, PROMPT_LEN), generator=gen)

    reply({"ready": True, "impl": "pytorch", "torch": torch.__version__, "n_params": n_params,
           "blas": blas_in_use(), "malloc": args.malloc,
           "base_rss_mb": base_rss, "openblas_core": os.environ.get("OPENBLAS_CORETYPE", ""),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")})

    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "mem":
            reply({"peak_rss_mb": peak_rss_mb(), "rss_mb": rss_mb()})
        elif cmd[0] == "train" and args.worker == "train" and len(cmd) == 2:
            times, loss = [], float("nan")
            for _ in range(int(cmd[1])):
                x, y = batches[step % len(batches)]
                t0 = time.perf_counter()
                opt.zero_grad()
                if args.precision == "bf16":
                    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                        l = model(x, y)
                else:
                    l = model(x, y)
                l.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                loss = l.item()
                times.append(time.perf_counter() - t0)
                step += 1
            reply({"times": times, "loss": loss})
        elif cmd[0] == "gen" and args.worker == "gen" and len(cmd) == 3:
            n, use_cache = int(cmd[1]), cmd[2] == "cache"
            t0 = time.perf_counter()
            with torch.no_grad():
                idx = prompt
                if use_cache:
                    caches = [[] for _ in range(cfg["L"])]
                    logits = model(idx, caches=caches)
                    for i in range(n):
                        nxt = torch.argmax(logits, dim=-1, keepdim=True)
                        idx = torch.cat((idx, nxt), dim=1)
                        if i + 1 < n:
                            logits = model(nxt, caches=caches, pos0=idx.shape[1] - 1)
                else:
                    for _ in range(n):
                        ctx = idx if idx.shape[1] <= cfg["T"] else idx[:, -cfg["T"]:]
                        nxt = torch.argmax(model(ctx), dim=-1, keepdim=True)
                        idx = torch.cat((idx, nxt), dim=1)
            reply({"seconds": time.perf_counter() - t0, "tokens": n,
                   "last": idx[0, -4:].tolist()})
        else:
            reply({"error": "unknown command '%s'" % line.strip()})
    return 0


# ---- standalone: drive one worker per configuration and thread count ------------------------


class Worker:
    def __init__(self, mode, config, threads, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--config", config,
               "--threads", str(threads), "--seed", str(args.seed), "--openblas-core", args.openblas_core,
               "--omp-wait-policy", args.omp_wait_policy, "--malloc", args.malloc]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.hello = self.read()

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("pytorch worker exited (status %s)" % self.p.wait())
        obj = json.loads(line)
        if "error" in obj:
            raise RuntimeError(obj["error"])
        return obj

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def standalone(args):
    configs = args.configs.split(",")
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, os.cpu_count() or 1})
    peaks = [float(p) for p in args.peak_gflops.split(",")] if args.peak_gflops else []
    for c in configs:
        if c not in CONFIGS:
            sys.exit("pytorch_reference.py: unknown configuration '%s' (known: %s)" % (c, ", ".join(CONFIGS)))
    json_f = open(args.json, "w") if args.json else None
    print("%-8s %3s %-12s %10s %11s %6s %9s" % ("config", "thr", "what", "ms/step", "tokens/s", "MFU", "peakRSS"))
    for c in configs:
        cfg = CONFIGS[c]
        big = cfg["T"] * cfg["C"] > 256 * 1024
        warm, steps = 2, (1 if args.quick else 3) if big else (4 if args.quick else 12)
        for ti, th in enumerate(threads):
            peak = peaks[ti] if ti < len(peaks) else None
            w = Worker("train", c, th, args)
            w.ask("train %d" % warm)
            times = w.ask("train %d" % steps)["times"]
            mem = w.ask("mem")
            w.close()
            ms = statistics.median(times)
            tps = cfg["B"] * cfg["T"] / ms
            flops = model_flops_per_token(cfg) * cfg["B"] * cfg["T"]
            mfu = flops / ms / (peak * 1e9) if peak else None
            rec = {"bench": "train", "config": c, "threads": th, "impl": "pytorch",
                   "ms_per_step": ms * 1e3, "tokens_per_s": tps, "mfu": mfu,
                   "peak_rss_mb": mem["peak_rss_mb"], "base_rss_mb": w.hello["base_rss_mb"],
                   "steps": len(times), "model_gflop_per_step": flops / 1e9,
                   "openblas_core": w.hello["openblas_core"]}
            print("%-8s %3d %-12s %10.1f %11.0f %6s %8.0fM" % (c, th, "train", ms * 1e3, tps,
                  "%.1f%%" % (100 * mfu) if mfu else "-", mem["peak_rss_mb"]))
            if json_f:
                json_f.write(json.dumps(rec) + "\n")
            n = gen_tokens(c)
            w = Worker("gen", c, th, args)
            w.ask("gen 4 nocache")
            w.ask("gen 4 cache")
            for mode in ("nocache", "cache"):
                # as bench_train: a run shorter than GEN_SAMPLE_SECONDS is repeated back to back
                # and averaged, since the first milliseconds after idling run slower
                t = w.ask("gen 4 %s" % mode)["seconds"] * n / 4
                if not args.quick and t < 4 * GEN_SAMPLE_SECONDS:
                    t = w.ask("gen %d %s" % (n, mode))["seconds"]
                reps = 1 if args.quick else max(1, min(GEN_MAX_REPS, math.ceil(GEN_SAMPLE_SECONDS / t)))
                secs = []
                for _ in range(1 if args.quick else 2):
                    secs.append(sum(w.ask("gen %d %s" % (n, mode))["seconds"] for _ in range(reps)) / reps)
                s = statistics.median(secs)
                gfl = gen_flops(cfg, PROMPT_LEN, n)
                mfu = gfl / s / (peak * 1e9) if peak else None
                rec = {"bench": "gen", "config": c, "threads": th, "impl": "pytorch",
                       "cache": mode == "cache", "prompt_tokens": PROMPT_LEN, "new_tokens": n,
                       "runs": len(secs), "reps_per_run": reps, "ms_per_token": s / n * 1e3, "gen_tokens_per_s": n / s, "tokens_per_s": n / s,
                       "mfu": mfu, "peak_rss_mb": None}
                print("%-8s %3d %-12s %10.2f %11.1f %6s %9s" % (c, th, "gen " + mode, s / n * 1e3, n / s,
                      "%.1f%%" % (100 * mfu) if mfu else "-", "-"))
                if json_f:
                    json_f.write(json.dumps(rec) + "\n")
            w.close()
    if json_f:
        json_f.close()
    return 0


def blas_in_use():
    """Which BLAS this process has mapped (Debian's torch links libblas.so.3, which the
    alternatives system points at OpenBLAS or at the reference implementation): "openblas",
    "reference", another library's file name, or "" when none shows."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return ""
    for p in sorted(paths):
        real = os.path.realpath(p)
        if "openblas" in real:
            return "openblas"
        if real.endswith("/blas/libblas.so.3") or "/blas/" in real:
            return "reference"
    return os.path.basename(sorted(paths)[0]) if paths else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=["train", "gen"])
    ap.add_argument("--config", choices=sorted(CONFIGS))
    ap.add_argument("--threads", help="worker: one count; standalone: a list, e.g. 1,2 (default 1 and all)")
    ap.add_argument("--configs", default="textgen,music", help="from: %s" % ", ".join(CONFIGS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--peak-gflops", help="measured FMA peak per thread count, e.g. 250,500 (for MFU)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="bf16: the forward pass under torch.autocast('cpu', torch.bfloat16)")
    ap.add_argument("--omp-wait-policy", default="passive", choices=["passive", "active", "env"],
                    help="OMP_WAIT_POLICY for PyTorch's OpenMP threads when threads > 1 (default passive: "
                         "see the module docstring; 'env' keeps the environment's)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="worker: OpenBLAS's own thread count (default: --threads)")
    ap.add_argument("--openblas-core", default="default",
                    help="OPENBLAS_CORETYPE for PyTorch's BLAS: a name, 'auto' (environment's), "
                         "or 'default' (SkylakeX on AVX-512 CPUs)")
    ap.add_argument("--malloc", default="retain", choices=["retain", "default"],
                    help="worker: 'retain' (default) starts PyTorch with glibc keeping freed memory "
                         "(no page faults on every step's temporaries; see RETAIN_MALLOC), "
                         "'default' leaves glibc's settings")
    args = ap.parse_args()
    if args.worker:
        if not args.config or not args.threads or not args.threads.isdigit() or int(args.threads) < 1:
            ap.error("--worker needs --config NAME and --threads N (N >= 1)")
        args.threads = int(args.threads)
        return worker(args)
    return standalone(args)


if __name__ == "__main__":
    sys.exit(main())
