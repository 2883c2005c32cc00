#!/usr/bin/env bash
# Shared by examples/quickstart.sh and tests/run.sh: installs the Debian packages minigrad needs
# (only the missing ones), then configures and builds into the given directory.
#   examples/setup.sh BUILD_DIR [meson options...]
set -euo pipefail

PACKAGES=(build-essential meson ninja-build pkg-config check libstb-dev libcjson-dev zlib1g-dev bible-kjv midicsv)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} (apt-get; a minute or more on a fresh machine)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: setup.sh BUILD_DIR [meson options]}
shift
cd "$root"
# The tools' own output goes to a log, shown only when they fail; what is under way is said here,
# and on a terminal ninja's live status line shows the build's progress.
mkdir -p "$build"
log="$build/setup.log"
run_logged() {
  if ! "$@" >"$log" 2>&1; then
    echo "setup: failed: $*" >&2
    tail -n 40 "$log" >&2
    echo "setup: the whole output is in $log" >&2
    exit 1
  fi
}
if [ -f "$build/build.ninja" ]; then
  run_logged meson setup --reconfigure "$build" "$@"
else
  echo "setup: configuring $build (meson)"
  run_logged meson setup "$build" "$@"
fi
steps=$(ninja -C "$build" -n 2>/dev/null | grep -c '^\[' || true)
if [ "${steps:-0}" -gt 20 ]; then
  echo "setup: building in $build ($steps steps: minutes from scratch on 2 cores)"
  if [ -t 1 ]; then
    ninja -C "$build"
  else
    run_logged ninja -C "$build"
  fi
  echo "setup: build done"
else
  run_logged ninja -C "$build" # up to date, or a few steps
fi
