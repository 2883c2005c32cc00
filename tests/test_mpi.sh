#!/usr/bin/env bash
# Data-parallel training under mpirun (train.h, "Data parallel"), TAP:
#   test_mpi.sh TEXTGEN MPI_TRAIN_PROG HAVE_MPI SANITIZE [CHARLSTM [FASHION_MNIST]]
# On one machine, 2 ranks x 1 thread (mpirun -np 2 --oversubscribe): 20 steps of textgen give the
# losses of 1 process with the same global batch (within 2e-5 relative: the float32 rounding of a
# different summation order, plus the 6 digits of the log); two 2-rank runs are bit-identical, and
# so is one with AdamW's moments sharded (ZeRO-1); a 2-rank checkpoint resumes in 1 process and the
# reverse; a killed rank ends the job naming the rank and the signal, with the last checkpoint
# whole; a rank whose data fails stops every rank with its message. Skipped, saying why, where MPI
# is not there (a build without it, no mpirun) and in the sanitized build (Open MPI's own
# allocations at exit are reported as leaks by LeakSanitizer).
# The other programs on the library trainer split the batch the same way: charlstm (a tiny corpus)
# and fashion_mnist (synthetic IDX files, an epoch that ends in a short batch) give the losses of 1
# process with 2 ranks, and fashion_mnist's 2-rank checkpoint resumes in 1 process; each is skipped
# by name when the program is not built (an empty argument).
set -u
textgen=$1 prog=$2 have_mpi=$3 sanitize=$4 charlstm=${5:-} fmnist=${6:-}
if [ "$have_mpi" != true ]; then echo "1..0 # SKIP mpi: built without MPI (-Dmpi, libopenmpi-dev)"; exit 0; fi
if ! command -v mpirun >/dev/null; then echo "1..0 # SKIP mpi: no mpirun (Debian package openmpi-bin)"; exit 0; fi
if [ "$sanitize" != none ]; then
  echo "1..0 # SKIP mpi: sanitized build ($sanitize): LeakSanitizer reports Open MPI's own allocations"; exit 0
fi
launch=(mpirun -np 2)
ompi=false
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  ompi=true
  launch+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)
fi
# mpirun -x VAR=VALUE for Open MPI (which passes on to other hosts only what it is told); MPICH passes
# the whole environment on (the callers export the variable too)
with_env() { if $ompi; then echo "-x $1"; fi; }
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
cd "$work"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive MINIGRAD_NO_TTY=1
args=(train --steps 20 --batch 8 --block-size 32 --n-embd 64 --n-layer 2 --n-head 2 --eval-every 10
      --eval-windows 8 --ckpt-every 5 --sample-tokens 0 --threads 1)
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
# the training loss of every step of a log, in step order (a step logged again by a run resumed from
# an earlier checkpoint: its later line)
losses() {
  sed -n 's/^{"step": \([0-9]*\), "loss": \([-0-9.e+]*\),.*/\1 \2/p' "$1" |
    awk '{ l[$1] = $2; if ($1 > m) m = $1 } END { for (s = 1; s <= m; s++) print l[s] }'
}
# max relative difference of two loss columns, or "steps" when the counts differ
compare() {
  paste <(losses "$1") <(losses "$2") | awk -v want="$(losses "$1" | wc -l)" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r; k++ }
    END { if (k != want || k == 0) print "steps"; else printf "%.3g\n", m }'
}
within() { [ "$1" != steps ] && awk -v r="$1" 'BEGIN { exit !(r <= 2e-5) }'; }
run1() { "$textgen" "${args[@]}" "$@" >>out.txt 2>&1; }
run2() { "${launch[@]}" "$textgen" "${args[@]}" "$@" >>out.txt 2>&1; }

echo "1..11"
run1 --out one && run2 --out two && d=$(compare one/log.jsonl two/log.jsonl) && within "$d" &&
  grep -q '"ranks": 2, "comm_s"' two/log.jsonl &&
  ok "20 steps of textgen, 2 ranks x 1 thread = 1 process, same global batch (max relative loss difference $d)" ||
  fail "2 ranks vs 1 process" "difference ${d:-none}" "$(tail -5 out.txt)"
