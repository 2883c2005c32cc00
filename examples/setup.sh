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
  echo "setup: installing ${missing[*]}"
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
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" "$@" >/dev/null
else
  meson setup "$build" "$@" >/dev/null
fi
ninja -C "$build" >/dev/null
