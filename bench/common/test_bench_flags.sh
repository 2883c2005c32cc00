#!/usr/bin/env bash
# The numeric flags of bench_gemm and bench_rowops (their measurements take minutes and run only
# under `meson test --benchmark`): out-of-range and non-numeric values are refused, naming the flag.
#   test_bench_flags.sh BENCH_GEMM BENCH_ROWOPS
set -uo pipefail
. "$(dirname "$0")/tap.sh"

for bench in "$@"; do
  name=$(basename "$bench")
  expect_exit "$name: --reps 0 refused" 2 "$name: --reps: 0 is out of range 1..100000" --reps 0
  expect_exit "$name: --reps past int refused" 2 "$name: --reps: 4294967297 is out of range 1..100000" --reps 4294967297
  expect_exit "$name: --reps garbage refused" 2 "$name: --reps expects an integer in 1..100000, got '3x'" --reps 3x
done
tap_done
