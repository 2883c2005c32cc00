#!/usr/bin/env bash
# The bench_train tool itself, on the "tiny" configuration (seconds, no PyTorch needed): argument
# errors, the worker protocol, a whole run's JSON lines and PNG, and that the C program and
# pytorch_reference.py count model FLOPs alike. Not the benchmark: `meson test --benchmark` runs that.
#   test_bench_train.sh BENCH_TRAIN PYTORCH_REFERENCE_PY
set -uo pipefail
bench=$1
ref=$2
. "$(dirname "$0")/../common/tap.sh"

# --help documents every configuration --configs takes, the tool's own tiny ones too
"$bench" --help >"$tmp/help" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q -- "--configs LIST" "$tmp/help" && grep -q "tiny and tiny-long are for quick checks of the tool" "$tmp/help" &&
  grep -q "tiny-long" "$tmp/help"; then ok "--help documents the configurations"
else not_ok "--help documents the configurations" "exit $rc: $(head -c 1500 "$tmp/help")"; fi

# usage errors: exit status 2, the culprit named on stderr
expect_exit "unknown option is named" 2 "'--bogus'" --bogus
expect_exit "option without its value" 2 "'--json'" --json
expect_exit "zero threads refused" 2 "'0' is not a thread count" --threads 0
expect_exit "thread list with garbage refused" 2 "'2x' is not a thread count" --threads 1,2x
expect_exit "unknown configuration lists the known ones" 2 "unknown configuration 'nope' (known: textgen music tiny tiny-long)" --configs nope
expect_exit "steps must be positive" 2 "--steps: 0 is out of range 1..1000000" --steps 0
expect_exit "generation length must be positive" 2 "--gen-tokens: -5 is out of range 1..1000000" --gen-tokens -5
expect_exit "a seed that is no number refused" 2 "bench_train: --seed expects an integer in 0..2147483647, got 'abc'" \
  --seed abc --no-pytorch --configs tiny --threads 1 --steps 1 --warmup 1 --gen-runs 1 --json "$tmp/wp.json"
expect_exit "the worker refuses such a seed too" 2 "bench_train worker: --seed expects an integer in 0..2147483647, got '12x'" \
  --worker train --config tiny --threads 1 --seed 12x
# the values PyTorch's worker takes are checked before anything runs (the tiny run keeps a miss short)
expect_exit "unknown wait policy lists the known ones" 2 \
  "bench_train: --pytorch-wait-policy 'bogus': expected passive, active or env" \
  --pytorch-wait-policy bogus --no-pytorch --configs tiny --threads 1 --steps 1 --warmup 1 --gen-runs 1 --json "$tmp/wp.json"
expect_exit "unknown malloc mode lists the known ones" 2 "bench_train: --pytorch-malloc 'bogus': expected retain or default" \
  --pytorch-malloc bogus --no-pytorch --configs tiny --threads 1 --steps 1 --warmup 1 --gen-runs 1 --json "$tmp/wp.json"

# The worker protocol: greeting, steps, memory, errors as JSON, clean exit on quit.
printf 'train 2\nmem\nfly 3\ngen 2 cache\nquit\n' |
  "$bench" --worker train --config tiny --threads 1 >"$tmp/worker" 2>"$tmp/werr"
rc=$?
python3 - "$tmp/worker" <<'EOF' >"$tmp/check" 2>&1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 5, lines
hello, steps, mem, bad, wrong_mode = lines
assert hello["ready"] and hello["impl"] == "minigrad" and hello["n_params"] > 0, hello
assert len(steps["times"]) == 2 and all(t > 0 for t in steps["times"]), steps
assert 0 < steps["loss"] < 10, steps
assert mem["peak_rss_mb"] > 0 and mem["arena_peak_mb"] > 0 and mem["state_mb"] > 0, mem
assert bad == {"error": "unknown command 'fly 3'"}, bad
assert "unknown command 'gen 2 cache'" in wrong_mode["error"], wrong_mode
EOF
if [ $rc -eq 0 ] && [ ! -s "$tmp/check" ]; then ok "train worker answers each command with one JSON line"
else not_ok "train worker answers each command with one JSON line" "exit $rc: $(cat "$tmp/check" "$tmp/werr" | head -c 600)"; fi