run2 --out two_again && cmp -s two/model.safetensors two_again/model.safetensors &&
  cmp -s two/model.state.safetensors two_again/model.state.safetensors &&
  ok "two 2-rank runs are bit-identical (weights and training state)" || fail "2-rank runs differ" "$(tail -5 out.txt)"
# shellcheck disable=SC2046
(export MINIGRAD_TRAIN_ZERO1=1; "${launch[@]}" $(with_env MINIGRAD_TRAIN_ZERO1=1) "$textgen" "${args[@]}" --out zero >>out.txt 2>&1) &&
  cmp -s two/model.safetensors zero/model.safetensors && cmp -s two/model.state.safetensors zero/model.state.safetensors &&
  ok "ZeRO-1 (sharded AdamW moments) gives the same checkpoint bit for bit" || fail "ZeRO-1 differs" "$(tail -5 out.txt)"
run2 --out r22 --stop-after 10 && run2 --out r22 --resume && cmp -s two/model.safetensors r22/model.safetensors &&
  ok "a 2-rank run stopped at step 10 and resumed with 2 ranks ends bit for bit where an uninterrupted one does" ||
  fail "2-rank resume not exact" "$(tail -5 out.txt)"
run2 --out r21 --stop-after 10 && run1 --out r21 --resume && d=$(compare one/log.jsonl r21/log.jsonl) && within "$d" &&
  ok "a 2-rank checkpoint resumed in 1 process (max relative loss difference $d)" ||
  fail "2 -> 1 resume" "difference ${d:-none}" "$(tail -5 out.txt)"
run1 --out r12 --stop-after 10 && run2 --out r12 --resume && d=$(compare one/log.jsonl r12/log.jsonl) && within "$d" &&
  ok "a 1-process checkpoint resumed with 2 ranks (max relative loss difference $d)" ||
  fail "1 -> 2 resume" "difference ${d:-none}" "$(tail -5 out.txt)"
