#!/bin/sh
# Builds the libFuzzer targets with clang (address and undefined-behaviour sanitizers, coverage
# in the libraries too) in their own build folder and runs each target for a while.
#
#   fuzz/run.sh [-t SECONDS] [-T TIMEOUT] [-b BUILD_DIR] [-o OUT_DIR] [TARGET...]
#
#   -t SECONDS   time per target (default 60), libFuzzer -max_total_time
#   -T TIMEOUT   seconds one input may take before it counts as a hang (default 10), libFuzzer
#                -timeout
#   -b BUILD_DIR the clang build folder (default build-fuzz in the repository root)
#   -o OUT_DIR   where the work goes (default BUILD_DIR/fuzz-out): OUT_DIR/<target>/corpus
#                (the seeds plus what the fuzzer found, kept between runs), crash-*, timeout-*,
#                oom-* files (the inputs at fault) and log.txt
#   TARGET       safetensors, config, midi (default: all)
#
# Runs one target at a time, in libFuzzer's fork mode with one child (one core), which goes on
# after a finding. Prints, per target: inputs tried (execs), crashes (leaks and broken properties
# included), hangs (inputs over the timeout), out-of-memory stops, and where their inputs went.
# Exits 1 when any target crashed, hung or ran out of memory, 2 on a setup or build failure.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
secs=60
hang=10
build=$root/build-fuzz
out=
while getopts t:T:b:o:h opt; do
    case $opt in
    t) secs=$OPTARG ;;
    T) hang=$OPTARG ;;
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || out=$build/fuzz-out
targets=${*:-safetensors config midi}

# ---- clang with libFuzzer ----
clang_ok() {
    command -v clang >/dev/null 2>&1 || return 1
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$tmp/t.c"
    clang -fsanitize=fuzzer,address,undefined "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! clang_ok; then
    echo "run.sh: clang with libFuzzer not found: installing clang and libclang-rt-14-dev"
    if [ "$(id -u)" = 0 ]; then
        sudo=
    elif command -v sudo >/dev/null 2>&1; then
        sudo=sudo
    else
        echo "run.sh: not root and no sudo: install the Debian packages clang and libclang-rt-14-dev" >&2
        exit 2
    fi
    $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q clang libclang-rt-14-dev >/dev/null || {
        echo "run.sh: apt-get install clang libclang-rt-14-dev failed" >&2
        exit 2
    }
    clang_ok || { echo "run.sh: clang still cannot link a libFuzzer target" >&2; exit 2; }
fi

# ---- the build ----
if [ ! -f "$build/build.ninja" ]; then
    CC=clang meson setup "$build" "$root" -Dfuzz=true -Dbuildtype=debugoptimized \
        -Db_sanitize=address,undefined -Db_lundef=false -Dnative=false -Dtests=disabled \
        -Dc_args=-fsanitize=fuzzer-no-link -Dc_link_args=-fsanitize=fuzzer-no-link >"$tmp/setup.log" 2>&1 || {
        cat "$tmp/setup.log" >&2
        echo "run.sh: meson setup of $build failed" >&2
        exit 2
    }
fi
exes=
for t in $targets; do exes="$exes fuzz/fuzz_$t"; done
# shellcheck disable=SC2086
ninja -C "$build" -j2 $exes >"$tmp/build.log" 2>&1 || {
    tail -40 "$tmp/build.log" >&2
    echo "run.sh: building the fuzz targets in $build failed" >&2
    exit 2
}

# ---- the runs ----
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
summary=
for t in $targets; do
    dir=$out/$t
    mkdir -p "$dir/corpus"
    rm -f "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* "$dir"/leak-*
    seeds=$here/corpus/$t
    log=$dir/log.txt
    echo "run.sh: fuzzing $t for $secs s (seeds $seeds, corpus $dir/corpus)"
    # -fork=1: one child process at a time (one core); the parent starts a new one after a crash,
    # a hang or an out-of-memory stop, so that one finding does not end the run.
    (cd "$dir" && "$build/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$secs" -timeout="$hang" -rss_limit_mb=2048 -artifact_prefix="$dir/" \
        "$dir/corpus" "$seeds" >"$log" 2>&1) || true
    # the parent's last progress line: "#EXECS: cov: C ft: F corp: N ... oom/timeout/crash: O/T/C ..."
    last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
    execs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    otc=$(echo "$last" | sed -n 's|.*oom/timeout/crash: \([0-9]*/[0-9]*/[0-9]*\).*|\1|p')
    ooms=$(echo "${otc:-0/0/0}" | cut -d/ -f1)
    hangs=$(echo "${otc:-0/0/0}" | cut -d/ -f2)
    crashes=$(echo "${otc:-0/0/0}" | cut -d/ -f3)
    files=$(find "$dir" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    if [ -z "$last" ]; then
        line=$(printf '%-12s did not run: see %s' "$t" "$log")
        status=1
    else
        line=$(printf '%-12s execs %10s  crashes %s  hangs %s  oom %s  coverage %s' "$t" "$execs" "$crashes" "$hangs" "$ooms" "$cov")
        if [ "$crashes$hangs$ooms" != 000 ] || [ "$files" != 0 ]; then
            status=1
            line="$line  -> $files input(s) in $dir (replay one: $build/fuzz/fuzz_$t FILE; log $log)"
        fi
    fi
    echo "$line"
    summary="$summary$line
"
done
echo
echo "run.sh: summary ($secs s per target, timeout $hang s, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores)"
printf '%s' "$summary"
exit $status