printf 'gen 5 cache\ngen 5 nocache\nquit\n' | "$bench" --worker gen --config tiny --threads 1 >"$tmp/gen" 2>&1
python3 - "$tmp/gen" <<'EOF' >"$tmp/check" 2>&1
import json, sys
hello, c, nc = [json.loads(l) for l in open(sys.argv[1])]
assert c["tokens"] == 5 and nc["tokens"] == 5 and c["seconds"] > 0, (c, nc)
assert c["last"] == nc["last"], ("greedy tokens with and without the cache differ", c, nc)
EOF
if [ ! -s "$tmp/check" ]; then ok "gen worker: cached and uncached greedy generation agree"
else not_ok "gen worker: cached and uncached greedy generation agree" "$(head -c 600 "$tmp/check")"; fi

"$bench" --worker train --config nope --threads 1 </dev/null >"$tmp/bad" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q '"error":"worker: need --worker train|gen' "$tmp/bad"; then ok "worker refuses an unknown configuration"
else not_ok "worker refuses an unknown configuration" "exit $rc: $(head -c 300 "$tmp/bad")"; fi

"$bench" --worker train --config tiny --threads 1 --precision fp16 </dev/null >"$tmp/bad" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -qF '"error":"worker: --precision '"'fp16'"': expected fp32 or bf16"' "$tmp/bad"; then
  ok "worker refuses an unknown precision"
else not_ok "worker refuses an unknown precision" "exit $rc: $(head -c 300 "$tmp/bad")"; fi

# MINIGRAD_ISA and MINIGRAD_BF16_PATH name the paths (generic and the emulation exist everywhere);
# a name that is no path is a warning, and the detected path stays.
MINIGRAD_ISA=generic MINIGRAD_BF16_PATH=emulated "$bench" --worker train --config tiny --threads 1 \
  --precision bf16 </dev/null >"$tmp/env" 2>&1
MINIGRAD_ISA=sse4 "$bench" --worker train --config tiny --threads 1 </dev/null >"$tmp/env2" 2>&1
if grep -qF '"isa":"generic bf16 emulated"' "$tmp/env" &&
  grep -qF 'warning: MINIGRAD_ISA=sse4: not a path (generic, avx2, avx512); using ' "$tmp/env2" &&
  grep -qF '"ready":true' "$tmp/env2"; then ok "MINIGRAD_ISA and MINIGRAD_BF16_PATH choose the paths"
else not_ok "MINIGRAD_ISA and MINIGRAD_BF16_PATH choose the paths" "$(cat "$tmp/env" "$tmp/env2" | head -c 600)"; fi

# A whole run, minigrad only, on 1 and 2 threads.
"$bench" --configs tiny --threads 1,2 --no-pytorch --steps 3 --warmup 1 --gen-runs 1 \
  --json "$tmp/r.json" --png "$tmp/r.png" >"$tmp/run" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "tiny run exits 0"; else not_ok "tiny run exits 0" "exit $rc: $(tail -c 800 "$tmp/run")"; fi
python3 - "$tmp/r.json" "$ref" <<'EOF' >"$tmp/check" 2>&1
import importlib.util, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
need = {"bench", "config", "threads", "tokens_per_s", "mfu", "peak_rss_mb", "impl", "cpu"}
# the CPU the figures came from, as /proc/cpuinfo names it, and its units
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
if model:
    assert all(r["cpu"].startswith(model + " (") and "amx" in r["cpu"] for r in recs), (model, recs[0]["cpu"])
for r in recs:
    assert need <= set(r), (need - set(r), r)
    assert r["impl"] == "minigrad" and r["config"] == "tiny", r
