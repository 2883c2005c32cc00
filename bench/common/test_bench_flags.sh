#!/usr/bin/env bash
# The numeric flags of bench_gemm and bench_rowops (their measurements take minutes and run only
# under `meson test --benchmark`): out-of-range and non-numeric values are refused, naming the flag;
# bench_gemm's bf16 path flags, and its short --small-m run. With BENCH_FASHION_MNIST (built when
# zlib is found): an unknown argument is named. The --help of the three.
#   test_bench_flags.sh BENCH_GEMM BENCH_ROWOPS [BENCH_FASHION_MNIST]
set -uo pipefail
. "$(dirname "$0")/tap.sh"

for bench in "$1" "$2"; do
  name=$(basename "$bench")
  max=100000
  [ "$name" = bench_rowops ] && max=1000
  expect_exit "$name: --reps 0 refused" 2 "$name: --reps: 0 is out of range 1..$max" --reps 0
  expect_exit "$name: --reps past int refused" 2 "$name: --reps: 4294967297 is out of range 1..$max" --reps 4294967297
  expect_exit "$name: --reps garbage refused" 2 "$name: --reps expects an integer in 1..$max, got '3x'" --reps 3x
done
bench=$2
expect_exit "bench_rowops: --reps past its limit refused as out of range" 2 "bench_rowops: --reps: 1001 is out of range 1..1000" --reps 1001

if [ $# -ge 3 ]; then
  bench=$3 # bench_fashion_mnist
  expect_exit "bench_fashion_mnist: unknown argument named" 2 \
    "bench_fashion_mnist: unknown or incomplete argument '--bogus'" --bogus
  expect_exit "bench_fashion_mnist: --python without a value named" 2 \
    "bench_fashion_mnist: unknown or incomplete argument '--python'" --python
fi

# --help of each: on stdout, exit 0, saying what it measures against what, each option with its
# default, and how long a default run takes.
help_says() { # NAME PATTERN...: every PATTERN is in "$bench" --help
  local name=$1 rc missing=""
  shift
  "$bench" --help >"$tmp/out" 2>"$tmp/err"
  rc=$?
  for p in "$@"; do grep -qF -- "$p" "$tmp/out" || missing="$missing '$p'"; done
  if [ $rc -eq 0 ] && [ -z "$missing" ] && [ ! -s "$tmp/err" ]; then ok "$name --help"
  else not_ok "$name --help" "exit $rc, missing:$missing; $(head -c 600 "$tmp/out" "$tmp/err")"; fi
}
bench=$1
help_says bench_gemm "usage: bench_gemm" "against OpenBLAS" "--reps N         timed calls" "(default 11, --quick 3" \
  "--small-m " "A default run" "about 5 minutes"
bench=$2
help_says bench_rowops "usage: bench_rowops" "reference" "--min " "(default 15; 1..1000)" "--quick takes about"
if [ $# -ge 3 ]; then
  bench=$3
  help_says bench_fashion_mnist "usage: bench_fashion_mnist" "against PyTorch" "(default 20;" "(default 3;" \
    "(default 2," "(default 128;" "default /usr/bin/python3" "--bf16 " "A default run"
fi

bench=$1 # bench_gemm
expect_exit "bench_gemm: unknown --bf16 path refused" 2 \
  "bench_gemm: --bf16 bogus: not a bf16 path this CPU and build support (best: " --bf16 bogus
expect_exit "bench_gemm: --bf16-only with --bf16 none refused" 2 \
  "bench_gemm: --bf16-only with --bf16 none measures nothing" --bf16-only --bf16 none
expect_exit "bench_gemm: --small-m with --bf16 refused" 2 \
  "bench_gemm: --small-m measures every bf16 path the machine has; leave out --bf16" --small-m --bf16 emulated

# --small-m: every bf16 path the machine has against float32 on products of few rows, as a
# Linear layer runs them; the emulation exists everywhere.
"$bench" --small-m --quick --reps 1 --json "$tmp/s.json" >"$tmp/out" 2>&1
rc=$?
rows=$(grep -cE '^(1|4|16|64) +256x768 +1 +[0-9.]+ +[0-9.]+' "$tmp/out")
lines=$(grep -c '"bench":"gemm_small_m".*"isa":"emulated"' "$tmp/s.json" 2>/dev/null)
if [ $rc -eq 0 ] && [ "$rows" = 4 ] && [ "${lines:-0}" -ge 4 ] && grep -q "fastest bf16" "$tmp/out" &&
  ! grep -q "^shape " "$tmp/out" && grep -qF "openblas: skipped (--small-m)" "$tmp/out" &&
  grep -qE '^cpu: .+ \((avx512f|avx2|no avx2)' "$tmp/out"; then ok "bench_gemm --small-m: the CPU, a row per M, JSON per path"
else not_ok "bench_gemm --small-m: the CPU, a row per M, JSON per path" "exit $rc rows $rows json $lines: $(head -c 1200 "$tmp/out")"; fi
tap_done