# shellcheck disable=SC2046
(export MINIGRAD_TRAIN_KILL=1:13; "${launch[@]}" $(with_env MINIGRAD_TRAIN_KILL=1:13) "$textgen" "${args[@]}" --out killed >killed.txt 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "rank 1" killed.txt && grep -qi "signal 9\|killed" killed.txt &&
   "$textgen" "${args[@]}" --out killed --resume >resumed.txt 2>&1 && grep -q "resumed at step 10" resumed.txt &&
   d=$(compare one/log.jsonl killed/log.jsonl) && within "$d"; then
  ok "rank 1 killed at step 13: the job ends (status $rc) naming rank 1 and the signal; the step-10 checkpoint resumes"
else
  fail "killed rank" "status $rc" "$(grep -v '^textgen \[' killed.txt | tail -8)" "$(tail -3 resumed.txt 2>/dev/null)"
fi
mkdir -p bad
"${launch[@]}" "$prog" bad fail 1 6 >bad.txt 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "rank 1 of 2: mpi_train_prog: step 6: the next batch: shard-1.bin: truncated" bad.txt &&
   grep -q "rank 1 of 2 failed, so every rank stopped" bad.txt && mkdir -p bad1 && cp bad/* bad1/ &&
   "$prog" bad1 rows >/dev/null 2>&1 && [ ! -e bad/model.safetensors.pending ]; then
  ok "a rank whose data fails at step 6 stops every rank with its rank and message; the step-4 checkpoint stays whole"
else
  fail "failing rank" "status $rc" "$(tail -8 bad.txt)"
fi

# charlstm: 8 steps on a tiny corpus, 2 ranks x 1 thread against 1 process
cl_args=(train --steps 8 --batch 6 --block-size 16 --embd 16 --hidden 32 --eval-every 4 --eval-windows 4
         --ckpt-every 4 --sample-tokens 0 --threads 1 --warmup 0 --lr 1e-2)
if [ -z "$charlstm" ]; then
  n=$((n + 1)); echo "ok $n # SKIP charlstm: not built"
else
  for i in $(seq 1 60); do echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7 % 13)) times."; done >corpus.txt
  "$charlstm" "${cl_args[@]}" --data corpus.txt --out cl_one >>out.txt 2>&1 &&
    "${launch[@]}" "$charlstm" "${cl_args[@]}" --data corpus.txt --out cl_two >>out.txt 2>&1 &&
    d=$(compare cl_one/log.jsonl cl_two/log.jsonl) && within "$d" && grep -q '"ranks": 2, "comm_s"' cl_two/log.jsonl &&
    ok "8 steps of charlstm, 2 ranks x 1 thread = 1 process, same global batch (max relative loss difference $d)" ||
    fail "charlstm: 2 ranks vs 1 process" "difference ${d:-none}" "$(tail -5 out.txt)"
fi
# fashion_mnist: 80 synthetic images (IDX files, gzip-compressed), --limit 72 and batch 16: epochs of 5
# steps, the last of 8 images; 2 epochs
if [ -z "$fmnist" ]; then
  n=$((n + 1)); echo "ok $n # SKIP fashion_mnist: not built (zlib missing)"
  n=$((n + 1)); echo "ok $n # SKIP fashion_mnist: not built (zlib missing)"
else
  mkdir -p fm_data
  # pixels from a fixed generator (Park-Miller), not /dev/urandom: the 1-process and 2-rank losses
  # differ by the order of the gradient sums, and how much depends on the images
  pixels() { LC_ALL=C awk -v n=$((80 * 784)) -v s="$1" \
    'BEGIN { for (i = 0; i < n; i++) { s = (s * 16807) % 2147483647; printf "%c", 1 + s % 255 } }'; }
  seed=1
  for split in train t10k; do
    { printf '\x00\x00\x08\x03\x00\x00\x00\x50\x00\x00\x00\x1c\x00\x00\x00\x1c'
      pixels $seed; } | gzip -n >fm_data/$split-images-idx3-ubyte.gz
    seed=$((seed + 1))
    { printf '\x00\x00\x08\x01\x00\x00\x00\x50'
      for i in $(seq 0 79); do printf "\\$(printf %03o $((i % 10)))"; done; } | gzip -n >fm_data/$split-labels-idx1-ubyte.gz
  done
  fm_args=(train --data fm_data --limit 72 --batch 16 --epochs 2 --threads 1 --eval-batch 40)
  "$fmnist" "${fm_args[@]}" --out fm_one >>out.txt 2>&1 &&
    "${launch[@]}" "$fmnist" "${fm_args[@]}" --out fm_two >fm_two.txt 2>&1 &&
    d=$(compare fm_one/train.jsonl fm_two/train.jsonl) && within "$d" &&
    [ "$(losses fm_one/train.jsonl | wc -l)" -eq 10 ] && grep -q '"ranks": 2, "comm_s"' fm_two/train.jsonl &&
    grep -q "epoch 2: test accuracy" fm_two.txt && grep -q "confusion matrix" fm_two.txt && [ -s fm_two/curves.png ] &&
    ok "10 steps of fashion_mnist, 2 ranks x 1 thread = 1 process, short batches too (max relative loss difference $d)" ||
    fail "fashion_mnist: 2 ranks vs 1 process" "difference ${d:-none}" "$(tail -5 out.txt)" "$(tail -5 fm_two.txt 2>/dev/null)"
  "${launch[@]}" "$fmnist" "${fm_args[@]}" --out fm_r21 --stop-after 7 >>out.txt 2>&1 &&
    "$fmnist" "${fm_args[@]}" --out fm_r21 --resume >fm_r21.txt 2>&1 && d=$(compare fm_one/train.jsonl fm_r21/train.jsonl) &&
    within "$d" && grep -q "resumed at step 7" fm_r21.txt && grep -q "epoch 2: test accuracy" fm_r21.txt &&
    ok "fashion_mnist: a 2-rank run stopped at step 7 (mid-epoch) resumes in 1 process (max relative loss difference $d)" ||
    fail "fashion_mnist: 2 -> 1 resume" "difference ${d:-none}" "$(tail -5 out.txt)" "$(tail -5 fm_r21.txt 2>/dev/null)"
fi