train = [r for r in recs if r["bench"] == "train"]
gen = [r for r in recs if r["bench"] == "gen"]
assert sorted(r["threads"] for r in train) == [1, 2], train
assert len(gen) == 4 and {(r["threads"], r["cache"]) for r in gen} == {(1, True), (1, False), (2, True), (2, False)}, gen
for r in train:
    assert r["steps"] == 3 and r["ms_per_step"] > 0 and 0 < r["mfu"] < 1, r
    assert abs(r["tokens_per_s"] - 3 * 24 / (r["ms_per_step"] / 1e3)) < 1e-3 * r["tokens_per_s"], r
    assert r["peak_rss_mb"] > r["arena_peak_mb"] > 0, r
for r in gen:
    assert r["new_tokens"] == 8 and r["gen_tokens_per_s"] > 0, r
    # a tiny run lasts well under a sample's 0.25 s: several runs back to back make each sample
    assert 1 < r["reps_per_run"] <= 64 and r["runs"] == 1, r
# the C driver and the PyTorch reference count model FLOPs the same way
spec = importlib.util.spec_from_file_location("ref", sys.argv[2])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
# the C driver and the PyTorch reference generate the same number of tokens
assert ref.gen_tokens("tiny") == 8, ref.gen_tokens("tiny")
cfg = ref.CONFIGS["tiny"]
want = ref.model_flops_per_token(cfg) * cfg["B"] * cfg["T"] / 1e9
for r in train:
    assert abs(r["model_gflop_per_step"] - want) < 1e-5 * want, (r["model_gflop_per_step"], want)
# the formula itself, by hand for textgen: 6 (12*3*256^2 + 256*256) + 6*3*128*256 per token
assert ref.model_flops_per_token(ref.CONFIGS["textgen"]) == 6 * (12 * 3 * 256**2 + 256 * 256) + 6 * 3 * 128 * 256
EOF
if [ ! -s "$tmp/check" ]; then ok "JSON lines carry the schema, consistent numbers and the shared FLOP formula"
else not_ok "JSON lines carry the schema, consistent numbers and the shared FLOP formula" "$(head -c 800 "$tmp/check")"; fi
if [ "$(head -c 8 "$tmp/r.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ ! -e "$tmp/r.png.panel0.png" ]; then
  ok "PNG written, temporary panels removed"
else not_ok "PNG written, temporary panels removed" "$(ls -l "$tmp")"; fi
if grep -q "minigrad tiny .*1t train:" "$tmp/run" && grep -q "^training: one AdamW step" "$tmp/run" &&
  [ "$(grep -c '^cpu: ' "$tmp/run")" -ge 2 ] && # at the start and above the tables
  grep -q "^MFU: model FLOPs .* / median time / the float32 FMA peak measured on the machine at the same thread count" "$tmp/run" &&
  grep -q "bf16 rows use that float32 peak too; .* so their MFU can pass 100%" "$tmp/run"; then ok "table printed, MFU's peak said"
else not_ok "table printed, MFU's peak said" "$(tail -c 1500 "$tmp/run")"; fi

# A long configuration (music's rounds): minigrad's float32 and bf16 run 3 steps with PyTorch's
# round and two more rounds of 3 between themselves, 9 steps each; --steps N still means N for all.
"$bench" --configs tiny-long --threads 1 --no-pytorch --no-gen --bf16 --warmup 1 \
  --json "$tmp/long.json" >"$tmp/long" 2>&1
rc1=$?
"$bench" --configs tiny-long --threads 1 --no-pytorch --no-gen --steps 2 --warmup 1 \
  --json "$tmp/long2.json" >"$tmp/long2" 2>&1
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && python3 - "$tmp/long.json" "$tmp/long2.json" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert sorted((r["impl"], r["steps"]) for r in a if r["bench"] == "train") == [("minigrad", 9), ("minigrad-bf16", 9)], a
assert [(r["impl"], r["steps"]) for r in b if r["bench"] == "train"] == [("minigrad", 2)], b
EOF
then ok "long configurations: 9 minigrad steps in three rounds, --steps N for all"
else not_ok "long configurations: 9 minigrad steps in three rounds, --steps N for all" \
  "exit $rc1 $rc2: $(tail -c 600 "$tmp/long") $(tail -c 300 "$tmp/long2")"; fi

