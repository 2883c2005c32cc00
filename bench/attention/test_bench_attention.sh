#!/usr/bin/env bash
# The bench_attention tool itself, not the measurement: argument errors, and one textgen run of a
# single repetition (under a second) whose JSON lines are checked for the fields readers rely on.
#   test_bench_attention.sh BENCH_ATTENTION
set -uo pipefail
bench=$1
. "$(dirname "$0")/../common/tap.sh"

if "$bench" --help >"$tmp/out" 2>&1 && grep -q '^usage: bench_attention' "$tmp/out"; then ok "--help prints the usage"
else not_ok "--help prints the usage" "$(head -c 300 "$tmp/out")"; fi
expect_exit "unknown option is named" 2 "'--bogus'" --bogus
expect_exit "option without its value" 2 "'--json' needs a value" --json
expect_exit "zero repetitions refused" 2 "--reps: 0 is out of range 1.." --reps 0
expect_exit "repetitions with garbage refused" 2 "--reps expects an integer in 1.." --reps 3x
expect_exit "unknown configuration is named" 2 "unknown configuration 'nope'" --config nope
expect_exit "unwritable --json file" 1 "$tmp/no/such/dir/a.json" --json "$tmp/no/such/dir/a.json"

# One real run: per thread count, a fused and a reference line for train and for decode, and a
# "fused bf16" train line where the CPU has the bf16 kernels.
"$bench" --config textgen --reps 1 --json "$tmp/a.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ -f "$tmp/a.json" ] || : >"$tmp/a.json"
lines=$(wc -l <"$tmp/a.json")
bf16_rows=$(grep -c '"impl":"fused bf16"' "$tmp/a.json")
if [ $rc -eq 0 ] && [ "$lines" -ge 4 ] && [ $(((lines - bf16_rows) % 4)) -eq 0 ]; then ok "textgen run writes JSON lines"
else not_ok "textgen run writes JSON lines" "exit $rc, $lines lines, stderr: $(head -c 300 "$tmp/err")"; fi
bad=$(grep -cv '^{"bench":"attention","config":"textgen","kind":"\(train\|decode\)","impl":"\(minigrad fused\|reference\|fused bf16\)",.*"threads":[0-9]*,.*"fwd_ms":[0-9.]*,"bwd_ms":[^,]*,.*"gflops":[0-9.]*' "$tmp/a.json")
if [ "$lines" -gt 0 ] && [ "$bad" -eq 0 ]; then ok "every JSON line has bench, config, kind, impl, threads, fwd_ms, bwd_ms, gflops"
else not_ok "every JSON line has bench, config, kind, impl, threads, fwd_ms, bwd_ms, gflops" "$(head -c 600 "$tmp/a.json")"; fi
if [ "$lines" -gt 0 ] && [ "$(grep -c '"kind":"decode".*"bwd_ms":null' "$tmp/a.json")" -eq $(((lines - bf16_rows) / 2)) ] &&
   [ "$(grep -c '"kind":"train".*"bwd_ms":[0-9]' "$tmp/a.json")" -eq $(((lines - bf16_rows) / 2 + bf16_rows)) ]; then
  ok "decode rows have no backward, train rows do"
else not_ok "decode rows have no backward, train rows do" "$(head -c 600 "$tmp/a.json")"; fi

# A full disk under the JSON file and under the table: the run fails, naming them.
if [ -c /dev/full ]; then
  expect_exit "--json on a full disk is named" 1 "/dev/full: write failed: No space left on device" \
    --config textgen --reps 1 --json /dev/full
  "$bench" --config textgen --reps 1 >/dev/full 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -qF "bench_attention: standard output: write failed: No space left on device" "$tmp/err"
  then ok "the table on a full disk is named"
  else not_ok "the table on a full disk is named" "exit $rc: $(head -c 400 "$tmp/err")"; fi
else
  ok "full disk # SKIP /dev/full not found"
fi

tap_done
