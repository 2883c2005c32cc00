# What the benchmark tools' own tests share (sourced, not run): a scratch folder $tmp removed on
# exit, TAP lines, and a check of a program's exit status and message. The sourcing script sets
# $bench to the program under test before calling expect_exit, and ends with tap_done.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
# not_ok NAME [DETAIL]: DETAIL as TAP comment lines, each line prefixed with '#'
not_ok() {
  n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"
  if [ $# -gt 1 ]; then printf '%s\n' "$2" | sed 's/^/# /'; fi
}

# expect_exit NAME STATUS GREP ARGS...: "$bench" ARGS exits with STATUS and says GREP on stderr
expect_exit() {
  local name=$1 status=$2 pattern=$3
  shift 3
  "$bench" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq "$status" ] && grep -qF -- "$pattern" "$tmp/err"; then ok "$name"
  else not_ok "$name" "exit $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}

# The plan line last, and the exit status: 0 when every check passed.
tap_done() {
  echo "1..$n"
  [ "$fails" -eq 0 ]
}