# --report: an earlier run's JSON gives the same JSON back, and a foreign line is named.
"$bench" --report "$tmp/r.json" --json "$tmp/again.json" --png "$tmp/again.png" >"$tmp/rep" 2>&1
rc=$?
if [ $rc -eq 0 ] && cmp -s "$tmp/r.json" "$tmp/again.json" && grep -q "^training: one AdamW step" "$tmp/rep"; then
  ok "--report reproduces the run's JSON and table"
else not_ok "--report reproduces the run's JSON and table" "exit $rc: $(diff "$tmp/r.json" "$tmp/again.json" | head -c 600)"; fi
# A full disk under each output: the JSON, the PNG, the table on stdout fail the run by name.
if [ -c /dev/full ]; then
  expect_exit "--json on a full disk is named" 1 "/dev/full: write failed: No space left on device" \
    --report "$tmp/r.json" --json /dev/full
  expect_exit "--png on a full disk is named" 1 "/dev/full: write failed: No space left on device" \
    --report "$tmp/r.json" --png /dev/full
  "$bench" --report "$tmp/r.json" >/dev/full 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -qF "bench_train: standard output: write failed: No space left on device" "$tmp/err" &&
    [ -c /dev/full ]; then ok "the table on a full disk is named"
  else not_ok "the table on a full disk is named" "exit $rc: $(head -c 400 "$tmp/err")"; fi
else
  ok "full disk # SKIP /dev/full not found"
fi
{ head -1 "$tmp/r.json"; echo '{"bench":"train","config":"galaxy","threads":1,"impl":"minigrad"}'; } >"$tmp/bad.json"
"$bench" --report "$tmp/bad.json" >"$tmp/rep" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "bad.json:2: not a bench_train record" "$tmp/rep"; then ok "--report names a foreign line"
else not_ok "--report names a foreign line" "exit $rc: $(head -c 400 "$tmp/rep")"; fi
# The bf16 targets follow the unit the run had: AMX 3x fp32 and 2x PyTorch bf16, AVX512-BF16 1.5x
# fp32, the emulation none; textgen's 1-thread ratio is shown against its all-threads target, not
# judged (records made up for the report, not measured).
rec() { echo '{"bench":"train","config":"'"$1"'","threads":'"$2"',"impl":"'"$3"'","steps":1,"tokens_per_s":'"$4"',"backend":"'"$5"'"}'; }
{ rec textgen 1 minigrad 1000 avx512; rec textgen 1 minigrad-bf16 3500 "avx512 bf16 amx"
  rec textgen 1 pytorch-bf16 2000 "SkylakeX"; rec music 1 minigrad 100 avx512
  rec music 1 minigrad-bf16 140 "avx512 bf16 avx512bf16"; rec textgen 2 minigrad 1000 avx2
  rec textgen 2 minigrad-bf16 400 "avx2 bf16 emulated"; rec textgen 1 pytorch 500 "SkylakeX"; } >"$tmp/bf16.json"
"$bench" --report "$tmp/bf16.json" >"$tmp/rep" 2>&1
rc=$?
if [ $rc -eq 0 ] &&
  grep -qE "textgen training tokens/s, bf16 on amx / minigrad fp32, 1t +3.50x  \(target >= 3.00x\)  met$" "$tmp/rep" &&
  grep -qE "textgen training tokens/s, bf16 on amx / PyTorch bf16 autocast, 1t +1.75x  \(target >= 2.00x\)  not met$" "$tmp/rep" &&
  grep -qE "music training tokens/s, bf16 on avx512bf16 / minigrad fp32, 1t +1.40x  \(target >= 1.50x\)  not met$" "$tmp/rep" &&
  grep -qE "textgen training tokens/s, bf16 on emulated / minigrad fp32, 2t +0.40x  \(no target without a bf16 unit\)$" "$tmp/rep" &&
  [ "$(grep -c "bf16 on" "$tmp/rep")" = 4 ] &&
  grep -qF "performance targets, at each thread count measured (textgen's minigrad / PyTorch target applies on all threads, 2 here):" "$tmp/rep" &&
  grep -qE "textgen training tokens/s, minigrad / PyTorch, 1t +2.00x  \(target >= 1.50x\)  above the target, which applies on all threads only$" "$tmp/rep"
