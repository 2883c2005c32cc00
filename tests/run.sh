#!/usr/bin/env bash
# The README's second command: install what is missing, build, run every test suite, then build
# again with AddressSanitizer + UndefinedBehaviorSanitizer and run them all once more. The release
# pass includes the install suite (tests/install: a third build, installed into a temporary prefix
# and used from outside); the sanitizer pass reports it skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
werror=()
[ "${CI:-}" = true ] && werror=(--werror)

echo "== build and test (release)"
"$root/examples/setup.sh" build "${werror[@]}"
meson test -C build --print-errorlogs --num-processes 2

echo "== build and test (ASan + UBSan)"
"$root/examples/setup.sh" build-sanitize "${werror[@]}" -Dbuildtype=debugoptimized \
  -Db_sanitize=address,undefined -Db_lundef=false
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 meson test -C build-sanitize --print-errorlogs \
  --num-processes 2 --timeout-multiplier 3
echo "== all tests passed"