then ok "--report judges bf16 by the unit the run had; the targets as a plain statement"
else not_ok "--report judges bf16 by the unit the run had; the targets as a plain statement" \
  "exit $rc: $(grep -A30 '^performance targets' "$tmp/rep" | head -c 1500)"; fi
"$bench" --report "$tmp/missing.json" >"$tmp/rep" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "bench_train: cannot read $tmp/missing.json: No such file or directory" "$tmp/rep"; then
  ok "--report names a missing file"
else not_ok "--report names a missing file" "exit $rc: $(head -c 400 "$tmp/rep")"; fi
expect_exit "--json in a missing folder is named" 1 "bench_train: cannot write $tmp/nodir/r.json: No such file or directory" \
  --report "$tmp/r.json" --json "$tmp/nodir/r.json"

# --gen-tokens: the length asked for, or what fits the context after the prompt, said so.
"$bench" --configs tiny --threads 1 --no-pytorch --steps 1 --warmup 1 --gen-runs 1 --gen-tokens 3 \
  --json "$tmp/g3.json" >"$tmp/g3" 2>&1
"$bench" --configs tiny --threads 1 --no-pytorch --steps 1 --warmup 1 --gen-runs 1 --gen-tokens 100 \
  --json "$tmp/g100.json" >"$tmp/g100" 2>&1
if grep -q '"bench":"gen".*"new_tokens":3,' "$tmp/g3.json" && ! grep -q '"bench":"gen".*"new_tokens":[^3]' "$tmp/g3.json" &&
  grep -q '"bench":"gen".*"new_tokens":8,' "$tmp/g100.json" &&
  grep -qF "tiny: 8 new tokens per generation run, what fits the context after the 16-token prompt" "$tmp/g100"; then
  ok "--gen-tokens sets the generation length, capped at the context"
else not_ok "--gen-tokens sets the generation length, capped at the context" "$(cat "$tmp/g3" "$tmp/g100" | head -c 800)"; fi

# A PyTorch that cannot be imported is reported and the run goes on with minigrad alone.
"$bench" --configs tiny --threads 1 --python /bin/false --steps 1 --warmup 1 --gen-runs 1 >"$tmp/nopt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "failed: minigrad only" "$tmp/nopt"; then ok "missing PyTorch: minigrad only"
else not_ok "missing PyTorch: minigrad only" "exit $rc: $(head -c 600 "$tmp/nopt")"; fi

# A PyTorch worker that dies is reported by name; the run fails but finishes.
cat >"$tmp/fake.py" <<'EOF'
import sys
sys.exit(3)
EOF
"$bench" --configs tiny --threads 1 --python /usr/bin/python3 --pytorch-script "$tmp/fake.py" --steps 1 --warmup 1 \
  --gen-runs 1 >"$tmp/dead" 2>&1
rc=$?
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  ok "dead PyTorch worker # SKIP no torch: the fake worker is never started"
elif [ $rc -eq 1 ] && grep -q "pytorch train tiny 1t worker exited with status 3" "$tmp/dead" &&
  grep -q "minigrad tiny .*1t train:" "$tmp/dead"; then ok "dead PyTorch worker: named, minigrad still measured, exit 1"
else not_ok "dead PyTorch worker: named, minigrad still measured, exit 1" "exit $rc: $(head -c 800 "$tmp/dead")"; fi

tap_done
